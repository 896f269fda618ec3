"""Memory planning: place temporaries in one arena (heap simulation + best fit).

Each temporary lives over an inclusive interval of kernel steps. Two
temporaries may share bytes only if their intervals are disjoint. Placement
is greedy best fit (as TFLite's arena planner): each buffer, in a chosen
order, takes the smallest gap among those already placed that overlap it in
time. Several orders are tried (largest first, earliest first, largest
size x lifetime first) and the smallest arena is kept. The lower bound any placement must meet is the largest total of
simultaneously live bytes; it is reported beside the arena size.
"""
from __future__ import annotations

from dataclasses import dataclass

from aot.arith import align_up

ALIGNMENT = 64


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


# Placement orders tried; the smallest arena wins (ties: the first). Largest-first
# is TFLite's and usually best; by start time then size packs long chains of
# short-lived buffers more tightly; by size-time area favours long-lived big buffers.
ORDERS = ("size", "start", "area")


def _order(intervals: list[Interval], how: str) -> list[int]:
    def key(i: int) -> tuple[int, ...]:
        iv = intervals[i]
        if how == "size":
            return (-iv.size, iv.start, i)
        if how == "start":
            return (iv.start, -iv.size, i)
        return (-iv.size * (iv.end - iv.start + 1), iv.start, i)

    return sorted(range(len(intervals)), key=key)


def best_fit(intervals: list[Interval], order: list[int], alignment: int = ALIGNMENT) -> dict[str, int]:
    """Place intervals in `order`, each in the smallest gap that fits among the placed ones it overlaps in time."""
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
    return offsets


def plan_arena(intervals: list[Interval], alignment: int = ALIGNMENT) -> ArenaPlan:
    """Offsets for every interval; deterministic for a given input order.

    Best fit under each of ORDERS, keeping the smallest arena; stops early once
    an order meets the lower bound (no placement can do better).
    """
    bound = lower_bound(intervals, alignment)
    best: tuple[int, dict[str, int]] | None = None
    for how in ORDERS:
        offsets = best_fit(intervals, _order(intervals, how), alignment)
        arena = max((offsets[iv.name] + align_up(iv.size, alignment) for iv in intervals), default=0)
        if best is None or arena < best[0]:
            best = (arena, offsets)
        if arena <= bound:
            break
    assert best is not None
    return ArenaPlan(best[1], best[0], bound)
