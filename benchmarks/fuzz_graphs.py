"""Differential graph testing, long runs: random valid ONNX graphs compiled by aot and
compared with onnxruntime; each failure is shrunk and saved as a regression model.

    python benchmarks/fuzz_graphs.py --minutes 30 [--workers 2] [--seed 0] [--graphs N]
                                     [--cpus native,haswell,x86-64-v2] [--save tests/data/fuzz] [--json]
    python benchmarks/fuzz_graphs.py --gpu --minutes 20        # the GPU kernels, emulated
    python benchmarks/fuzz_graphs.py --targets native,gpu,gpu-tf32

Seed s gives the same graph, target and thread count on every machine
(aot.fuzz.generate.case_for), so a failure reproduces with `--seed s --graphs 1` and
the same targets. A target is a CPU code path or "gpu" / "gpu-tf32": the plan's GPU
kernels emulated on the host, in fp32 or with tf32 dots, and their PTX through ptxas
(aot.fuzz.differential); --gpu is `--targets gpu,gpu-tf32`.
Each worker is a process of its own: a case that kills its process is recorded as
"crash", one that runs past --case-timeout seconds (a compile that never ends) as
"hang"; either is saved unshrunk and the worker restarts after it. By default the cases
cycle over every x86 code path this machine can run (AVX-512, AVX2, SSE4).
Saved models are replayed by tests/fuzz/test_regressions.py.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import queue
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BATCH = 25  # seeds per worker process: a crash costs one restart, not the run


def _default_cpus() -> list[str]:
    from aot.codegen.cpu import CpuTarget
    from aot.codegen.cpu.target import runnable_code_paths

    return ["native", *(t.cpu for t in runnable_code_paths(CpuTarget.host())[1:])]


def _worker(slot: int, seeds: list[int], targets: list[str], max_ops: int, save: str | None, shrink_failures: bool,
            results: mp.Queue) -> None:
    from aot.fuzz.differential import check_case
    from aot.fuzz.generate import case_for
    from aot.fuzz.shrink import save_regression, shrink

    for seed in seeds:
        results.put((slot, "start", seed, "", "", "", time.monotonic()))
        case = case_for(seed, targets, max_ops)
        outcome = check_case(case)
        saved = ""
        if outcome.failed and save:
            if shrink_failures:
                case = shrink(case, lambda c, kind=outcome.kind: check_case(c).kind == kind)
                outcome = check_case(case)
            saved = str(save_regression(case, outcome.kind, outcome.detail, Path(save)))
        results.put((slot, "done", seed, outcome.kind, outcome.detail, saved, time.monotonic()))


@dataclass
class _Slot:
    process: mp.Process
    seeds: list[int]
    in_flight: int | None = None
    since: float = 0.0  # when the case in flight started
    done: set[int] = field(default_factory=set)


class Fuzzer:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.targets = _targets(args)
        self.context = mp.get_context("fork")
        self.results: mp.Queue = self.context.Queue()
        self.next_seed = args.seed
        self.end_seed = args.seed + args.graphs if args.graphs else sys.maxsize
        self.deadline = time.monotonic() + args.minutes * 60
        self.slots: dict[int, _Slot] = {}
        self.counts: Counter[str] = Counter()
        self.per_target: Counter[str] = Counter()
        self.findings: list[dict] = []

    def _launch(self, slot: int, seeds: list[int]) -> None:
        args = self.args
        process = self.context.Process(target=_worker, daemon=True,
                                       args=(slot, seeds, self.targets, args.max_ops, args.save, not args.no_shrink, self.results))
        process.start()
        self.slots[slot] = _Slot(process, seeds)

    def _fresh_batch(self) -> list[int]:
        if time.monotonic() >= self.deadline or self.next_seed >= self.end_seed:
            return []
        count = min(BATCH, self.end_seed - self.next_seed)
        seeds = list(range(self.next_seed, self.next_seed + count))
        self.next_seed += count
        return seeds

    def _record(self, seed: int, kind: str, detail: str, saved: str) -> None:
        from aot.fuzz.generate import case_settings

        self.counts[kind] += 1
        self.per_target[case_settings(seed, self.targets)[0]] += 1
        if kind != "ok":
            self.findings.append({"seed": seed, "kind": kind, "detail": detail, "saved": saved})
            first = detail.splitlines()[0] if detail else ""
            print(f"seed {seed}: {kind}: {first}" + (f" -> {saved}" if saved else ""), flush=True)
        total = sum(self.counts.values())
        if total % 500 == 0:
            print(f"{total} graphs in {time.monotonic() - self.started:.0f} s: {dict(self.counts)}", flush=True)

    def _drain(self, timeout: float) -> None:
        try:
            slot, event, seed, kind, detail, saved, at = self.results.get(timeout=timeout)
        except queue.Empty:
            return
        state = self.slots.get(slot)
        if event == "start":
            if state:
                state.in_flight, state.since = seed, at  # the worker's clock: CLOCK_MONOTONIC is system-wide
            return
        if state:
            state.in_flight = None
            state.done.add(seed)
        self._record(seed, kind, detail, saved)

    def run(self) -> dict:
        self.started = time.monotonic()
        for slot in range(self.args.workers):
            seeds = self._fresh_batch()
            if seeds:
                self._launch(slot, seeds)
        while self.slots:
            self._drain(0.5)
            for slot, state in list(self.slots.items()):
                hung = state.in_flight is not None and time.monotonic() - state.since > self.args.case_timeout
                if hung:
                    state.process.kill()
                    state.process.join()
                if state.process.is_alive():
                    continue
                while not self.results.empty():  # what it said before it ended
                    self._drain(0.1)
                state.process.join()
                del self.slots[slot]
                rest: list[int] = []
                if state.process.exitcode != 0 and state.in_flight is not None:
                    crashed = state.in_flight
                    kind, detail = (("hang", f"still running after {self.args.case_timeout:g} s") if hung
                                    else ("crash", f"exit code {state.process.exitcode}"))
                    self._record(crashed, kind, detail, _save_unshrunk(crashed, kind, detail, self.targets, self.args.max_ops,
                                                                       self.args.save))
                    rest = [s for s in state.seeds if s > crashed and s not in state.done]
                seeds = rest or self._fresh_batch()
                if seeds:
                    self._launch(slot, seeds)
        return {"graphs": sum(self.counts.values()), "seconds": round(time.monotonic() - self.started, 1),
                "outcomes": dict(self.counts), "per_target": dict(self.per_target), "findings": self.findings,
                "first_seed": self.args.seed, "next_seed": self.next_seed}


def _save_unshrunk(seed: int, kind: str, detail: str, targets: list[str], max_ops: int, save: str | None) -> str:
    """A case that crashed or hung its worker: shrinking would crash or hang again, so as generated."""
    if not save:
        return ""
    from aot.fuzz.generate import case_for
    from aot.fuzz.shrink import save_regression

    return str(save_regression(case_for(seed, targets, max_ops), kind, detail, Path(save)))


def _targets(args: argparse.Namespace) -> list[str]:
    from aot.fuzz.generate import GPU_TARGETS

    if args.gpu:
        return list(GPU_TARGETS)
    if args.targets:
        return args.targets.split(",")
    return args.cpus.split(",") if args.cpus else _default_cpus()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0, help="stop handing out new graphs after this long")
    parser.add_argument("--graphs", type=int, default=0, help="stop after this many graphs (0: no limit)")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--cpus", default="", help="comma-separated CPUs to compile for (default: each code path this host runs)")
    parser.add_argument("--targets", default="", help="comma-separated CPUs and GPU paths (gpu, gpu-tf32) to check")
    parser.add_argument("--gpu", action="store_true", help="the GPU kernels, emulated: --targets gpu,gpu-tf32")
    parser.add_argument("--max-ops", type=int, default=8)
    parser.add_argument("--case-timeout", type=float, default=300.0, help="seconds before a case counts as a hang")
    parser.add_argument("--save", default=str(ROOT / "tests" / "data" / "fuzz"), help="where shrunk failures go ('' : nowhere)")
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    if sum([bool(args.cpus), bool(args.targets), args.gpu]) > 1:
        parser.error("give one of --cpus, --targets, --gpu")
    summary = Fuzzer(args).run()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        rate = summary["graphs"] / max(summary["seconds"], 1e-9)
        print(f"\n{summary['graphs']} graphs (seeds {summary['first_seed']}..{summary['next_seed'] - 1}) in "
              f"{summary['seconds']} s ({rate:.1f}/s), {args.workers} worker(s)")
        print(f"outcomes: {summary['outcomes']}")
        print(f"per target: {summary['per_target']}")
        for finding in summary["findings"]:
            print(f"  seed {finding['seed']}: {finding['kind']}: {finding['saved'] or finding['detail'][:200]}")
    return 1 if summary["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
