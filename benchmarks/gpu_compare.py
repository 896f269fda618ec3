"""The GPU check's device side: aot on the GPU against its CPU outputs, then against PyTorch
eager, torch.compile, JAX (XLA) and cuBLAS. benchmarks/gpu_check.sh runs it:

    python3 benchmarks/gpu_compare.py gpu_bundles [--quick] [--deadline 420]

over a bundle that benchmarks/gpu_bundle.py wrote where the compiler runs. In order:
1. correctness: each bundled model through aot.Session(device="cuda") on host arrays
   (copies in and out) and on device tensors (DLPack, no copies), against the CPU
   artifact's outputs (|d| <= atol + rtol |ref|, rtol 1e-3, atol 1e-4 max(1, max |ref|));
   the JAX peer's outputs too, which must agree as well for its timing to mean anything;
2. latency per model and batch: the median wall time of one call, synchronized, after
   warmup (runs bounded by count and by time): aot with device tensors in and out
   (aot_run_device, CUDA graph on), PyTorch eager, JAX jit of the same graph;
2b. llama_tiny (the bundle's "llm" entries: decode steps at batch 1 and 8, one prefill of 64
   tokens): its GPU outputs against the CPU artifact's, on host arrays and on device tensors
   with the cache donated (past_* and present_* the same device tensor, Session.donations),
   then per step the latency of aot that way, torch eager (make_llm.torch_module) and JAX
   jit of make_llm.jax_decoder with its cache donated (donate_argnums), both with the
   bundle's rounded weights (torch.compile is not run on them: it would eat the deadline);
   the table gives tokens/s (batch x tokens per call) for these;
3. one n^3 fp32 GEMM (A and B inputs) against torch.matmul (cuBLAS), TF32 off, and the
   tf32 build against cuBLAS with TF32 on;
4. aot_run_device's overhead on the smallest model at batch 1: the wall time of a run
   minus its kernels' GPU span (CUPTI, through torch.profiler; where that sees no kernels,
   CUDA events on the caller's stream, which measure only what comes before the launch),
   with CUDA graphs and without;
5. torch.compile (default mode, static shapes; its compile time apart and capped) while
   the deadline allows: it is the slowest column to fill, so it comes last;
6. the table, then the GEMM and overhead lines.
Each peer runs in its own try, so a failure is "error: ..." in its cell and the rest goes
on; what the deadline leaves no time for is "skipped" and said so.

Fairness: fp32 everywhere, TF32 off in torch (matmul and cuDNN), JAX's
jax_default_matmul_precision "highest" and HIGHEST on every dot and conv. The torch peers
build the same modules (models/make_benchmarks.py) with their own initial weights; the
aot and JAX ones use the bundle's rounded weights (timings do not depend on values).

--peer-device cpu runs the torch peers and JAX on the CPU and hands aot DeviceArrays
instead of CUDA tensors: with the stand-in CUDA driver (tests/fake_cuda_util.py) that is
how the tests run this program end to end without a GPU.
"""
from __future__ import annotations

import argparse
import json
import lzma
import math
import os
import statistics
import sys
import tempfile
import threading
import time
import traceback
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX shares the GPU with torch and aot

from gpu_bundle import case_input, feeds_crc32, llm_inputs, llm_reference, load_llm_weights  # noqa: E402

RTOL = 1e-3
ATOL = 1e-4  # times max(1, max |reference|)
PEERS = ("eager", "compile", "jax")


@dataclass
class Settings:
    runs: int = 100  # at most, per measurement
    min_runs: int = 5
    warmup: int = 3
    seconds: float = 1.0  # per measurement, after warmup
    compile_cap: float = 90.0  # torch.compile's first call
    reserve: float = 8.0  # seconds kept for the table

    @classmethod
    def quick(cls) -> "Settings":
        return cls(runs=20, min_runs=3, warmup=1, seconds=0.25, compile_cap=45.0)


class Deadline:
    def __init__(self, seconds: float):
        self.end = time.perf_counter() + seconds

    def left(self) -> float:
        return self.end - time.perf_counter()


@dataclass
class Row:
    """One model at one batch: a cell is milliseconds, or a string saying why not."""
    model: str
    batch: int
    cells: dict[str, float | str] = field(default_factory=dict)
    tokens: int = 0  # per sequence and call, for tokens/s; 0: not a language model step


def error_text(err: BaseException) -> str:
    first = (str(err).strip().splitlines() or [""])[0]
    return f"error: {type(err).__name__}: {first[:100]}"


def median_ms(call: Callable[[], Any], sync: Callable[[], Any], settings: Settings) -> tuple[float, int]:
    """(median ms of call + sync, runs): warmup first, then runs until settings.runs or, past
    settings.min_runs, settings.seconds."""
    for _ in range(settings.warmup):
        call()
        sync()
    times: list[float] = []
    began = time.perf_counter()
    while len(times) < settings.runs and (len(times) < settings.min_runs or time.perf_counter() - began < settings.seconds):
        start = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3, len(times)


def compare(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[float, float, bool]:
    """(max |got - want|, that over max |want|, within tolerance) over every output."""
    worst = relative = 0.0
    ok = True
    for g, w in zip(got, want):
        g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
        if g64.shape != w64.shape:
            return math.inf, math.inf, False
        finite = np.abs(w64[np.isfinite(w64)])
        largest = float(finite.max()) if finite.size else 0.0
        with np.errstate(invalid="ignore"):
            diff = np.abs(g64 - w64)
        diff = np.where((g64 == w64) | (np.isnan(g64) & np.isnan(w64)), 0.0, diff)  # inf = inf, NaN = NaN
        diff = np.where(np.isnan(diff), np.inf, diff)
        if diff.size:
            worst = max(worst, float(diff.max()))
            relative = max(relative, float(diff.max()) / max(largest, 1e-30))
        with np.errstate(invalid="ignore"):
            ok = ok and bool(np.all(diff <= ATOL * max(1.0, largest) + RTOL * np.nan_to_num(np.abs(w64))))
    return worst, relative, ok


# -- the peers' frameworks ------------------------------------------------------------------
class Torch:
    """torch on `device`, fp32 with TF32 off; tensors in and out of aot through DLPack."""

    def __init__(self, device: str):
        import torch

        self.torch = torch
        self.device = device
        self.cuda = device == "cuda"
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def tensor(self, array: np.ndarray) -> Any:
        return self.torch.from_numpy(np.ascontiguousarray(array)).to(self.device)

    def module(self, architecture: str) -> Any:
        import make_benchmarks

        self.torch.manual_seed(make_benchmarks.SEED)
        module, _ = make_benchmarks.build_models()[architecture]()
        return module.eval().to(self.device)


def load_jax(peer_device: str) -> Any:
    import jax

    jax.config.update("jax_default_matmul_precision", "highest")
    if peer_device == "cpu":
        jax.config.update("jax_platforms", "cpu")
    return jax


class JaxPeer:
    """The model's ONNX file through aot's importer (before optimization) and jax_graph."""

    def __init__(self, jax: Any, bundle: Path, entry: dict[str, Any], cache: dict[str, bytes]):
        import onnx

        import jax_graph
        from aot.driver import import_model

        name = entry["onnx"]
        if name not in cache:
            cache[name] = lzma.decompress((bundle / name).read_bytes())
        graph, _, _ = import_model(onnx.load_from_string(cache[name]), {"x": tuple(entry["shape"])})
        lowered = jax_graph.lower_graph(graph)  # jax_graph.UnknownOp: the cell says which op
        self.jax = jax
        self.params = lowered.device_params()
        self.fn = jax.jit(lowered.fn)

    def first_call(self, x: np.ndarray) -> tuple[list[np.ndarray], float]:
        """The outputs, and the seconds of the first call (XLA's compile)."""
        self.x = self.jax.device_put(x)
        start = time.perf_counter()
        out = self.jax.block_until_ready(self.fn(self.params, self.x))
        return [np.asarray(o) for o in out], time.perf_counter() - start

    def call(self) -> Any:
        return self.jax.block_until_ready(self.fn(self.params, self.x))


class AotDevice:
    """aot.Session on the GPU with device tensors in and out: torch CUDA tensors, or, with the
    peers on the CPU (the stand-in driver), DeviceArrays of the session."""

    def __init__(self, path: Path, torch_: Torch, inputs: dict[str, np.ndarray], cuda_graph: bool = True):
        from aot.runtime.device_array import DeviceArray
        from aot.runtime.session import Session

        self.session = Session(path, device="cuda", cuda_graph=cuda_graph)
        if torch_.cuda:
            self.feeds = {k: torch_.tensor(v) for k, v in inputs.items()}
            torch_.sync()
            self.outputs = {o.name: torch_.torch.empty(o.shape, dtype=getattr(torch_.torch, o.dtype.name),
                                                        device="cuda") for o in self.session.get_outputs()}
        else:
            self.feeds = {k: DeviceArray.from_numpy(self.session, v) for k, v in inputs.items()}
            self.outputs = {o.name: DeviceArray.empty(self.session, o.shape, o.dtype) for o in self.session.get_outputs()}

    def call(self, stream: Any = None) -> Any:
        return self.session.run(None, self.feeds, outputs=self.outputs, stream=stream)

    def results(self) -> list[np.ndarray]:
        return [_to_numpy(v) for v in self.outputs.values()]

    def close(self) -> None:
        self.feeds = self.outputs = {}
        self.session.close()


def _to_numpy(tensor: Any) -> np.ndarray:
    if hasattr(tensor, "numpy") and hasattr(tensor, "element"):  # a DeviceArray
        return tensor.numpy()
    return tensor.detach().cpu().numpy()


# -- the steps ------------------------------------------------------------------------------
class Check:
    def __init__(self, bundle: Path, meta: dict[str, Any], settings: Settings, deadline: Deadline,
                 peer_device: str, peers: tuple[str, ...]):
        self.bundle, self.meta, self.settings, self.deadline = bundle, meta, settings, deadline
        self.peer_device, self.peers = peer_device, peers
        self.torch = Torch(peer_device)
        self.jax: Any = None
        self.jax_error = ""
        if "jax" in peers:
            try:
                self.jax = load_jax(peer_device)
            except Exception as err:
                self.jax_error = f"n/a (no jax: {type(err).__name__})"
        self.rows = [Row(e["model"], e["batch"]) for e in meta["models"]]
        self.llm_rows = [Row(e["model"], e["batch"], tokens=e["tokens"]) for e in meta.get("llm", [])]
        self.onnx_cache: dict[str, bytes] = {}
        self.failures = 0
        self.notes: list[str] = []

    def inputs(self, entry: dict[str, Any]) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
        """The case's input (made as the bundle writer made it) and the CPU artifact's outputs."""
        x = case_input(entry["shape"])
        if zlib.crc32(x.tobytes()) != entry["input_crc32"]:
            raise RuntimeError(f"{entry['folder']}: this numpy makes another input than the bundle's "
                               f"(CRC-32 {zlib.crc32(x.tobytes())}, not {entry['input_crc32']})")
        cpu = np.load(self.bundle / entry["folder"] / "cpu_outputs.npz")
        return {"x": x}, [cpu[name] for name in entry["outputs"]]

    def report(self, entry: dict[str, Any], path: str, got: list[np.ndarray] | None, want: list[np.ndarray],
               error: str = "") -> None:
        if got is None:
            self.failures += 1
            print(f"| {entry['model']} | {entry['batch']} | {path} | - | - | FAIL {error} |", flush=True)
            return
        worst, relative, ok = compare(got, want)
        self.failures += not ok
        print(f"| {entry['model']} | {entry['batch']} | {path} | {worst:.3g} | {relative:.3g} | "
              f"{'PASS' if ok else 'FAIL'} |", flush=True)

    def correctness(self) -> None:
        from aot.runtime.session import Session

        print(f"\n## GPU outputs against the CPU artifact's (rtol {RTOL:g}, atol {ATOL:g} x max(1, max |ref|))\n")
        print("| model | batch | path | max abs err | max rel err | status |")
        print("|---|---|---|---|---|---|")
        for entry in self.meta["models"]:
            try:
                inputs, want = self.inputs(entry)
            except Exception as err:
                self.report(entry, "inputs", None, [], error_text(err))
                continue
            path = self.bundle / entry["folder"] / "model.aot"
            try:
                with Session(path, device="cuda") as session:
                    self.report(entry, "aot, host arrays", session.run(None, inputs), want)
            except Exception as err:
                self.report(entry, "aot, host arrays", None, want, error_text(err))
            try:
                runner = AotDevice(path, self.torch, inputs)
                runner.call()
                self.report(entry, "aot, device tensors", runner.results(), want)
                runner.close()
            except Exception as err:
                self.report(entry, "aot, device tensors", None, want, error_text(err))

    def latency(self) -> None:
        print("\n## Latency (median ms of a synchronized call; runs)\n", flush=True)
        for entry, row in zip(self.meta["models"], self.rows):
            if self.deadline.left() < self.settings.reserve + 5:
                row.cells.setdefault("aot", "skipped (deadline)")
                continue
            try:
                inputs, want = self.inputs(entry)
            except Exception as err:
                row.cells = {peer: error_text(err) for peer in ("aot",) + self.peers}
                continue
            try:
                runner = AotDevice(self.bundle / entry["folder"] / "model.aot", self.torch, inputs)
                row.cells["aot"], runs = median_ms(runner.call, lambda: None, self.settings)
                runner.close()
                print(f"{row.model} b{row.batch}: aot {row.cells['aot']:.3f} ms ({runs} runs)", flush=True)
            except Exception as err:
                row.cells["aot"] = error_text(err)
            if "eager" in self.peers:
                row.cells["eager"] = self._eager(entry, inputs)
            if "jax" in self.peers:
                row.cells["jax"] = self._jax(entry, inputs, want)
            shown = ", ".join(f"{k} {v:.3f} ms" if isinstance(v, float) else f"{k} {v}" for k, v in row.cells.items())
            print(f"{row.model} b{row.batch}: {shown}", flush=True)

    def _eager(self, entry: dict[str, Any], inputs: dict[str, np.ndarray]) -> float | str:
        try:
            module = self.torch.module(entry["architecture"])
            x = self.torch.tensor(inputs["x"])
            with self.torch.torch.inference_mode():
                ms, _ = median_ms(lambda: module(x), self.torch.sync, self.settings)
            return ms
        except Exception as err:
            return error_text(err)

    def _jax(self, entry: dict[str, Any], inputs: dict[str, np.ndarray], want: list[np.ndarray]) -> float | str:
        if self.jax is None:
            return self.jax_error
        try:
            import jax_graph

            peer = JaxPeer(self.jax, self.bundle, entry, self.onnx_cache)
        except jax_graph.UnknownOp as err:
            return f"n/a (op {err.op})"
        except Exception as err:
            return error_text(err)
        try:
            got, compile_s = peer.first_call(inputs["x"])
            worst, _, ok = compare(got, want)
            print(f"{entry['model']} b{entry['batch']}: jax compile {compile_s:.1f} s, outputs vs CPU artifact "
                  f"max abs err {worst:.3g} {'PASS' if ok else 'FAIL'}", flush=True)
            if not ok:
                self.notes.append(f"jax's outputs differ from the CPU artifact's on {entry['model']} b{entry['batch']} "
                                  f"(max abs err {worst:.3g})")
            ms, _ = median_ms(peer.call, lambda: None, self.settings)
            return ms
        except Exception as err:
            return error_text(err)

    def llm(self) -> None:
        """llama_tiny's steps: correctness on the GPU, then latency of aot, eager and JAX."""
        entries = self.meta.get("llm", [])
        if not entries:
            return
        print("\n## llama_tiny on the GPU against the CPU artifact's outputs (cache donated)\n", flush=True)
        print("| model | batch | path | max abs err | max rel err | status |")
        print("|---|---|---|---|---|---|")
        try:
            cfg, weights = load_llm_weights(self.bundle / entries[0]["weights"])
        except Exception as err:
            for entry, row in zip(entries, self.llm_rows):
                self.report(entry, "weights", None, [], error_text(err))
                row.cells = {peer: error_text(err) for peer in ("aot",) + self.peers}
            return
        for entry, row in zip(entries, self.llm_rows):
            row.cells["compile"] = "not run"  # torch.compile: the suite models only (deadline)
            if self.deadline.left() < self.settings.reserve + 10:
                row.cells.setdefault("aot", "skipped (deadline)")
                continue
            try:
                feeds = llm_inputs(cfg, entry)
                if feeds_crc32(feeds) != entry["feeds_crc32"]:
                    raise RuntimeError(f"{entry['folder']}: this numpy makes other feeds than the bundle's")
                with np.load(self.bundle / entry["folder"] / "cpu_outputs.npz") as cpu:
                    want = llm_reference(cpu, feeds, entry)
            except Exception as err:
                self.report(entry, "inputs", None, [], error_text(err))
                row.cells = {peer: error_text(err) for peer in ("aot",) + self.peers}
                continue
            path = self.bundle / entry["folder"] / "model.aot"
            try:
                from aot.runtime.session import Session

                with Session(path, device="cuda") as session:
                    self.report(entry, "aot, host arrays", session.run(None, feeds), want)
            except Exception as err:
                self.report(entry, "aot, host arrays", None, want, error_text(err))
            row.cells["aot"] = self._llm_aot(entry, path, feeds, want)
            if "eager" in self.peers:
                row.cells["eager"] = self._llm_eager(cfg, weights, feeds)
            if "jax" in self.peers:
                row.cells["jax"] = self._llm_jax(entry, cfg, weights, feeds, want)
            shown = ", ".join(f"{k} {v:.3f} ms" if isinstance(v, float) else f"{k} {v}" for k, v in row.cells.items())
            print(f"{row.model} b{row.batch}: {shown}", flush=True)

    def _llm_aot(self, entry: dict[str, Any], path: Path, feeds: dict[str, np.ndarray],
                 want: list[np.ndarray]) -> float | str:
        """Device tensors in and out, each donated input's tensor given as its output too (the
        step updates the cache in place); the first call checked, then timed."""
        try:
            runner = AotDevice(path, self.torch, feeds)
        except Exception as err:
            self.report(entry, "aot, device tensors, cache donated", None, want, error_text(err))
            return error_text(err)
        try:
            donated = runner.session.donations
            if not donated:
                raise RuntimeError("the session donates nothing (a runtime before ABI 5, or an artifact without donations)")
            for name, output in donated.items():
                runner.outputs[output] = runner.feeds[name]
            runner.call()
            self.report(entry, "aot, device tensors, cache donated", runner.results(), want)
            ms, runs = median_ms(runner.call, lambda: None, self.settings)
            print(f"{entry['model']} b{entry['batch']}: aot {ms:.3f} ms ({runs} runs)", flush=True)
            return ms
        except Exception as err:
            self.report(entry, "aot, device tensors, cache donated", None, want, error_text(err))
            return error_text(err)
        finally:
            runner.close()

    def _llm_eager(self, cfg: Any, weights: dict[str, np.ndarray], feeds: dict[str, np.ndarray]) -> float | str:
        try:
            import make_llm

            torch = self.torch.torch
            module = make_llm.torch_module(cfg, weights).to(self.torch.device)
            args = [self.torch.tensor(feeds[name]) for name in make_llm.INPUTS]
            # the module makes its aranges on the default device: the step's, so the mask is there too
            with torch.inference_mode(), torch.device(self.torch.device):
                ms, _ = median_ms(lambda: module(*args), self.torch.sync, self.settings)
            return ms
        except Exception as err:
            return error_text(err)

    def _llm_jax(self, entry: dict[str, Any], cfg: Any, weights: dict[str, np.ndarray],
                 feeds: dict[str, np.ndarray], want: list[np.ndarray]) -> float | str:
        """jax.jit of make_llm.jax_decoder, the cache donated and fed back call after call."""
        if self.jax is None:
            return self.jax_error
        try:
            import make_llm

            jax = self.jax
            with make_llm._x64():  # int64 ids and position, as the interface says
                jitted = jax.jit(make_llm.jax_decoder(cfg, weights), donate_argnums=(2, 3))
                ids, position = jax.device_put(feeds["input_ids"]), jax.device_put(feeds["position"])
                state = [jax.device_put(feeds["past_keys"]), jax.device_put(feeds["past_values"])]

                def step() -> Any:
                    logits, state[0], state[1] = jitted(ids, position, state[0], state[1])
                    return jax.block_until_ready((logits, state[0], state[1]))

                start = time.perf_counter()
                got = [np.asarray(o) for o in step()]
                compile_s = time.perf_counter() - start
                worst, _, ok = compare(got, want)
                print(f"{entry['model']} b{entry['batch']}: jax compile {compile_s:.1f} s, outputs vs CPU artifact "
                      f"max abs err {worst:.3g} {'PASS' if ok else 'FAIL'}", flush=True)
                if not ok:
                    self.notes.append(f"jax's outputs differ from the CPU artifact's on {entry['model']} "
                                      f"b{entry['batch']} (max abs err {worst:.3g})")
                ms, _ = median_ms(step, lambda: None, self.settings)
            return ms
        except Exception as err:
            return error_text(err)

    def gemm(self) -> list[str]:
        lines = []
        for entry in self.meta.get("gemm", []):
            if self.deadline.left() < self.settings.reserve + 5:
                lines.append(f"GEMM {entry['precision']}: skipped (deadline)")
                continue
            try:
                lines.append(self._gemm(entry))
            except Exception as err:
                lines.append(f"GEMM {entry['n']}^3 {entry['precision']}: {error_text(err)}")
            print(lines[-1], flush=True)
        return lines

    def _gemm(self, entry: dict[str, Any]) -> str:
        torch = self.torch.torch
        n, precision = entry["n"], entry["precision"]
        rng = np.random.default_rng(1)
        a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
        runner = AotDevice(self.bundle / entry["folder"] / "model.aot", self.torch, {"a": a, "b": b})
        ours, _ = median_ms(runner.call, lambda: None, self.settings)
        got = runner.results()[0]
        runner.close()
        ta, tb = self.torch.tensor(a), self.torch.tensor(b)
        out = torch.empty((n, n), dtype=torch.float32, device=self.torch.device)
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        try:
            theirs, _ = median_ms(lambda: torch.matmul(ta, tb, out=out), self.torch.sync, self.settings)
            self.torch.sync()
            ref = out.cpu().numpy()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
        worst = float(np.max(np.abs(got.astype(np.float64) - ref)))
        limit = (1e-2 if precision == "tf32" else 1e-3) * float(np.max(np.abs(ref)))
        self.failures += worst > limit
        flops = 2.0 * n ** 3
        tf32 = "TF32 on" if precision == "tf32" else "TF32 off"
        return (f"GEMM {n}^3 {precision}: aot {ours:.3f} ms ({flops / ours / 1e9:.1f} TFLOP/s), cuBLAS ({tf32}) "
                f"{theirs:.3f} ms ({flops / theirs / 1e9:.1f} TFLOP/s); aot/cuBLAS time {ours / theirs:.2f} "
                f"({100 * theirs / ours:.0f}% of cuBLAS); max abs diff {worst:.3g} "
                f"({'PASS' if worst <= limit else 'FAIL'})")

    def overhead(self) -> str:
        if not self.torch.cuda:
            return "aot_run_device overhead: n/a (the peers run on the CPU: no CUDA streams or events)"
        if self.deadline.left() < self.settings.reserve + 10:
            return "aot_run_device overhead: skipped (deadline)"
        batch1 = [e for e in self.meta["models"] if e["batch"] == 1] or self.meta["models"]
        entry = min(batch1, key=lambda e: e["kernels"])
        try:
            inputs, _ = self.inputs(entry)
        except Exception as err:
            return f"aot_run_device overhead: {error_text(err)}"
        parts = []
        for graph in (True, False):
            try:
                parts.append(self._overhead(entry, inputs, graph))
            except Exception as err:
                parts.append(f"cuda_graph={graph}: {error_text(err)}")
        return f"aot_run_device overhead ({entry['model']} b1, {entry['kernels']} kernels; target < 5 us): " + "; ".join(parts)

    def _overhead(self, entry: dict[str, Any], inputs: dict[str, np.ndarray], graph: bool) -> str:
        torch = self.torch.torch
        runner = AotDevice(self.bundle / entry["folder"] / "model.aot", self.torch, inputs, cuda_graph=graph)
        stream = torch.cuda.Stream()
        settings = Settings(runs=200, min_runs=20, warmup=10, seconds=1.0)
        wall, _ = median_ms(lambda: runner.call(stream), lambda: None, settings)
        try:
            spans = profiled_spans(torch, lambda: runner.call(stream), runs=20)
            gpu, how = statistics.median(spans), "kernel span by CUPTI"
        except Exception as err:  # the profiler saw no kernels: the events bound instead
            gpu, how = event_ms(torch, stream, lambda: runner.call(stream), runs=20), \
                f"events on the caller's stream after a sleep (profiler: {type(err).__name__}): pre-launch part only"
        runner.close()
        return (f"cuda_graph={graph}: wall {wall * 1e3:.1f} us - GPU {gpu * 1e3:.1f} us = "
                f"{(wall - gpu) * 1e3:.1f} us ({how})")

    def compiled(self) -> None:
        """torch.compile per model and batch while the deadline allows (see the docstring)."""
        if "compile" not in self.peers:
            return
        print("\n## torch.compile (default mode, static shapes)\n", flush=True)
        abandoned = ""
        for entry, row in zip(self.meta["models"], self.rows):
            left = self.deadline.left() - self.settings.reserve
            if abandoned or left < 15:
                row.cells["compile"] = abandoned or "skipped (deadline)"
                continue
            row.cells["compile"] = self._compiled(entry, min(self.settings.compile_cap, left - 10))
            if isinstance(row.cells["compile"], str) and row.cells["compile"].startswith("compile >"):
                abandoned = "skipped (an earlier compile ran over its cap)"
            shown = row.cells["compile"]
            print(f"{row.model} b{row.batch}: compile {shown:.3f} ms" if isinstance(shown, float)
                  else f"{row.model} b{row.batch}: compile {shown}", flush=True)

    def _compiled(self, entry: dict[str, Any], cap: float) -> float | str:
        torch = self.torch.torch
        try:
            torch._dynamo.reset()
            module = self.torch.module(entry["architecture"])
            x = self.torch.tensor(self.inputs(entry)[0]["x"])
            compiled = torch.compile(module, dynamic=False)
            done: dict[str, Any] = {}

            def first() -> None:
                try:
                    with torch.inference_mode():
                        compiled(x)
                    self.torch.sync()
                except BaseException as err:  # handed to the caller
                    done["error"] = err

            start = time.perf_counter()
            worker = threading.Thread(target=first, daemon=True)
            worker.start()
            worker.join(cap)
            if worker.is_alive():
                return f"compile > {cap:g} s cap"
            if "error" in done:
                raise done["error"]
            compile_s = time.perf_counter() - start
            print(f"{entry['model']} b{entry['batch']}: torch.compile first call {compile_s:.1f} s", flush=True)
            with torch.inference_mode():
                ms, _ = median_ms(lambda: compiled(x), self.torch.sync, self.settings)
            return ms
        except Exception as err:
            return error_text(err)


def profiled_spans(torch: Any, call: Callable[[], Any], runs: int) -> list[float]:
    """Per run, ms from its first kernel's start to its last one's end, as CUPTI saw them
    (torch.profiler's chrome trace): the GPU time of the run's work."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            call()
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(trace_path))
        trace = json.loads(trace_path.read_text())
    return kernel_spans(trace, runs)


def kernel_spans(trace: dict[str, Any], runs: int) -> list[float]:
    """Split a chrome trace's kernels into `runs` equal consecutive groups; each group's span in ms."""
    kernels = sorted((e for e in trace.get("traceEvents", []) if e.get("cat") == "kernel" and "dur" in e),
                     key=lambda e: float(e["ts"]))
    if not kernels or len(kernels) % runs:
        raise ValueError(f"the trace has {len(kernels)} kernels for {runs} runs")
    per = len(kernels) // runs
    spans = []
    for i in range(runs):
        group = kernels[i * per:(i + 1) * per]
        end = max(float(e["ts"]) + float(e["dur"]) for e in group)
        spans.append((end - float(group[0]["ts"])) / 1e3)
    return spans


def event_ms(torch: Any, stream: Any, call: Callable[[], Any], runs: int) -> float:
    """Median ms between events on `stream` around a run queued behind a 1 ms sleep kernel:
    the sleep hides what the host does before the launch, so this is the run's wall time
    less that part."""
    times = []
    for _ in range(runs):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            torch.cuda._sleep(2_000_000)
            start.record(stream)
            call()
            stop.record(stream)
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def ratio(ours: float | str | None, theirs: float | str | None) -> str:
    if isinstance(ours, float) and isinstance(theirs, float) and theirs > 0:
        return f"{ours / theirs:.2f}"
    return "-"


def cell(value: float | str | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else value


def tokens_per_s(row: Row) -> str:
    """For a language model step: batch x tokens per second of aot / eager / jax."""
    if not row.tokens:
        return "-"

    def rate(value: float | str | None) -> str:
        return f"{row.batch * row.tokens / value * 1e3:.0f}" if isinstance(value, float) and value > 0 else "-"

    return " / ".join(rate(row.cells.get(peer)) for peer in ("aot", "eager", "jax"))


def table(rows: list[Row]) -> list[str]:
    lines = ["| model | batch | aot ms | eager ms | compile ms | jax ms | aot/eager | aot/compile | aot/jax | "
             "tokens/s aot / eager / jax |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        c = row.cells
        lines.append(f"| {row.model} | {row.batch} | {cell(c.get('aot'))} | {cell(c.get('eager'))} | "
                     f"{cell(c.get('compile'))} | {cell(c.get('jax'))} | {ratio(c.get('aot'), c.get('eager'))} | "
                     f"{ratio(c.get('aot'), c.get('compile'))} | {ratio(c.get('aot'), c.get('jax'))} | "
                     f"{tokens_per_s(row)} |")
    return lines


def describe(check: Check, runtime: str) -> None:
    torch = check.torch.torch
    print(f"runtime: {os.environ.get('AOT_RUNTIME_LIB') or 'built by the binding'} ({runtime})")
    if check.torch.cuda:
        print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}; TF32 off (matmul and cuDNN)")
    else:
        print(f"torch {torch.__version__} on the CPU (--peer-device cpu)")
    if check.jax is not None:
        print(f"jax {check.jax.__version__} on {check.jax.devices()[0]}; jax_default_matmul_precision=highest")
    elif "jax" in check.peers:
        print(f"jax: {check.jax_error}")
    left = check.meta.get("left_out") or []
    print(f"bundle: {len(check.meta['models'])} model runs, {len(check.meta.get('llm', []))} llama_tiny steps; weights {check.meta.get('weights', '?')}"
          + (f"; left out: {'; '.join(left)}" if left else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--quick", action="store_true", help="fewer and shorter runs, a lower compile cap")
    parser.add_argument("--deadline", type=float, default=420.0, help="seconds for everything")
    parser.add_argument("--peer-device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--peers", default=",".join(PEERS), help=f"of {','.join(PEERS)} (aot always runs)")
    parser.add_argument("--model", action="append", help="only these models")
    parser.add_argument("--runs", type=int, help="at most this many timed runs per measurement")
    parser.add_argument("--compile-cap", type=float, help="seconds torch.compile's first call may take")
    parser.add_argument("--runtime-note", default="", help="how the runtime library was had (printed)")
    args = parser.parse_args(argv)
    deadline = Deadline(args.deadline)
    settings = Settings.quick() if args.quick else Settings()
    if args.runs:
        settings.runs = args.runs
        settings.min_runs = min(settings.min_runs, args.runs)
    if args.compile_cap is not None:
        settings.compile_cap = args.compile_cap
    peers = tuple(p for p in args.peers.split(",") if p)
    unknown = set(peers) - set(PEERS)
    if unknown:
        parser.error(f"unknown peers {sorted(unknown)}")
    meta = json.loads((args.bundle / "bundle.json").read_text())
    if args.model:
        meta["models"] = [e for e in meta["models"] if e["model"] in args.model]
        meta["llm"] = [e for e in meta.get("llm", []) if "llama_tiny" in args.model]
    check = Check(args.bundle, meta, settings, deadline, args.peer_device, peers)
    describe(check, args.runtime_note)
    # llama_tiny before the GEMM and torch.compile, which the deadline cuts first
    steps: list[tuple[str, Callable[[], Any]]] = [("correctness", check.correctness), ("latency", check.latency),
                                                  ("llama_tiny", check.llm)]
    for name, step in steps:
        try:
            step()
        except Exception:
            check.failures += 1
            print(f"{name}: error\n{traceback.format_exc()}", flush=True)
    print("\n## GEMM and overhead\n", flush=True)
    gemm = check.gemm()
    overhead = check.overhead()
    print(overhead, flush=True)
    try:
        check.compiled()
    except Exception:
        print(f"torch.compile: error\n{traceback.format_exc()}", flush=True)
    for row in check.rows + check.llm_rows:
        for peer in ("aot",) + peers:
            row.cells.setdefault(peer, "skipped (deadline)")
    print("\n## Table (ms; ratios < 1: aot is faster)\n")
    print("\n".join(table(check.rows + check.llm_rows)))
    print()
    print("\n".join(gemm + [overhead] + check.notes))
    print(f"\n{'all GPU outputs match' if not check.failures else f'{check.failures} FAILED'}; "
          f"{args.deadline - deadline.left():.0f} s")
    sys.stdout.flush()
    # an abandoned torch.compile may still run in a thread: do not wait for it
    os._exit(1 if check.failures else 0)


if __name__ == "__main__":
    main()
