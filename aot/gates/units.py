"""Budget values as people write them (5MB, 12ms, 5%) and measurements as people read them.

Sizes: B, KB/MB/GB (powers of 1000) and KiB/MiB/GiB (powers of 1024), case-insensitive,
a bare number is bytes. Durations: us, ms, s; a bare number is in the option's own unit
(`--max-latency-ms 12`). Percentages: `5%` or a bare `5`. A value that is none of these,
negative, or not finite is an ArgumentError naming the value and the form expected.
"""
from __future__ import annotations

import math
import re

from aot.errors import ArgumentError

_SIZE_UNITS = {
    "": 1, "b": 1,
    "kb": 1000, "mb": 1000 ** 2, "gb": 1000 ** 3,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
    # `5K`, `5M`: what `ls -h` and `du -h` print, binary there too
    "k": 1 << 10, "m": 1 << 20, "g": 1 << 30,
}
_DURATION_MS = {"us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1000.0}
_NUMBER = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Zµ%]*)\s*")


def _split(text: str, what: str, example: str) -> tuple[float, str]:
    match = _NUMBER.fullmatch(text)
    if match is None:
        raise ArgumentError(f"'{text}' is not a {what}: write a number and a unit, like {example}")
    value = float(match.group(1))
    if not math.isfinite(value):
        raise ArgumentError(f"'{text}' is not a {what}: the number must be finite")
    return value, match.group(2)


def parse_size(text: str) -> int:
    """'5MB' -> 5_000_000, '1.5KiB' -> 1536, '300' -> 300 (bytes)."""
    value, unit = _split(text, "size", "5MB or 512KiB")
    scale = _SIZE_UNITS.get(unit.lower())
    if scale is None:
        raise ArgumentError(f"'{text}': unknown size unit '{unit}' (use B, KB, MB, GB, KiB, MiB or GiB)")
    return int(round(value * scale))


def parse_duration_ms(text: str, bare_unit: str = "ms") -> float:
    """'12ms' -> 12.0, '0.5s' -> 500.0, '250us' -> 0.25; a bare number is in `bare_unit`."""
    value, unit = _split(text, "duration", "12ms or 0.5s")
    scale = _DURATION_MS.get(unit.lower() if unit != "µs" else unit) if unit else _DURATION_MS[bare_unit]
    if scale is None:
        raise ArgumentError(f"'{text}': unknown time unit '{unit}' (use us, ms or s)")
    return value * scale


def parse_percent(text: str) -> float:
    """'5%' -> 5.0, '2.5' -> 2.5."""
    value, unit = _split(text, "percentage", "5%")
    if unit not in ("", "%"):
        raise ArgumentError(f"'{text}': a percentage takes no unit but '%' (like 5%)")
    return value


def format_size(nbytes: int | None) -> str:
    """Bytes in the largest decimal unit that keeps the number at least 1: '4.80 MB', '812 B'."""
    if nbytes is None:
        return "-"
    sign = "-" if nbytes < 0 else ""
    size = abs(nbytes)
    for unit, scale in (("GB", 1000 ** 3), ("MB", 1000 ** 2), ("KB", 1000)):
        if size >= scale:
            return f"{sign}{size / scale:.2f} {unit}"
    return f"{sign}{size} B"


def format_ms(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.3f} ms" if ms < 100 else f"{ms:.1f} ms"


def format_percent(pct: float | None) -> str:
    if pct is None:
        return "-"
    shown = round(pct, 1)
    return f"{shown if shown else 0.0:+.1f}%"  # never "-0.0%"
