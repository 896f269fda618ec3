"""Write the bundle that benchmarks/gpu_check.sh runs on a machine with a GPU.

    python benchmarks/gpu_bundle.py gpu_bundles                    # every suite model, batch 1 and 32, the GEMMs, llama_tiny
    python benchmarks/gpu_bundle.py OUT --model mlp --batch 1 --gemm-size 64 --host-code --llm small  # the tests'

For each benchmark model (benchmarks/gpu_suite.py's: mlp, mlp_b64, lenet, mobilenetv2,
bert_mini, gpt_block, and resnet18 while the bundle stays under --budget-mib; past it, also
the batch-32 cases of DROPPABLE, in order, each said) and batch
(1 and 32; mlp_b64 is mlp at its own batch, 64): the artifact compiled here with
--target cpu,cuda (CPU code for x86-64-v3, PTX and cubin for sm_80 and sm_90), and what
its CPU code returns here (the C runtime) on the case's input, which the GPU run must
match; the input itself is made again there (case_input), not carried. Per model, the ONNX file (lzma-compressed: the device has no
zstandard module), exported with a dynamic batch dim, from which the device side builds
the JAX peer through aot's importer. Then two artifacts of one 4096^3 GEMM, MatMul(A, B)
with both operands as inputs (no weights to carry), fp32 and tf32; and lib/: the C runtime
built here (`make -C runtime_c`) with the libzstd.so.1 it links, used there when the
runtime cannot be built. bundle.json lists it all.

Weights: the models are those of models/make_benchmarks.py (same seed), but every weight
of 4096 or more elements is rounded to one of 8 levels (integer multiples of its standard
deviation in [-4, 3]): the artifacts and ONNX files then compress 6-10x, which keeps the
bundle small enough to carry, and neither the timings nor the GPU-vs-CPU comparison
depend on the values. The torch peers there build the same
modules with their own initial weights (timing only).

llama_tiny (models/make_llm.py, FULL config; --llm small: the test config): its default torch
export compiled three ways with --target cpu,cuda and the cache donated (past_* into
present_*, inferred from the names; the manifest's "donations" must say so): a decode step
(T=1) at batch 1 and 8 and one prefill (T=64), in OUT/llama_*/. Its weights rounded as above
and carried as int8 codes and a step per tensor (OUT/llama/weights.npz, compressed), from
which the device side builds the JAX (make_llm.jax_decoder) and torch (torch_module) peers.
The inputs are made again there (llm_inputs); of the CPU outputs the logits are carried, and
of present_* only the slots the step writes (the rest is the past, which the device side has).

--host-code also writes OUT/host/: per artifact, the host build of its GPU kernels, which
the stand-in CUDA driver (tests/fake_cuda_util.py, AOT_FAKE_CUDA_HOST_DIR=OUT/host) runs in
place of a GPU: the tests run the device-side program here that way.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import lzma
import shutil
import subprocess
import sys
import tempfile
import warnings
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))

SUITE = ("mlp", "mlp_b64", "lenet", "mobilenetv2", "bert_mini", "gpt_block", "resnet18")
OPTIONAL = ("resnet18",)  # left out, and said so, when the bundle would pass the budget
# then, while the bundle is still over it, these cases, in this order (their CPU outputs
# are most of their size: 4 MB of noise each): llama_tiny's 25 MiB of artifacts take their room
DROPPABLE = ("gpt_block_b32", "bert_mini_b32", "mobilenetv2_b32")
OWN_BATCH = {"mlp_b64": ("mlp", 64)}  # a suite model that is another at a fixed batch
CPU = "x86-64-v3"  # any H200 host runs it; the CPU code runs only here anyway
LEVELS = 4  # weights rounded to integer multiples of their std in [-LEVELS, LEVELS - 1]
ROUNDED_AT = 4096  # elements: smaller tensors (biases, norms) keep their values


@dataclass(frozen=True)
class Case:
    model: str  # the suite's name
    architecture: str  # make_benchmarks' name of the module (mlp_b64 -> mlp)
    batch: int

    @property
    def folder(self) -> str:
        return self.model if self.model in OWN_BATCH else f"{self.model}_b{self.batch}"


def cases(models: list[str], batches: list[int]) -> list[Case]:
    result = []
    for model in models:
        if model in OWN_BATCH:
            architecture, batch = OWN_BATCH[model]
            result.append(Case(model, architecture, batch))
        else:
            result += [Case(model, model, b) for b in batches]
    return result


def case_input(shape: Sequence[int]) -> np.ndarray:
    """A case's input, made the same way on both sides instead of carried (mobilenetv2's
    batch of 32 is 19 MB): numpy's legacy generator, whose stream numpy keeps fixed; the
    bundle records its CRC-32, which the device side checks."""
    return np.random.RandomState(0).standard_normal(tuple(shape)).astype(np.float32)


def round_weights(module: Any) -> None:
    """Every parameter of ROUNDED_AT or more elements to 2 * LEVELS levels (see the module docstring)."""
    import torch

    with torch.no_grad():
        for p in module.parameters():
            if p.numel() >= ROUNDED_AT:
                step = float(p.std()) or 1.0
                p.copy_(torch.clamp(torch.round(p / step), -LEVELS, LEVELS - 1) * step)


@dataclass(frozen=True)
class LlmCase:
    kind: str  # "decode" or "prefill"
    batch: int
    tokens: int
    position: int  # where the new tokens start in the cache

    @property
    def folder(self) -> str:
        return f"llama_{self.kind}_b{self.batch}t{self.tokens}"

    @property
    def model(self) -> str:  # the table's name
        return f"llama_tiny {self.kind}" + (f" T{self.tokens}" if self.kind == "prefill" else "")


def llm_cases(small: bool) -> list[LlmCase]:
    """Decode at batch 1 and 8 (the cache half full), prefill T=64 from slot 0; the small
    config (max_len 32) decodes at batch 1 and 2 and prefills 8 tokens."""
    if small:
        return [LlmCase("decode", 1, 1, 16), LlmCase("decode", 2, 1, 16), LlmCase("prefill", 1, 8, 0)]
    return [LlmCase("decode", 1, 1, 128), LlmCase("decode", 8, 1, 128), LlmCase("prefill", 1, 64, 0)]


def llm_inputs(cfg: Any, case: dict[str, Any]) -> dict[str, np.ndarray]:
    """A step's feeds, made the same way on both sides (legacy generator; the bundle has the
    CRC-32 of the cache): ids in the vocab, the cache noise everywhere (the slots after the
    step's last are stale junk the mask must ignore)."""
    rng = np.random.RandomState(1)
    cache = (cfg.layers, case["batch"], cfg.kv_heads, cfg.max_len, cfg.head_dim)
    ids = rng.randint(0, cfg.vocab, (case["batch"], case["tokens"])).astype(np.int64)
    return {"input_ids": ids, "position": np.array(case["position"], np.int64),
            "past_keys": rng.standard_normal(cache).astype(np.float32),
            "past_values": rng.standard_normal(cache).astype(np.float32)}


def feeds_crc32(feeds: dict[str, np.ndarray]) -> int:
    crc = 0
    for name in sorted(feeds):
        crc = zlib.crc32(np.ascontiguousarray(feeds[name]).tobytes(), crc)
    return crc


def round_codes(w: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """(int8 codes in [-LEVELS, LEVELS - 1], step): the weight is codes * step (float32)."""
    step = np.float32(float(w.std()) or 1.0)
    return np.clip(np.round(w / step), -LEVELS, LEVELS - 1).astype(np.int8), step


def pack_llm_weights(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The npz's arrays: tensors of ROUNDED_AT or more elements as codes and step, others as they are."""
    packed: dict[str, np.ndarray] = {}
    for name, w in weights.items():
        if w.size >= ROUNDED_AT:
            packed[f"{name}.codes"], packed[f"{name}.step"] = round_codes(w)
        else:
            packed[name] = w
    return packed


def load_llm_weights(path: Path) -> tuple[Any, dict[str, np.ndarray]]:
    """(make_llm.Config, the rounded weights) from the bundle's weights.npz."""
    import make_llm

    with np.load(path) as data:
        fields = {k.removeprefix("config."): data[k].item() for k in data.files if k.startswith("config.")}
        arrays = {k: data[k] for k in data.files if not k.startswith("config.")}
    weights = {}
    for name, value in arrays.items():
        if name.endswith(".codes"):
            base = name.removesuffix(".codes")
            weights[base] = value.astype(np.float32) * arrays[f"{base}.step"].astype(np.float32)
        elif not name.endswith(".step"):
            weights[name] = value
    return make_llm.Config(**fields), weights


def write_llm(out: Path, small: bool, host_code: bool) -> list[dict[str, Any]]:
    """llama_tiny's weights, artifacts and CPU outputs (see the module docstring)."""
    import make_llm
    from aot.driver import compile_model
    from aot.runtime.session import Session

    cfg = make_llm.SMALL if small else make_llm.FULL
    folder = out / "llama"
    folder.mkdir(parents=True, exist_ok=True)
    config = {f"config.{k}": np.array(v) for k, v in dataclasses.asdict(cfg).items()}
    np.savez_compressed(folder / "weights.npz", **config, **pack_llm_weights(make_llm.make_weights(cfg)))
    cfg, weights = load_llm_weights(folder / "weights.npz")  # what the device side will have
    entries = []
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = Path(tmp) / f"{make_llm.NAME}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            make_llm.export_torch(cfg, weights, onnx_path)
        for case in llm_cases(small):
            entry = {"model": case.model, "kind": case.kind, "batch": case.batch, "tokens": case.tokens,
                     "position": case.position, "folder": case.folder, "weights": "llama/weights.npz"}
            feeds = llm_inputs(cfg, entry)
            cache = cfg.cache_shape(case.batch)
            result = compile_model(onnx_path, target="cpu,cuda", cpu=CPU,
                                   shapes={"input_ids": (case.batch, case.tokens), "past_keys": cache,
                                           "past_values": cache})
            donations = result.manifest.get("donations")
            if not donations:
                raise RuntimeError(f"{case.folder}: the artifact donates no cache (manifest: {donations!r})")
            (out / case.folder).mkdir(parents=True, exist_ok=True)
            (out / case.folder / "model.aot").write_bytes(result.artifact)
            with Session(result.artifact) as session:
                outputs = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
            written = slice(case.position, case.position + case.tokens)
            np.savez_compressed(out / case.folder / "cpu_outputs.npz", logits=outputs["logits"],
                                **{f"{name}.written": outputs[name][:, :, :, written]
                                   for name in ("present_keys", "present_values")})
            entry.update({"feeds_crc32": feeds_crc32(feeds), "donations": donations,
                          "kernels": len(result.manifest["cuda"]["sms"][0]["kernels"])})
            if host_code:
                write_host_code(result, out)
            entries.append(entry)
            print(f"{case.folder}: {entry['kernels']} kernels, donations {donations}", flush=True)
    return entries


def llm_reference(cpu: Any, feeds: dict[str, np.ndarray], entry: dict[str, Any]) -> list[np.ndarray]:
    """The CPU artifact's outputs in full (logits, present_keys, present_values): the past with
    the carried written slots put in."""
    written = slice(entry["position"], entry["position"] + entry["tokens"])
    result = [cpu["logits"]]
    for name, past in (("present_keys", "past_keys"), ("present_values", "past_values")):
        full = feeds[past].copy()
        full[:, :, :, written] = cpu[f"{name}.written"]
        result.append(full)
    return result


def export_onnx(architecture: str, path: Path) -> tuple[int, ...]:
    """The make_benchmarks module (seeded, its BatchNorms given statistics), weights
    rounded, exported with a dynamic batch dim; returns the module's input shape."""
    import make_benchmarks
    import torch

    torch.manual_seed(make_benchmarks.SEED)
    module, shape = make_benchmarks.build_models()[architecture]()
    make_benchmarks._randomize_batch_norm(module)
    module.eval()
    round_weights(module)
    x = torch.zeros(shape)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter announces its deprecation
        torch.onnx.export(module, (x,), str(path), input_names=["x"], output_names=["y"],
                          opset_version=make_benchmarks.OPSET, dynamo=False,
                          training=torch.onnx.TrainingMode.PRESERVE,
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    return tuple(shape)


def gemm_model(n: int):
    """y = a @ b with both n x n operands as inputs."""
    from onnx import TensorProto, helper

    f = TensorProto.FLOAT
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "gemm",
                              [helper.make_tensor_value_info("a", f, (n, n)), helper.make_tensor_value_info("b", f, (n, n))],
                              [helper.make_tensor_value_info("y", f, (n, n))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def write_host_code(result: Any, out: Path) -> None:
    """The host build of the artifact's GPU kernels (aot/codegen/nvptx/host_library.py) in
    OUT/host, where the stand-in driver finds it by its module's key (AOT_FAKE_CUDA_HOST_DIR)."""
    from aot.codegen.nvptx.host_library import artifact_host_libraries

    artifact_host_libraries(result, out / "host")


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def write_case(case: Case, onnx_path: Path, shape: tuple[int, ...], out: Path, host_code: bool) -> dict[str, Any]:
    from aot.driver import compile_model
    from aot.runtime.session import Session

    full = (case.batch,) + shape[1:]
    result = compile_model(onnx_path, target="cpu,cuda", cpu=CPU, shapes={"x": full})
    folder = out / case.folder
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.aot").write_bytes(result.artifact)
    x = case_input(full)
    with Session(result.artifact) as session:
        outputs = session.run(None, {"x": x})
        names = [o.name for o in session.get_outputs()]
    np.savez(folder / "cpu_outputs.npz", **dict(zip(names, outputs)))
    entry = {"model": case.model, "architecture": case.architecture, "batch": case.batch, "folder": case.folder,
             "shape": list(full), "input_crc32": zlib.crc32(x.tobytes()), "onnx": f"onnx/{case.architecture}.onnx.xz",
             "kernels": len(result.manifest["cuda"]["sms"][0]["kernels"]), "outputs": names}
    if host_code:
        write_host_code(result, out)
    return entry


def write_gemm(n: int, precision: str, out: Path, host_code: bool) -> dict[str, Any]:
    from aot.driver import compile_model

    result = compile_model(gemm_model(n), target="cuda", gpu_matmul_precision=precision)
    folder = out / f"gemm_{precision}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.aot").write_bytes(result.artifact)
    entry = {"n": n, "precision": precision, "folder": folder.name}
    if host_code:
        write_host_code(result, out)
    return entry


def _linked_zstd(library: Path) -> Path | None:
    """The libzstd.so.1 that `library` loads here (ldd), to carry beside it."""
    try:
        listing = subprocess.run(["ldd", str(library)], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    for line in listing.splitlines():
        parts = line.split()
        if parts and parts[0].startswith("libzstd.so") and "=>" in parts and len(parts) > 2:
            return Path(parts[2])
    return None


def write_runtime(out: Path) -> dict[str, Any]:
    """lib/libaot_runtime.so built here and the libzstd.so.1 it links: the fallback there."""
    build = Path(tempfile.mkdtemp(prefix="aot-runtime-"))
    try:
        subprocess.run(["make", "-s", "-C", str(ROOT / "runtime_c"), f"BUILD_DIR={build}", "all"], check=True,
                       stdout=subprocess.DEVNULL)
        lib = out / "lib"
        lib.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build / "libaot_runtime.so", lib / "libaot_runtime.so")
        zstd = _linked_zstd(build / "libaot_runtime.so")
        if zstd is not None:
            shutil.copy2(zstd.resolve(), lib / "libzstd.so.1")
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return {"library": "lib/libaot_runtime.so", "zstd": "lib/libzstd.so.1" if zstd is not None else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", action="append", choices=SUITE, help="suite models (default: all)")
    parser.add_argument("--batch", action="append", type=int, help="batch sizes (default: 1 and 32)")
    parser.add_argument("--gemm-size", type=int, default=4096, help="n of the n^3 GEMM; 0: no GEMM")
    parser.add_argument("--budget-mib", type=float, default=60.0, help="leave out resnet18, then DROPPABLE's cases, past this size")
    parser.add_argument("--host-code", action="store_true", help="also the kernels' host builds (stand-in driver)")
    parser.add_argument("--llm", choices=("full", "small", "none"), default="full",
                        help="llama_tiny's config (small: the tests'), or none")
    parser.add_argument("--no-runtime", action="store_true", help="no prebuilt C runtime in lib/")
    args = parser.parse_args(argv)
    models = args.model or list(SUITE)
    batches = args.batch or [1, 32]
    out = args.out
    if out.exists():
        shutil.rmtree(out)
    (out / "onnx").mkdir(parents=True)
    bundle: dict[str, Any] = {"models": [], "gemm": [], "llm": [], "left_out": [], "cpu": CPU,
                              "weights": f"rounded to {2 * LEVELS} levels from {ROUNDED_AT} elements"}
    if not args.no_runtime:
        bundle["runtime"] = write_runtime(out)
    for precision in ("fp32", "tf32") if args.gemm_size else ():
        bundle["gemm"].append(write_gemm(args.gemm_size, precision, out, args.host_code))
    if args.llm != "none":  # before the suite's optional models, which the budget drops first
        bundle["llm"] = write_llm(out, args.llm == "small", args.host_code)
        print(f"llama_tiny: the bundle is {_size(out) / 2**20:.1f} MiB with it", flush=True)
    # the optional models last: they are what goes when the budget is reached
    ordered = [m for m in models if m not in OPTIONAL] + [m for m in models if m in OPTIONAL]
    with tempfile.TemporaryDirectory() as tmp:
        shapes: dict[str, tuple[int, ...]] = {}
        for model in ordered:
            before = _size(out)
            written = []
            for case in cases([model], batches):
                plain = Path(tmp) / f"{case.architecture}.onnx"
                if case.architecture not in shapes:
                    shapes[case.architecture] = export_onnx(case.architecture, plain)
                    packed = out / "onnx" / f"{case.architecture}.onnx.xz"
                    if not packed.exists():
                        packed.write_bytes(lzma.compress(plain.read_bytes(), preset=6))
                written.append(write_case(case, plain, shapes[case.architecture], out, args.host_code))
                print(f"{case.folder}: {written[-1]['kernels']} kernels", flush=True)
            total = _size(out) / 2**20
            if model in OPTIONAL and total > args.budget_mib:
                for entry in written:
                    shutil.rmtree(out / entry["folder"])
                (out / "onnx" / f"{written[0]['architecture']}.onnx.xz").unlink(missing_ok=True)
                bundle["left_out"].append(f"{model}: the bundle would be {total:.1f} MiB, over {args.budget_mib:g}")
                print(f"{model} left out: {total:.1f} MiB with it (budget {args.budget_mib:g} MiB; "
                      f"{(total * 2**20 - before) / 2**20:.1f} MiB its own)", flush=True)
                continue
            bundle["models"] += written
    for folder in DROPPABLE:
        total = _size(out) / 2**20
        written = [e for e in bundle["models"] if e["folder"] == folder]
        if total <= args.budget_mib or not written:
            continue
        shutil.rmtree(out / folder)
        bundle["models"].remove(written[0])
        bundle["left_out"].append(f"{folder}: the bundle would be {total:.1f} MiB, over {args.budget_mib:g}")
        print(f"{folder} left out: {total:.1f} MiB with it (budget {args.budget_mib:g} MiB)", flush=True)
    (out / "bundle.json").write_text(json.dumps(bundle, indent=1) + "\n")
    total = _size(out) / 2**20
    over = f" (over the {args.budget_mib:g} MiB budget with nothing left to drop)" if total > args.budget_mib else ""
    print(f"{out}: {total:.1f} MiB{over}" + (f"; left out: {'; '.join(bundle['left_out'])}" if bundle["left_out"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
