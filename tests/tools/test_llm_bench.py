"""benchmarks/llm.py in its tiny mode (--small, 1 run): one table, a row per case, every
engine timed, aot's outputs matching onnxruntime's; and a case that fails is still a row."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import llm

COLUMNS = 15  # case, tokens, 5 engines, 3 ratios, tok/s, GB/s, % of copy, cache, err


def _table(text: str) -> list[list[str]]:
    lines = [line for line in text.splitlines() if line.startswith("|")]
    assert lines, text
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


@pytest.mark.slow  # a torch export and two whole-model compiles
def test_small_run_prints_one_row_per_case(tmp_path: Path, capsys) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("jax")
    code = llm.main(["--small", "--runs", "1", "--batches", "1", "--prompts", "8", "--copy-mib", "16",
                     "--threads", "2", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"memcpy-style bandwidth: \d+\.\d GB/s", out), out
    header, rule, *rows = _table(out)
    assert len(header) == COLUMNS
    assert header[2:7] == ["aot 1t ms", "aot 2t ms", "ort 1t ms", "ort 2t ms", "jax ms"]
    assert set(rule) == {"---"}
    assert [r[0] for r in rows] == ["decode b1 @16", "prefill b1 T=8"]
    for row in rows:
        assert len(row) == COLUMNS
        assert all(float(cell) > 0 for cell in row[2:10]), row  # medians and ratios
        assert row[13] in ("in place", "copied")
        assert float(row[14]) < 1e-3, row  # aot against onnxruntime
    decode, prefill = rows
    assert float(decode[11]) > 0 and decode[12].endswith("%")  # weight streaming: decode only
    assert prefill[11] == prefill[12] == "-"
    assert (tmp_path / "llama_tiny_decode_b1_t1.aot").is_file()  # kept for profile_kernels.py


def test_failed_case_is_a_row_of_the_same_width() -> None:
    row = llm.Row(llm.Case("prefill", 1, 64, 0), problem="compile failed: no lowering")
    header, rule, line = (r for r in _table("\n".join(llm.format_table([row], 4000, 20.0, 2))))
    assert len(header) == len(rule) == len(line) == COLUMNS
    assert line[:3] == ["prefill b1 T=64", "64", "compile failed: no lowering"]
