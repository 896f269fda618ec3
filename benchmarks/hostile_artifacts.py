"""Hostile artifacts against the C runtime: damaged, edited and bomb artifacts made from
real ones (benchmarks/hostile_cases.py), each opened and, when it opens, run, in a
subprocess of its own with its address space capped and a time limit.

    python benchmarks/hostile_artifacts.py [--mem-mib 1024] [--timeout 10] [--jobs 2]
                                           [--per-family N] [--family F]... [--save DIR] [--json]

Each case ends as one of:
  error     the runtime refused it with a status and a message
  ok        it opened and ran (zeroed inputs, on 1 and on 3 threads, and for GPU seeds in
            CUDA contexts on the test stand-in driver, with and without a CUDA graph), or
            it opened and its inputs and outputs are too large to feed
  crash     the process died from a signal
  hang      it ran past --timeout
  memory    it needed more memory than the cap: an allocation failed (AOT_ERR_NO_MEMORY
            whose message does not cite max_memory_bytes), or its peak RSS passed
            half the cap
Where the runtime has aot_model_options_t (ABI 3), each case is opened with
max_memory_bytes at half the cap, as a server would. The table counts outcomes by
family; the exit status is 1 when any case crashed, hung or ran over memory.
Failing cases are written to --save (default: a new directory under /tmp) to
reproduce with `--replay FILE`.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

OUTCOMES = ("error", "ok", "crash", "hang", "memory")
FAILURES = ("crash", "hang", "memory")
RUN_BYTES_MAX = 64 << 20  # zeroed inputs and outputs one run may allocate
RUN_THREADS = (1, 3)


@dataclass
class Result:
    family: str
    name: str
    outcome: str
    detail: str
    seconds: float


# ---------------------------------------------------------------- child

def _peak_rss_bytes() -> int:
    """This process's peak RSS since exec: VmHWM. Not getrusage's ru_maxrss, which Linux
    carries across exec, so a child forked from a large parent (pytest with the suite
    loaded: ~1 GiB) would report the parent's size."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/self/status has no VmHWM line")


def child(path: str, mem_bytes: int, cuda: bool = False) -> None:
    """Open and run one artifact through the C API; print one JSON line {"outcome", "detail", "maxrss"}.

    The C API (through the binding's ctypes declarations) rather than Session, so
    that each refusal keeps its status code. `cuda`: also run it in CUDA contexts (on the
    driver AOT_CUDA_DRIVER names: the test stand-in, in the suite).
    """
    import ctypes
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
    from aot.runtime import abi
    from aot.runtime.library import load_library

    lib = load_library()
    err = abi.CError()

    def report(outcome: str, detail: str) -> None:
        rss = _peak_rss_bytes()
        print(json.dumps({"outcome": outcome, "detail": detail[:300], "maxrss": rss}), flush=True)

    def refused(st: int, stage: str) -> None:
        message = err.message.decode("utf-8", "replace")
        # an allocation that failed under the cap, unless the runtime refused by a limit
        over = st == abi.AOT_ERR_NO_MEMORY and "max_memory_bytes" not in message and "limit" not in message
        report("memory" if over else "error", f"{stage}: {lib.aot_status_string(st).decode()}: {message}")

    model = ctypes.c_void_p()
    if hasattr(lib, "aot_model_open_file_with_options"):  # ABI 3: the caller's memory limit, half the cap
        opts = abi.CModelOptions(ctypes.sizeof(abi.CModelOptions), 0, mem_bytes // 2)
        st = lib.aot_model_open_file_with_options(os.fsencode(path), ctypes.byref(opts), ctypes.byref(model),
                                                  ctypes.byref(err))
    else:
        st = lib.aot_model_open_file(os.fsencode(path), ctypes.byref(model), ctypes.byref(err))
    if st:
        return refused(st, "open")
    ni, no = lib.aot_model_input_count(model), lib.aot_model_output_count(model)
    tensors = (abi.CTensor * max(ni + no, 1))()
    buffers, nbytes = [], 0
    for i in range(ni + no):
        info = abi.CTensorInfo()
        get = lib.aot_model_input_info if i < ni else lib.aot_model_output_info
        if (st := get(model, i if i < ni else i - ni, ctypes.byref(info), ctypes.byref(err))):
            return refused(st, "info")
        nbytes += info.byte_size
        if nbytes > RUN_BYTES_MAX:
            lib.aot_model_close(model)
            return report("ok", f"opened; over {RUN_BYTES_MAX} bytes of inputs and outputs, not run")
        buffers.append(ctypes.create_string_buffer(max(info.byte_size, 1)))
        tensors[i] = abi.CTensor(info.dtype, info.rank, info.shape,
                                 ctypes.cast(buffers[-1], ctypes.c_void_p), info.byte_size)
    outputs = ctypes.cast(ctypes.byref(tensors, ni * ctypes.sizeof(abi.CTensor)), ctypes.POINTER(abi.CTensor))
    # the CPU on 1 and 3 threads; with the stand-in driver, the GPU with and without a CUDA graph
    runs = [(f"run on {threads} threads", abi.DEVICE_CPU, threads, 0) for threads in RUN_THREADS]
    if cuda:
        runs += [(f"CUDA run ({how})", abi.DEVICE_CUDA, 1, flags)
                 for how, flags in (("graph", 0), ("launches", abi.CONTEXT_NO_CUDA_GRAPH))]
    ran = []
    for stage, device, threads, flags in runs:
        ctx = ctypes.c_void_p()
        opts = abi.CContextOptions(ctypes.sizeof(abi.CContextOptions), threads, device, 0, flags, 0)
        if (st := lib.aot_context_create(model, ctypes.byref(opts), ctypes.byref(ctx), ctypes.byref(err))):
            # a GPU-only artifact refuses CPU contexts (and a CPU-only one CUDA contexts): the other may run
            if st == abi.AOT_ERR_UNSUPPORTED and "GPU code" in err.message.decode("utf-8", "replace"):
                continue
            return refused(st, f"context for the {stage}")
        st = lib.aot_run(ctx, tensors, ni, outputs, no, ctypes.byref(err))
        lib.aot_context_destroy(ctx)
        if st:
            return refused(st, stage)
        ran.append(stage)
    lib.aot_model_close(model)
    report("ok", "ran: " + ", ".join(ran) if ran else "opened; no context of it runs here")


# ---------------------------------------------------------------- parent

# families whose edits may leave a launch plan that opens but points kernels past their buffers:
# on a GPU a device fault (an error), on the stand-in driver host memory, so not run there
NO_CUDA_RUN = frozenset({"bitflip_crc"})


def run_case(path: Path, family: str, name: str, mem_bytes: int, timeout: float, env: dict) -> Result:
    start = time.perf_counter()
    cmd = [sys.executable, __file__, "--child", str(path), "--mem-bytes", str(mem_bytes)]
    if env.get("AOT_FAKE_CUDA_HOST_DIR") and family not in NO_CUDA_RUN:
        cmd.append("--cuda")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return Result(family, name, "hang", f"over {timeout:g} s", time.perf_counter() - start)
    seconds = time.perf_counter() - start
    if p.returncode < 0:
        return Result(family, name, "crash", f"signal {-p.returncode}: {p.stderr.strip()[-300:]}", seconds)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip() or p.stdout.strip())[-300:]
        outcome = "memory" if "MemoryError" in tail else "crash"
        return Result(family, name, outcome, f"exit {p.returncode}: {tail}", seconds)
    r = json.loads(lines[-1])
    outcome = r["outcome"]
    if outcome in ("ok", "error") and r["maxrss"] > mem_bytes // 2:
        outcome, r["detail"] = "memory", f"peak RSS {r['maxrss'] >> 20} MiB; {r['detail']}"
    return Result(family, name, outcome, r["detail"], seconds)


def table(results: list[Result]) -> str:
    counts: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        counts[r.family][r.outcome] += 1
    rows = [("family", "cases", *OUTCOMES)]
    for family in sorted(counts, key=lambda f: list(dict.fromkeys(r.family for r in results)).index(f)):
        c = counts[family]
        rows.append((family, str(sum(c.values())), *(str(c[o]) for o in OUTCOMES)))
    total = Counter(r.outcome for r in results)
    rows.append(("total", str(len(results)), *(str(total[o]) for o in OUTCOMES)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths)))
                     for row in rows)


def select(cases: list, families: list[str] | None, per_family: int | None) -> list:
    """Cases of the given families; with per_family, that many spread evenly over each family."""
    by_family: dict[str, list] = defaultdict(list)
    for c in cases:
        if not families or c.family in families:
            by_family[c.family].append(c)
    out = []
    for group in by_family.values():
        if per_family is None or len(group) <= per_family:
            out += group
        else:
            step = len(group) / per_family
            out += [group[int(i * step)] for i in range(per_family)]
    return out


def run_all(cases: list, work_dir: Path, mem_bytes: int, timeout: float, jobs: int,
            log=None, host_code: Path | None = None) -> list[Result]:
    from aot.runtime.library import library_path

    env = dict(os.environ, AOT_RUNTIME_LIB=str(library_path()))  # built once, shared by every child
    if host_code is not None:  # the GPU seeds' cases run on the stand-in CUDA driver too
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from fake_cuda_util import fake_cuda_driver

        env.update(AOT_CUDA_DRIVER=str(fake_cuda_driver()), AOT_FAKE_CUDA_HOST_DIR=str(host_code))
    env.pop("OPENBLAS_NUM_THREADS", None)
    env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = "1"  # numpy's pool would count against the cap
    work_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, c in enumerate(cases):
        path = work_dir / f"{i:04d}-{c.family}-{c.name}.aot"[:200]
        path.write_bytes(c.data)
        paths.append(path)

    def one(i: int) -> Result:
        r = run_case(paths[i], cases[i].family, cases[i].name, mem_bytes, timeout, env)
        if log:
            log(r)
        return r

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, range(len(cases))))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mem-mib", type=int, default=1024, help="address-space cap of each case's process")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds each case may take")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--per-family", type=int, help="run only this many cases of each family")
    ap.add_argument("--family", action="append", help="only this family (repeatable)")
    ap.add_argument("--seed", type=int, default=0, help="random seed of the bit flips")
    ap.add_argument("--save", type=Path, help="where failing cases are kept (default: a new dir under /tmp)")
    ap.add_argument("--replay", type=Path, help="run one saved case and print its result")
    ap.add_argument("--json", action="store_true", help="print every result as JSON lines")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--mem-bytes", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--cuda", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.mem_bytes, args.cuda)
        return 0
    mem = args.mem_mib << 20
    if args.replay:
        from aot.runtime.library import library_path

        env = dict(os.environ, AOT_RUNTIME_LIB=str(library_path()), OPENBLAS_NUM_THREADS="1")
        r = run_case(args.replay, "replay", args.replay.name, mem, args.timeout, env)
        print(f"{r.outcome}: {r.detail}")
        return 1 if r.outcome in FAILURES else 0

    from hostile_cases import generate
    from seed_artifacts import compile_seeds

    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        started = time.perf_counter()
        host_code = Path(tmp) / "host_code"
        seeds = compile_seeds(Path(tmp) / "seeds", host_code=host_code)
        cases = select(generate(seeds, seed=args.seed), args.family, args.per_family)
        print(f"{len(cases)} cases from {len(seeds)} artifacts compiled by aot "
              f"({', '.join(s.name for s in seeds)}), {time.perf_counter() - started:.1f} s; "
              f"cap {args.mem_mib} MiB, timeout {args.timeout:g} s", flush=True)

        def log(r: Result) -> None:
            if args.json:
                print(json.dumps(r.__dict__), flush=True)
            elif r.outcome in FAILURES:
                print(f"  {r.outcome:9} {r.family}/{r.name}: {r.detail[:200]}", flush=True)

        results = run_all(cases, Path(tmp) / "cases", mem, args.timeout, args.jobs, log, host_code)
        failed = [(c, r) for c, r in zip(cases, results) if r.outcome in FAILURES]
        if failed:
            save = args.save or Path(tempfile.mkdtemp(prefix="hostile-failures-"))
            save.mkdir(parents=True, exist_ok=True)
            for c, r in failed:
                (save / f"{r.outcome}-{c.family}-{c.name}.aot"[:200]).write_bytes(c.data)
        print(table(results))
        print(f"{len(results)} cases in {time.perf_counter() - started:.0f} s")
        if failed:
            print(f"{len(failed)} failing cases saved to {save} (replay: --replay FILE)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
