"""Seeded benchmark models: torch.nn modules exported with torch.onnx, plus one input each.

    python models/make_benchmarks.py OUT_DIR [names...]

Writes OUT_DIR/NAME.onnx and OUT_DIR/NAME.input.npy for each model (all by
default). BatchNormalization stays in the graph unless
--exporter-folds-batch-norm. torch is a tool for making models, not a dependency of aot:
install it with `pip install torch==2.13.0` (the CPU build), or the
`bench` extra.

Models: mlp, mlp_b64, lenet, resnet18, mobilenetv2 (torchvision-free
re-implementations with random weights), bert_mini (4 encoder layers,
hidden 256, 4 heads, FFN 1024, input [1, 128, 256]), gpt_block (2 GPT-2
style causal blocks, hidden 512, 8 heads, input [1, 64, 512]).
"""
from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

SEED = 0
OPSET = 17


def _torch():
    try:
        import torch
    except ModuleNotFoundError:
        raise SystemExit("make_benchmarks needs torch: pip install torch==2.13.0") from None
    return torch


def build_models() -> dict[str, Callable[[], tuple[object, tuple[int, ...]]]]:
    """name -> factory returning (module in eval mode, input shape); weights depend only on SEED."""
    torch = _torch()
    nn = torch.nn

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))

        def forward(self, x):
            return self.net(x)

    class LeNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
            )
            self.head = nn.Sequential(nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))

        def forward(self, x):
            return self.head(self.features(x))

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class ResNet18(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
            layers, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
                cin = cout
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(512, 1000)

        def forward(self, x):
            y = self.layers(self.stem(x))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
            super().__init__()
            hidden = cin * expand
            layers = []
            if expand != 1:
                layers += [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()]
            layers += [
                nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
                nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout),
            ]
            self.body = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            y = self.body(x)
            return x + y if self.residual else y

    class MobileNetV2(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            layers = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6()]
            cin = 32
            for expand, cout, repeats, stride in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                                                  (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
                for i in range(repeats):
                    layers.append(InvertedResidual(cin, cout, stride if i == 0 else 1, expand))
                    cin = cout
            layers += [nn.Conv2d(cin, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6()]
            self.features = nn.Sequential(*layers)
            self.classifier = nn.Linear(1280, 1000)

        def forward(self, x):
            y = self.features(x).mean((2, 3))
            return self.classifier(y)

    class EncoderLayer(nn.Module):
        """BERT post-norm encoder layer with explicit attention (MatMul/Transpose/Reshape/Softmax)."""

        def __init__(self, hidden: int, heads: int, ffn: int) -> None:
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.out = nn.Linear(hidden, hidden)
            self.norm1 = nn.LayerNorm(hidden)
            self.ff = nn.Sequential(nn.Linear(hidden, ffn), nn.GELU(), nn.Linear(ffn, hidden))
            self.norm2 = nn.LayerNorm(hidden)

        def attend(self, x, causal: bool):
            b, s, h = x.shape
            d = h // self.heads
            q, k, v = self.qkv(x).split(h, dim=-1)
            q, k, v = (t.reshape(b, s, self.heads, d).transpose(1, 2) for t in (q, k, v))
            scores = q @ k.transpose(-1, -2) / (d ** 0.5)
            if causal:
                mask = torch.ones(s, s, dtype=torch.bool).tril()
                scores = scores.masked_fill(~mask, float("-inf"))
            y = torch.softmax(scores, dim=-1) @ v
            return self.out(y.transpose(1, 2).reshape(b, s, h))

        def forward(self, x):
            x = self.norm1(x + self.attend(x, causal=False))
            return self.norm2(x + self.ff(x))

    class GPTBlock(EncoderLayer):
        """GPT-2 pre-norm causal block (GELU tanh approximation)."""

        def __init__(self, hidden: int, heads: int) -> None:
            super().__init__(hidden, heads, 4 * hidden)
            self.ff = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(approximate="tanh"), nn.Linear(4 * hidden, hidden))

        def forward(self, x):
            x = x + self.attend(self.norm1(x), causal=True)
            return x + self.ff(self.norm2(x))

    def stack(*layers):
        return nn.Sequential(*layers)

    return {
        "mlp": lambda: (MLP(), (1, 784)),
        "mlp_b64": lambda: (MLP(), (64, 784)),
        "lenet": lambda: (LeNet(), (1, 1, 28, 28)),
        "resnet18": lambda: (ResNet18(), (1, 3, 224, 224)),
        "mobilenetv2": lambda: (MobileNetV2(), (1, 3, 224, 224)),
        "bert_mini": lambda: (stack(*(EncoderLayer(256, 4, 1024) for _ in range(4))), (1, 128, 256)),
        "gpt_block": lambda: (stack(*(GPTBlock(512, 8) for _ in range(2))), (1, 64, 512)),
    }


MODELS = ("mlp", "mlp_b64", "lenet", "resnet18", "mobilenetv2", "bert_mini", "gpt_block")


def _randomize_batch_norm(module) -> None:
    """Non-trivial running statistics, so BatchNorm folding is exercised (fresh ones are 0 and 1)."""
    torch = _torch()
    generator = torch.Generator().manual_seed(SEED + 1)
    for m in module.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
            m.bias.data.copy_(torch.randn(n, generator=generator) * 0.1)


def make(name: str, out_dir: Path, *, dynamo: bool = False, exporter_folds_batch_norm: bool = False) -> Path:
    """Write OUT_DIR/name.onnx and OUT_DIR/name.input.npy; returns the model path.

    The graph keeps each BatchNormalization node, as the module is written
    (and as model-zoo files such as ResNet's are): folding them into the convs
    is the compiler's job (rewrite/fold_scale.py). exporter_folds_batch_norm=True
    lets the TorchScript exporter fold them instead (its eval-mode default).
    dynamo=True uses torch's newer exporter (torch.export + onnxscript; opset
    20 graphs with LayerNormalization, Split, ...) instead of the TorchScript one.
    """
    torch = _torch()
    factories = build_models()
    if name not in factories:
        raise SystemExit(f"unknown model '{name}'; choose from {', '.join(MODELS)}")
    torch.manual_seed(SEED)
    module, shape = factories[name]()
    _randomize_batch_norm(module)
    module.eval()
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal(shape).astype(np.float32)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.onnx"
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter announces its deprecation
        if dynamo:
            torch.onnx.export(module, (torch.from_numpy(x),), str(path), input_names=["x"], output_names=["y"],
                              dynamo=True, verbose=False)
        else:
            # the TorchScript exporter needs no onnxscript and writes plain opset-17 graphs;
            # in EVAL mode it folds BatchNormalization into the convs, PRESERVE keeps the
            # nodes (in inference form: the module is in eval mode)
            mode = torch.onnx.TrainingMode.EVAL if exporter_folds_batch_norm else torch.onnx.TrainingMode.PRESERVE
            torch.onnx.export(module, (torch.from_numpy(x),), str(path), input_names=["x"], output_names=["y"],
                              opset_version=OPSET, dynamo=False, training=mode)
    np.save(out_dir / f"{name}.input.npy", x)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("names", nargs="*", default=list(MODELS))
    parser.add_argument("--exporter-folds-batch-norm", action="store_true",
                        help="let torch's exporter fold BatchNormalization into the convs (default: keep the nodes)")
    args = parser.parse_args(argv)
    for name in args.names:
        print(make(name, args.out_dir, exporter_folds_batch_norm=args.exporter_folds_batch_norm))
    return 0


if __name__ == "__main__":
    sys.exit(main())
