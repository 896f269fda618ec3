import itertools
import random

from aot.passes.memory_plan import Interval, align_up, lower_bound, plan_arena


def brute_force_lower_bound(intervals):
    steps = range(min(i.start for i in intervals), max(i.end for i in intervals) + 1)
    return max(sum(align_up(i.size) for i in intervals if i.start <= s <= i.end) for s in steps)


def check_no_overlap(intervals, offsets):
    for a, b in itertools.combinations(intervals, 2):
        if a.overlaps(b):
            a0, b0 = offsets[a.name], offsets[b.name]
            assert a0 + align_up(a.size) <= b0 or b0 + align_up(b.size) <= a0, (a, b, a0, b0)


def test_random_interval_sets_never_overlap_and_meet_lower_bound():
    rng = random.Random(0)
    ratios = []
    for case in range(300):
        intervals = []
        for i in range(rng.randint(1, 14)):
            start = rng.randint(0, 20)
            intervals.append(Interval(f"t{i}", rng.choice([1, 64, 100, 4096, rng.randint(1, 10000)]), start, start + rng.randint(0, 6)))
        plan = plan_arena(intervals)
        check_no_overlap(intervals, plan.offsets)
        assert all(off % 64 == 0 for off in plan.offsets.values())
        assert plan.lower_bound == brute_force_lower_bound(intervals)
        assert plan.arena_bytes >= plan.lower_bound
        ratios.append(plan.arena_bytes / plan.lower_bound)
    assert sum(ratios) / len(ratios) < 1.15  # best fit stays close to the bound on average


def test_chain_reuses_memory():
    # a -> b -> c -> d: each value dies after its consumer; two slots suffice
    intervals = [Interval(n, 1024, i, i + 1) for i, n in enumerate("abcd")]
    plan = plan_arena(intervals)
    assert plan.arena_bytes == 2048 == plan.lower_bound
    check_no_overlap(intervals, plan.offsets)


def test_empty_plan():
    plan = plan_arena([])
    assert plan.arena_bytes == 0 and plan.lower_bound == 0 and lower_bound([]) == 0
