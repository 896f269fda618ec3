"""Memory planning: place temporaries in one arena (heap simulation + best fit).

Each temporary lives over an inclusive interval of kernel steps. Two
temporaries may share bytes only if their intervals are disjoint. Placement
is greedy by size, largest first (as TFLite's arena planner), each buffer
taking the best-fitting gap among those already placed that overlap it in
time. The lower bound any placement must meet is the largest total of
simultaneously live bytes; it is reported beside the arena size.
"""
from __future__ import annotations

from dataclasses import dataclass

ALIGNMENT = 64


def align_up(n: int, alignment: int = ALIGNMENT) -> int:
    return (n + alignment - 1) // alignment * alignment


@dataclass(frozen=True)
class Interval:
    """Buffer `name` of `size` bytes, live from step `start` to step `end` inclusive."""

    name: str
    size: int
    start: int
    end: int

    def overlaps(self, other: Interval) -> bool:
        return self.start <= other.end and other.start <= self.end


@dataclass(frozen=True)
class ArenaPlan:
    offsets: dict[str, int]
    arena_bytes: int
    lower_bound: int


def lower_bound(intervals: list[Interval], alignment: int = ALIGNMENT) -> int:
    """Max over steps of the aligned bytes live at that step."""
    events: dict[int, int] = {}
    for iv in intervals:
        events[iv.start] = events.get(iv.start, 0) + align_up(iv.size, alignment)
        events[iv.end + 1] = events.get(iv.end + 1, 0) - align_up(iv.size, alignment)
    live = best = 0
    for step in sorted(events):
        live += events[step]
        best = max(best, live)
    return best


def plan_arena(intervals: list[Interval], alignment: int = ALIGNMENT) -> ArenaPlan:
    """Offsets for every interval; deterministic for a given input order."""
    order = sorted(range(len(intervals)), key=lambda i: (-intervals[i].size, intervals[i].start, i))
    placed: list[tuple[int, Interval]] = []  # (offset, interval)
    offsets: dict[str, int] = {}
    for i in order:
        iv = intervals[i]
        size = align_up(iv.size, alignment)
        busy = sorted((off, off + align_up(other.size, alignment)) for off, other in placed if other.overlaps(iv))
        best_offset, best_gap = None, None
        cursor = 0
        for begin, end in busy:
            gap = begin - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best_offset, best_gap = cursor, gap
            cursor = max(cursor, end)
        offset = best_offset if best_offset is not None else cursor
        offsets[iv.name] = offset
        placed.append((offset, iv))
    arena = max((off + align_up(iv.size, alignment) for off, iv in placed), default=0)
    return ArenaPlan(offsets, arena, lower_bound(intervals, alignment))
