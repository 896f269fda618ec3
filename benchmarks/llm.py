"""llama_tiny (models/make_llm.py): decode and prefill, aot against onnxruntime and jax.jit on the CPU.

    python benchmarks/llm.py [--small] [--runs 20] [--out DIR] [--export torch|torch23|op23]
                             [--batches 1,8] [--position 128] [--prompts 16,64,128] [--threads N]
                             [--copy-mib 256]

Cases: a decode step (T=1) at batch 1 and 8 with the cache filled up to --position, and
a prefill of each prompt length at batch 1 into an empty cache. For each case aot
compiles one ONNX export with --shape (--export: torch, the default, is torch.onnx.export
at its default opset, llama_tiny.onnx; torch23 the same at opset 23, with RMSNormalization
and Attention nodes; op23 the onnx.helper graph with RotaryEmbedding too); the engines are aot's Session
at 1 thread and at N (default: all cores), onnxruntime on the same ONNX at 1 and N, and
jax.jit of the same decoder on the same weights (XLA's CPU client, all cores). aot's
outputs are checked against onnxruntime's first (err: max |aot - ort| over each
output's max |ort|, the largest over the outputs). Medians of alternating blocks of
runs (benchmarks/side_by_side.py); ratios are aot / peer: ABOVE 1 MEANS AOT IS SLOWER.

The cache: where the artifact donates past_* to present_* (aot-compile --donate, inferred
from these names), aot's decode passes one buffer as both and updates it in place, and
jax.jit donates its cache arguments likewise; otherwise aot's step copies the cache, as
onnxruntime's does (the table's `cache` column says which).

Weight streaming: a decode step reads every weight once (the tied embedding is the LM
head), so GB/s = weight bytes / step time, against a memcpy-style bandwidth measured in
the same run: numpy copying a buffer of --copy-mib MiB (far beyond the last-level cache),
counted as read + write bytes (STREAM's copy convention), one thread.

--generate N: then greedy generation of N tokens after a 16-token prompt, by aot (the
prefill and decode artifacts, the cache in place), onnxruntime and jax.jit: the largest
logits difference per peer (over each step's logits scale) and whether the tokens are
the same.

--small: the test config (models/make_llm.py SMALL), prompts 8,16 and position 16.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))

import make_llm  # noqa: E402
from side_by_side import alternate_medians, cpu_model_name  # noqa: E402

import aot  # noqa: E402
from aot.codegen.cpu.target import CpuTarget  # noqa: E402

ENGINES = ("aot 1t", "aot Nt", "ort 1t", "ort Nt", "jax")


@dataclass
class Case:
    kind: str  # decode or prefill
    batch: int
    tokens: int
    position: int

    @property
    def name(self) -> str:
        return f"{self.kind} b{self.batch}" + (f" @{self.position}" if self.kind == "decode" else f" T={self.tokens}")


@dataclass
class Row:
    case: Case
    ms: dict[str, float] = field(default_factory=dict)  # engine -> median
    err: float | None = None
    cache: str = ""
    problem: str = ""


def copy_bandwidth(mib: int, repeats: int = 5) -> float:
    """GB/s of numpy copying `mib` MiB: (read + write bytes) / median time."""
    src = np.ones(mib << 18, np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # fault the pages in
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - start)
    return 2 * src.nbytes / statistics.median(times) / 1e9


EXPORTS = {"torch": f"{make_llm.NAME}.onnx", "torch23": f"{make_llm.NAME}_torch23.onnx",
           "op23": f"{make_llm.NAME}_op23.onnx"}


def ensure_models(out: Path, cfg: make_llm.Config, export: str) -> Path:
    """The weights and the export in `out`, reused when an earlier run wrote them for this config."""
    weights, model = out / f"{make_llm.NAME}.npz", out / EXPORTS[export]
    if not (weights.is_file() and make_llm.load_weights(weights)[0] == cfg):
        out.mkdir(parents=True, exist_ok=True)
        make_llm.save_weights(weights, cfg, make_llm.make_weights(cfg))
        for stale in EXPORTS.values():  # made from other weights
            (out / stale).unlink(missing_ok=True)
    if model.is_file():
        return model
    saved = make_llm.load_weights(weights)[1]
    if export == "op23":
        make_llm.export_op23(cfg, saved, model)
    else:
        make_llm.export_torch(cfg, saved, model, opset=23 if export == "torch23" else None)
    return model


def compile_case(model: Path, cfg: make_llm.Config, case: Case, out: Path) -> Path:
    artifact = out / f"{model.stem}_{case.kind}_b{case.batch}_t{case.tokens}.aot"
    cache = cfg.cache_shape(case.batch)
    aot.compile(model, artifact, shapes={"input_ids": (case.batch, case.tokens), "past_keys": cache,
                                         "past_values": cache})
    return artifact


def case_feeds(cfg: make_llm.Config, case: Case) -> dict[str, np.ndarray]:
    return make_llm.make_inputs(cfg, case.batch, case.tokens, case.position, seed=1, filled=case.kind == "decode")


def max_error(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    return max(make_llm.max_scaled_error(np.asarray(g), np.asarray(w)) for g, w in zip(got, want))


def aot_engine(artifact: Path, feeds: Mapping[str, np.ndarray], threads: int) -> tuple[Callable[[], object], str]:
    """One step's call and how it treats the cache: in place where the artifact donates it."""
    session = aot.Session(artifact, threads=threads)
    donated = getattr(session, "donations", {})  # {input: output}; older runtimes have none
    own = {k: v.copy() for k, v in feeds.items()}
    if not donated:
        return (lambda: session.run(None, own)), "copied"
    outputs = {output: own[name] for name, output in donated.items()}
    return (lambda: session.run(None, own, outputs=outputs)), "in place"


def ort_engine(model: Path, feeds: Mapping[str, np.ndarray], threads: int) -> Callable[[], object]:
    session = make_llm.ort_session(model, threads)
    own = dict(feeds)
    return lambda: session.run(None, own)


def jax_engine(jitted: Callable, feeds: Mapping[str, np.ndarray]) -> Callable[[], object]:
    """A step of the jitted decoder with its cache donated and fed back (as JAX serving loops
    do); the logits come to the host, as a sampler needs them."""
    import jax

    ids, position = jax.device_put(feeds["input_ids"]), jax.device_put(feeds["position"])
    state = [jax.device_put(feeds["past_keys"]), jax.device_put(feeds["past_values"])]

    def step() -> np.ndarray:
        logits, state[0], state[1] = jitted(ids, position, state[0], state[1])
        state[1].block_until_ready()
        return np.asarray(logits)

    return step


def bench_case(model: Path, cfg: make_llm.Config, weights_jit: Callable, case: Case, out: Path,
               runs: int, threads: int) -> Row:
    row = Row(case)
    try:
        artifact = compile_case(model, cfg, case, out)
    except aot.AotError as err:
        row.problem = f"compile failed: {str(err).splitlines()[0]}"
        return row
    feeds = case_feeds(cfg, case)
    want = make_llm.ort_session(model).run(list(make_llm.OUTPUTS), dict(feeds))
    row.err = max_error(aot.Session(artifact).run(None, dict(feeds)), want)
    engines: dict[str, Callable[[], object]] = {}
    engines["aot 1t"], row.cache = aot_engine(artifact, feeds, 1)
    engines["aot Nt"], _ = aot_engine(artifact, feeds, threads)
    engines["ort 1t"] = ort_engine(model, feeds, 1)
    engines["ort Nt"] = ort_engine(model, feeds, threads)
    engines["jax"] = jax_engine(weights_jit, feeds)
    medians = alternate_medians(list(engines.values()), runs)
    row.ms = {name: 1e3 * s for name, s in zip(engines, medians)}
    return row


def aot_generation_step(prefill: Path, decode: Path) -> make_llm.Step:
    """aot's step: the prefill artifact for the prompt, the decode one after, its cache in place
    where the artifact donates it (the same arrays fed and written, step after step)."""
    sessions = {False: aot.Session(prefill), True: aot.Session(decode)}

    def step(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        session = sessions[feeds["input_ids"].shape[1] == 1]
        donated = getattr(session, "donations", {})
        own = {k: np.array(v) for k, v in feeds.items()}
        outputs = {output: own[name] for name, output in donated.items()}
        return session.run(None, own, outputs=outputs) if outputs else session.run(None, own)

    return step


def check_generation(model: Path, cfg: make_llm.Config, weights: Mapping[str, np.ndarray], out: Path,
                     steps: int, prompt: int = 16) -> list[str]:
    """Greedy generation by aot, onnxruntime and JAX; lines to print."""
    prefill = compile_case(model, cfg, Case("prefill", 1, prompt, 0), out)
    decode = compile_case(model, cfg, Case("decode", 1, 1, 0), out)
    ort = make_llm.ort_session(model)
    ours = make_llm.generate(cfg, aot_generation_step(prefill, decode), prompt, steps)
    lines = [f"greedy generation after a {prompt}-token prompt, {steps} decode steps, {len(ours[1])} tokens: "
             f"aot {ours[1]}"]
    peers = {"onnxruntime": lambda feeds: ort.run(list(make_llm.OUTPUTS), dict(feeds)),
             "jax.jit": make_llm.jax_engine(cfg, weights)}
    for name, step in peers.items():
        logits, tokens = make_llm.generate(cfg, step, prompt, steps)
        err = max(make_llm.max_scaled_error(a, b) for a, b in zip(ours[0], logits))
        lines.append(f"  against {name}: same tokens: {'yes' if tokens == ours[1] else 'NO ' + str(tokens)}; "
                     f"largest logits difference over {steps + 1} steps {err:.1e} of their scale")
    return lines


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def format_table(rows: list[Row], weight_bytes: int, copy_gbs: float, threads: int) -> list[str]:
    engines = [e.replace("Nt", f"{threads}t") for e in ENGINES]
    header = ["case", "tokens", *[f"{e} ms" for e in engines], "aot/ort 1t", f"aot/ort {threads}t",
              "aot/jax", "aot tok/s", "aot 1t GB/s", "% of copy", "cache", "err"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        case, ms = row.case, row.ms
        if row.problem:
            lines.append("| " + " | ".join([case.name, str(case.batch * case.tokens), row.problem]
                                           + ["-"] * (len(header) - 3)) + " |")
            continue
        best_aot = min(ms["aot 1t"], ms["aot Nt"])
        stream = case.kind == "decode"
        gbs = weight_bytes / (ms["aot 1t"] / 1e3) / 1e9 if stream else None
        cells = [case.name, str(case.batch * case.tokens), *[f"{ms[e]:.2f}" for e in ENGINES],
                 _ratio(ms["aot 1t"], ms["ort 1t"]), _ratio(ms["aot Nt"], ms["ort Nt"]), _ratio(best_aot, ms["jax"]),
                 f"{case.batch * case.tokens / best_aot * 1e3:.0f}",
                 f"{gbs:.1f}" if gbs else "-", f"{100 * gbs / copy_gbs:.0f}%" if gbs else "-",
                 row.cache, f"{row.err:.1e}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def parse_ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="the test config (tiny; for checking this program)")
    parser.add_argument("--runs", type=int, default=20, help="timed runs per engine and case (medians)")
    parser.add_argument("--out", type=Path, help="models and artifacts here, reused by a later run (default: temporary)")
    parser.add_argument("--export", choices=sorted(EXPORTS), default="torch",
                        help="which ONNX export aot and onnxruntime run (default torch)")
    parser.add_argument("--batches", type=parse_ints, default=[1, 8], help="decode batch sizes (default 1,8)")
    parser.add_argument("--position", type=int, help="decode's cache position (default 128; --small 16)")
    parser.add_argument("--prompts", type=parse_ints, help="prefill lengths (default 16,64,128; --small 8,16)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="the N of aot/ort Nt (default: all cores)")
    parser.add_argument("--copy-mib", type=int, default=256, help="the memcpy buffer, MiB (default 256)")
    parser.add_argument("--generate", type=int, default=0, help="then greedy generation of N tokens, compared")
    args = parser.parse_args(argv)
    cfg = make_llm.SMALL if args.small else make_llm.FULL
    position = args.position if args.position is not None else (16 if args.small else 128)
    prompts = args.prompts or ([8, 16] if args.small else [16, 64, 128])
    if not 0 <= position < cfg.max_len or any(not 0 < t <= cfg.max_len for t in prompts):
        parser.error(f"positions and prompt lengths must fit the cache of {cfg.max_len}")
    cases = [Case("decode", b, 1, position) for b in args.batches] + [Case("prefill", 1, t, 0) for t in prompts]

    import jax

    jax.config.update("jax_enable_x64", True)  # int64 ids and position, as the interface says
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        model = ensure_models(out, cfg, args.export)
        _, weights = make_llm.load_weights(out / f"{make_llm.NAME}.npz")
        jitted = jax.jit(make_llm.jax_decoder(cfg, weights), donate_argnums=(2, 3))
        weight_bytes = 4 * cfg.parameters()
        copy_gbs = copy_bandwidth(args.copy_mib)
        host = CpuTarget.host()
        print(f"CPU: {cpu_model_name()}, {os.cpu_count()} cores; aot compiles for {host.cpu} ({host.code_path})")
        print(f"model: {make_llm.NAME} {cfg.parameters() / 1e6:.2f} M parameters, {weight_bytes / 1e6:.1f} MB of "
              f"float32 weights, cache {cfg.max_len} slots; ONNX: {model.name}; runs={args.runs}, medians in ms")
        print(f"memcpy-style bandwidth: {copy_gbs:.1f} GB/s ({args.copy_mib} MiB numpy copy, read + write, 1 thread)")
        rows = [bench_case(model, cfg, jitted, case, out, args.runs, args.threads) for case in cases]
        print()
        for line in format_table(rows, weight_bytes, copy_gbs, args.threads):
            print(line)
        print()
        print("ratios: aot / peer, above 1 means aot is slower; aot/jax: aot's best thread count against jax.jit "
              "(XLA CPU, all cores). tok/s: tokens per call / aot's best median. GB/s: decode rows only, "
              "weight bytes / aot 1t median. cache: 'copied' = no donation in the artifact (each step copies "
              "past into present), 'in place' = donated. err: aot against onnxruntime on the same feeds.")
        same = True
        if args.generate:
            print()
            lines = check_generation(model, cfg, weights, out, args.generate)
            same = not any("same tokens: NO" in line for line in lines)
            print("\n".join(lines))
    return 1 if any(row.problem for row in rows) or not same else 0


if __name__ == "__main__":
    sys.exit(main())
