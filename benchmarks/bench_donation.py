"""What buffer donation saves in a decode step: the KV cache updated in place.

    python benchmarks/bench_donation.py [--runs 200] [--cache 1x8x512x256] [--no-gpu]

A cache past_keys [B, H, S, D] (default 4 MiB of float32) gets one new row at a position
input (ScatterND) and comes out as present_keys; the "step" model also reads the whole
updated cache as attention does (softmax(q K^T) K), the "update" model only updates it.
Each is compiled with past_keys donated to present_keys (inferred from the names) and
without (--no-infer-donation), and run on one thread, in this one process, interleaved
run by run:

- one buffer:   the cache array is fed and given as present_keys (a decode loop): in place;
- two buffers:  fed one array, written into another: the runtime copies the cache first;
- not donated:  the scatter kernel copies the whole cache into the output, then the row;

and, for scale, numpy copying the cache once. Prints the median time of each, and on the test stand-in for the CUDA driver (no GPU
needed) the device-to-device copies a run makes with one device buffer and with two.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from aot.driver import compile_model
from aot.runtime.session import Session


def cache_model(shape: tuple[int, int, int, int], attention: bool):
    b, h, s, d = shape
    base = np.zeros((b, h, 1, 3), np.int64)
    base[..., 0] = np.arange(b)[:, None, None]
    base[..., 1] = np.arange(h)[None, :, None]
    inits = [numpy_helper.from_array(base, "base"), numpy_helper.from_array(np.array([0, 0, 1], np.int64), "axis2")]
    nodes = [helper.make_node("Mul", ["position", "axis2"], ["shift"]),
             helper.make_node("Add", ["base", "shift"], ["index"]),
             helper.make_node("ScatterND", ["past_keys", "index", "new_keys"], ["present_keys"])]
    f32 = TensorProto.FLOAT
    outputs = [helper.make_tensor_value_info("present_keys", f32, shape)]
    inputs = [helper.make_tensor_value_info("past_keys", f32, shape),
              helper.make_tensor_value_info("position", TensorProto.INT64, ()),
              helper.make_tensor_value_info("new_keys", f32, (b, h, 1, d))]
    if attention:
        nodes += [helper.make_node("Transpose", ["present_keys"], ["keys_t"], perm=[0, 1, 3, 2]),
                  helper.make_node("MatMul", ["q", "keys_t"], ["scores"]),
                  helper.make_node("Softmax", ["scores"], ["probs"], axis=-1),
                  helper.make_node("MatMul", ["probs", "present_keys"], ["attn"])]
        inputs.append(helper.make_tensor_value_info("q", f32, (b, h, 1, d)))
        outputs.append(helper.make_tensor_value_info("attn", f32, (b, h, 1, d)))
    graph = helper.make_graph(nodes, "decode_step" if attention else "cache_update", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    return model


def feeds(shape: tuple[int, int, int, int], attention: bool) -> dict[str, np.ndarray]:
    b, h, s, d = shape
    rng = np.random.default_rng(0)
    out = {"past_keys": rng.standard_normal(shape).astype(np.float32), "position": np.array(s // 2, np.int64),
           "new_keys": rng.standard_normal((b, h, 1, d)).astype(np.float32)}
    if attention:
        out["q"] = rng.standard_normal((b, h, 1, d)).astype(np.float32)
    return out


def cpu_medians(shape, attention: bool, runs: int) -> dict[str, float]:
    """Median microseconds of one step, per way of running it (interleaved run by run)."""
    model = cache_model(shape, attention)
    donated = Session(compile_model(model).artifact, threads=1)
    plain = Session(compile_model(model, infer_donation=False).artifact, threads=1)
    assert donated.donations == {"past_keys": "present_keys"} and plain.donations == {}
    inputs = feeds(shape, attention)
    cache = inputs["past_keys"]
    other = np.empty_like(cache)
    ways = {
        "donated, one buffer": lambda: donated.run(None, inputs, outputs={"present_keys": cache}),
        "donated, two buffers": lambda: donated.run(None, inputs, outputs={"present_keys": other}),
        "not donated": lambda: plain.run(None, inputs, outputs={"present_keys": other}),
        "(numpy copy of cache)": lambda: np.copyto(other, cache),  # what a copy of the cache costs here
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(5):
        for run in ways.values():
            run()
    for _ in range(runs):
        for name, run in ways.items():
            start = time.perf_counter()
            run()
            times[name].append((time.perf_counter() - start) * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}


def stand_in_copies(shape) -> dict[str, int]:
    """Device-to-device copies per run on the stand-in driver, with one device buffer and with two."""
    from aot.codegen.nvptx.host_library import artifact_host_libraries
    from aot.runtime.device_array import DeviceArray

    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from fake_cuda_util import fake_cuda_env, fake_cuda_stat  # the stand-in lives with the tests

    result = compile_model(cache_model(shape, False), target="cpu,cuda")
    with tempfile.TemporaryDirectory() as folder:
        artifact_host_libraries(result, folder)
        with fake_cuda_env(None, folder):
            session = Session(result.artifact, device="cuda")
            device = {k: DeviceArray.from_numpy(session, v) for k, v in feeds(shape, False).items()}
            other = DeviceArray.empty(session, shape, np.float32)
            counts = {}
            for name, out in (("one device buffer", device["past_keys"]), ("two device buffers", other)):
                before = fake_cuda_stat("cuMemcpyDtoDAsync_v2"), fake_cuda_stat("cuMemcpyHtoDAsync_v2")
                for _ in range(3):
                    session.run(None, device, outputs={"present_keys": out})
                copies = fake_cuda_stat("cuMemcpyDtoDAsync_v2") - before[0], fake_cuda_stat("cuMemcpyHtoDAsync_v2") - before[1]
                counts[name] = copies
            session.close()
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--cache", default="1x8x512x256", help="B x H x S x D (default: 4 MiB of float32)")
    parser.add_argument("--no-gpu", action="store_true", help="skip the stand-in driver's copy count")
    args = parser.parse_args()
    shape = tuple(int(n) for n in args.cache.split("x"))
    mib = np.prod(shape) * 4 / 2**20
    print(f"cache {list(shape)} float32 ({mib:.2f} MiB), 1 thread, median of {args.runs} runs")
    for attention in (False, True):
        medians = cpu_medians(shape, attention, args.runs)
        what = "update + attention over the cache" if attention else "cache update only"
        base = medians["donated, one buffer"]
        print(f"\n{what}:")
        for name, us in medians.items():
            print(f"  {name:<22} {us:10.1f} us   {us / base:6.2f}x")
    if not args.no_gpu:
        print("\nstand-in CUDA driver, 3 runs each (device-to-device, host-to-device copies):")
        for name, (dtod, htod) in stand_in_copies(shape).items():
            print(f"  {name:<22} {dtod} DtoD, {htod} HtoD")


if __name__ == "__main__":
    main()
