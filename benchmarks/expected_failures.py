"""The ONE table of ONNX backend suite cases aot is expected not to pass, each with its reason.

Keys are regular expressions matched against the whole case name. A case
listed here may be rejected at compile time or compute wrong numbers; it may
never crash (a crash is a bug, reported whatever this table says).
"""
from __future__ import annotations

import re

EXPECTED_FAILURES: dict[str, str] = {
}

_COMPILED = [(re.compile(pattern), reason) for pattern, reason in EXPECTED_FAILURES.items()]


def expected_reason(name: str) -> str | None:
    """Why case `name` is expected to fail, or None if it must pass."""
    for pattern, reason in _COMPILED:
        if pattern.fullmatch(name):
            return reason
    return None
