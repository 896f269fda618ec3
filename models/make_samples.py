"""Generate the sample ONNX models (mlp, lenet, lenet_bn) and a seeded input for each.

    python models/make_samples.py [--out models/out]

Built with onnx.helper alone (no framework), opset 17. Weights come from
numpy.random.default_rng(0), He-initialised so activations stay O(1); the
input of each model from default_rng(1). Same script, same bytes.

Importable: `make_sample(name) -> ModelProto`, `make_input(name) -> ndarray`,
`write_samples(out_dir) -> {name: path}`.
"""
from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # the IR version that goes with opset 17; readable by older runtimes too


class _Builder:
    """Collects nodes and initializers; names every value after the layer that makes it."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def weight(self, name: str, shape: tuple[int, ...], fan_in: int, gain: float = 2.0) -> str:
        array = (self.rng.standard_normal(shape) * np.sqrt(gain / fan_in)).astype(np.float32)
        return self.init(name, array)

    def init(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(self, op_type: str, inputs: list[str], name: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attrs))
        return name

    def gemm(self, x: str, name: str, n_in: int, n_out: int, gain: float = 2.0) -> str:
        # weights stored [out, in] with transB=1, as exporters write them
        w = self.weight(f"{name}.weight", (n_out, n_in), n_in, gain)
        b = self.init(f"{name}.bias", (0.01 * self.rng.standard_normal(n_out)).astype(np.float32))
        return self.node("Gemm", [x, w, b], name, transB=1)

    def conv(self, x: str, name: str, c_in: int, c_out: int, k: int, pad: int, bias: bool = True) -> str:
        w = self.weight(f"{name}.weight", (c_out, c_in, k, k), c_in * k * k)
        inputs = [x, w]
        if bias:
            inputs.append(self.init(f"{name}.bias", (0.01 * self.rng.standard_normal(c_out)).astype(np.float32)))
        return self.node("Conv", inputs, name, kernel_shape=[k, k], pads=[pad] * 4)

    def batch_norm(self, x: str, name: str, channels: int) -> str:
        gamma = (1.0 + 0.1 * self.rng.standard_normal(channels)).astype(np.float32)
        beta = (0.1 * self.rng.standard_normal(channels)).astype(np.float32)
        mean = (0.1 * self.rng.standard_normal(channels)).astype(np.float32)
        var = self.rng.uniform(0.5, 1.5, channels).astype(np.float32)
        params = [self.init(f"{name}.{p}", a) for p, a in (("scale", gamma), ("bias", beta), ("mean", mean), ("var", var))]
        return self.node("BatchNormalization", [x] + params, name, epsilon=1e-5)

    def model(self, name: str, x_shape: list[int], y_shape: list[int]) -> onnx.ModelProto:
        """The graph x -> ... -> y; the last node's output is renamed to "y"."""
        self.nodes[-1].output[0] = "y"
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
            initializer=self.inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="aot-samples")
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        return model


def _mlp(b: _Builder) -> onnx.ModelProto:
    h = b.node("Relu", [b.gemm("x", "fc1", 784, 1024)], "relu1")
    h = b.node("Relu", [b.gemm(h, "fc2", 1024, 1024)], "relu2")
    b.gemm(h, "fc3", 1024, 10, gain=1.0)
    return b.model("mlp", [1, 784], [1, 10])


def _lenet(b: _Builder) -> onnx.ModelProto:
    h = b.node("Relu", [b.conv("x", "conv1", 1, 6, 5, pad=2)], "relu1")          # 6x28x28
    h = b.node("MaxPool", [h], "pool1", kernel_shape=[2, 2], strides=[2, 2])       # 6x14x14
    h = b.node("Relu", [b.conv(h, "conv2", 6, 16, 5, pad=0)], "relu2")            # 16x10x10
    h = b.node("MaxPool", [h], "pool2", kernel_shape=[2, 2], strides=[2, 2])       # 16x5x5
    h = b.node("Flatten", [h], "flatten", axis=1)                                  # 400
    h = b.node("Relu", [b.gemm(h, "fc1", 400, 120)], "relu3")
    h = b.node("Relu", [b.gemm(h, "fc2", 120, 84)], "relu4")
    logits = b.gemm(h, "fc3", 84, 10, gain=1.0)
    b.node("Softmax", [logits], "softmax", axis=-1)
    return b.model("lenet", [1, 1, 28, 28], [1, 10])


def _lenet_bn(b: _Builder) -> onnx.ModelProto:
    h = b.batch_norm(b.conv("x", "conv1", 1, 8, 3, pad=1, bias=False), "bn1", 8)  # 8x28x28
    h = b.node("Tanh", [h], "tanh1")
    h = b.node("AveragePool", [h], "pool1", kernel_shape=[2, 2], strides=[2, 2])   # 8x14x14
    h = b.batch_norm(b.conv(h, "conv2", 8, 16, 3, pad=0, bias=False), "bn2", 16)  # 16x12x12
    h = b.node("Sigmoid", [h], "sigmoid2")
    # padded, ceil-mode pooling that excludes the padding from the average
    h = b.node("AveragePool", [h], "pool2", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
               ceil_mode=1, count_include_pad=0)                                    # 16x7x7
    h = b.node("Flatten", [h], "flatten", axis=1)                                  # 784
    h = b.node("Relu", [b.gemm(h, "fc1", 16 * 7 * 7, 64)], "relu3")
    b.gemm(h, "fc2", 64, 10, gain=1.0)
    return b.model("lenet_bn", [1, 1, 28, 28], [1, 10])


SAMPLES: dict[str, tuple[Callable[[_Builder], onnx.ModelProto], tuple[int, ...]]] = {
    "mlp": (_mlp, (1, 784)),
    "lenet": (_lenet, (1, 1, 28, 28)),
    "lenet_bn": (_lenet_bn, (1, 1, 28, 28)),
}


def make_sample(name: str) -> onnx.ModelProto:
    """The sample model `name` (one of SAMPLES), with weights from default_rng(0)."""
    if name not in SAMPLES:
        raise KeyError(f"unknown sample model '{name}'; choose from {', '.join(SAMPLES)}")
    build, _ = SAMPLES[name]
    return build(_Builder(np.random.default_rng(0)))


def make_input(name: str) -> np.ndarray:
    """A seeded input for sample `name`, from default_rng(1)."""
    _, shape = SAMPLES[name]
    return np.random.default_rng(1).standard_normal(shape).astype(np.float32)


def write_samples(out_dir: str | os.PathLike) -> dict[str, Path]:
    """Write <name>.onnx and <name>.input.npy for every sample; returns the model paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in SAMPLES:
        path = out / f"{name}.onnx"
        path.write_bytes(make_sample(name).SerializeToString(deterministic=True))
        with open(out / f"{name}.input.npy", "wb") as f:
            np.save(f, make_input(name))
        paths[name] = path
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"), help="output folder (default: models/out)")
    args = parser.parse_args()
    for name, path in write_samples(args.out).items():
        print(f"{name}: {path} ({path.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
