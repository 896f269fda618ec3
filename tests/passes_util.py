"""Helpers for pass tests: IR text in, IR text out."""
import textwrap

from aot.ir.parser import parse_graph
from aot.ir.printer import print_graph
from aot.ir.verifier import verify_graph


def run_pass(p, text: str) -> tuple[bool, str]:
    graph = parse_graph(textwrap.dedent(text).strip() + "\n")
    changed = p.run(graph)
    verify_graph(graph)
    return changed, print_graph(graph)


def ir(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"
