"""Which inputs a compile donates to which outputs: the pairs asked for (`donate=`,
`--donate INPUT=OUTPUT`), checked against the model, and the pairs its names imply.

Names that imply a pair, each only for an input and an output of the same dtype and
shape that no other pair claims (`infer=False`, `--no-infer-donation`, turns it off):

    past_key_values.N.key -> present.N.key     (Hugging Face's exporters)
    past_keys             -> present_keys      (the static-cache interface of issue 15)
    past.N.value          -> present.N.value   (any other name starting with "past")

An output named as JAX names the fields of a returned dict, result['present_keys'], matches
by the field's name.

What a donation means for the plan and the runtime: aot/planning/donation.py.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aot.errors import ArgumentError
from aot.ir.graph import Graph
from aot.plan import Donation

# input-name prefix -> the output-name prefix it implies; the first that matches applies
NAME_RULES = (("past_key_values", "present"), ("past", "present"))
# jax.jit(f).lower(...) names the outputs of an f returning a dict result['field']
JAX_FIELD = re.compile(r"""result\[(?:'([^']*)'|"([^"]*)")\]""")


@dataclass(frozen=True)
class DonationChoice:
    """The pairs to compile, in input order, and for each whether the names implied it."""

    pairs: tuple[Donation, ...]
    inferred: tuple[bool, ...]
    skipped: tuple[str, ...]  # pairs the names suggested but that cannot be (for -v)


def check_donate(donate: Any) -> dict[str, str]:
    """`donate` as the API takes it, {input name: output name}; anything else is an ArgumentError."""
    if donate is None:
        return {}
    if not isinstance(donate, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in donate.items()):
        raise ArgumentError(f"donate must be a dict of input name -> output name, e.g. "
                            f"{{'past_keys': 'present_keys'}}; got {donate!r}",
                            cli=f"--donate takes INPUT=OUTPUT, e.g. --donate past_keys=present_keys; got {donate!r}")
    outputs = list(donate.values())
    twice = sorted({o for o in outputs if outputs.count(o) > 1})
    if twice:
        raise ArgumentError(f"donate gives output {twice[0]!r} more than one input: an output can take over "
                            f"one input's buffer")
    return dict(donate)


def implied_output(name: str) -> str | None:
    """The output name that input `name` implies by NAME_RULES, or None."""
    for prefix, instead in NAME_RULES:
        if name.startswith(prefix):
            return instead + name[len(prefix):]
    return None


def choose_donations(graph: Graph, donate: Mapping[str, str], infer: bool = True) -> DonationChoice:
    """The pairs for `graph`: `donate` (checked: known names, the same dtype and shape), then,
    with `infer`, those the names imply among the inputs and outputs left."""
    inputs = {name: i for i, name in enumerate(graph.input_names)}
    outputs = {name: k for k, name in enumerate(graph.output_names)}
    chosen: dict[int, tuple[int, bool]] = {}
    for input_name, output_name in donate.items():
        if input_name not in inputs:
            raise _unknown("input", input_name, graph.input_names, input_name, output_name)
        if output_name not in outputs:
            raise _unknown("output", output_name, graph.output_names, input_name, output_name)
        i, k = inputs[input_name], outputs[output_name]
        differs = _differs(graph, i, k)
        if differs:
            raise ArgumentError(f"donate {{{input_name!r}: {output_name!r}}}: {differs}; an output can take over "
                                f"only an input of its own dtype and shape",
                                cli=f"--donate {input_name}={output_name}: {differs}; an output can take over "
                                    f"only an input of its own dtype and shape")
        chosen[i] = (k, False)
    skipped: list[str] = []
    if infer:
        taken = {k for k, _ in chosen.values()}
        by_field = dict(outputs)
        for name, k in outputs.items():
            field = JAX_FIELD.fullmatch(name)
            if field:
                by_field.setdefault(field.group(1) if field.group(1) is not None else field.group(2), k)
        for i, input_name in enumerate(graph.input_names):
            output_name = implied_output(input_name)
            if i in chosen or output_name is None or output_name not in by_field:
                continue
            k = by_field[output_name]
            output_name = graph.output_names[k]
            why = "the output takes another input" if k in taken else _differs(graph, i, k)
            if why:
                skipped.append(f"{input_name} -> {output_name}: {why}")
                continue
            chosen[i] = (k, True)
            taken.add(k)
    order = sorted(chosen)
    return DonationChoice(tuple(Donation(i, chosen[i][0]) for i in order), tuple(chosen[i][1] for i in order),
                          tuple(skipped))


def _differs(graph: Graph, i: int, k: int) -> str:
    """"" when input i and output k have one dtype and shape, else what differs."""
    a, b = graph.inputs[i].type, graph.outputs[k].type
    if a.dtype != b.dtype:
        return f"the input is {a.dtype.manifest_name}, the output {b.dtype.manifest_name}"
    if a.shape != b.shape:
        return f"the input's shape is {list(a.shape)}, the output's {list(b.shape)}"
    return ""


def _unknown(kind: str, name: str, known: list[str], input_name: str, output_name: str) -> ArgumentError:
    why = f"the model has no {kind} {name!r} (its {kind}s: {', '.join(repr(n) for n in known) or 'none'})"
    return ArgumentError(f"donate {{{input_name!r}: {output_name!r}}}: {why}",
                         cli=f"--donate {input_name}={output_name}: {why}")
