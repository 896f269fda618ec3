"""A model zoo of Hugging Face `transformers` architectures: small configs, seeded weights, ONNX.

    python models/make_zoo.py OUT_DIR [names...]
    python models/make_zoo.py --list

Writes OUT_DIR/NAME.onnx and OUT_DIR/NAME.inputs.npz (the model's named inputs)
for each model (all by default). Every model is built `from_config` (nothing is
ever downloaded: no from_pretrained, no tokenizer files) with torch seeded, then
the parameters HF initialises to one constant (norm scales of 1, biases of 0,
ConvNeXt's layer scale of 1e-6) and BatchNorm running statistics are replaced by
seeded random values, so a parameter the compiler drops changes the outputs.
Exported with torch's default exporter (torch.export + onnxscript, "dynamo"),
opset 20, static shapes, batch 1, weights inside the .onnx file. Attention is
transformers' default implementation (sdpa). Token embeddings keep the vocab
sizes of the architectures' released configs: the embedding gather over a
30k-150k row table is part of what these models measure. Text is 32 tokens;
token ids are drawn from the vocab (no padding), masks are all ones.

transformers is a tool for making models, not a dependency of aot: it comes with
the `bench` extra (scripts/install_torch_cpu.sh installs it beside torch).

Models (hidden size, layers, heads; vocab):
  bert           BertModel, 128, 2, 4, FFN 512; vocab 30522; input_ids, attention_mask,
                 token_type_ids (a sentence pair, 16 + 16) -> last_hidden_state, pooler_output
  distilbert     DistilBertModel, 128, 2, 4, FFN 512; vocab 30522 -> last_hidden_state
  roberta        RobertaModel, 128, 2, 4, FFN 512; vocab 50265 (position ids from the
                 non-pad tokens) -> last_hidden_state, pooler_output
  electra        ElectraModel (electra-small shape: embedding 128 projected to 256), 256, 2, 4,
                 FFN 1024; vocab 30522; input_ids, attention_mask, token_type_ids -> last_hidden_state
  gpt2           GPT2LMHeadModel without cache, 128, 2, 4; vocab 50257 -> logits
  gpt2_decode    the same GPT-2, one decode step: 1 new token, attention_mask [1, 32] and a
                 31-token cache per layer (past_key_i/past_value_i [1, 4, 31, 32], the keys
                 and values GPT-2 computed for a 31-token prompt) -> logits, present_key_i,
                 present_value_i [1, 4, 32, 32]
  t5_encoder     T5EncoderModel, d_model 128, d_kv 32, FFN 512 (ReLU), 2, 4, relative
                 position buckets 32; vocab 32128 -> last_hidden_state
  llama          LlamaForCausalLM, 128, 2, 4 (2 key/value heads: GQA), SwiGLU 352, RoPE;
                 vocab 32000 -> logits
  qwen2          Qwen2ForCausalLM, 128, 2, 4 (2 key/value heads), SwiGLU 384, q/k/v biases,
                 tied embeddings; vocab 151936 -> logits
  mistral        MistralForCausalLM, 128, 2, 4 (2 key/value heads), SwiGLU 352, sliding
                 window 4096; vocab 32000 -> logits
  vit            ViTForImageClassification (vit-tiny shape), 224x224, patch 16, 192, 4, 3,
                 FFN 768; 1000 classes -> logits
  convnext       ConvNextForImageClassification, 224x224, widths 48/96/192/384, depths
                 1/1/2/1; 1000 classes -> logits
  resnet         ResNetForImageClassification (bottleneck blocks, ResNet-50 style), 224x224,
                 stem 32, widths 128/256/512/1024, depths 1/1/1/1; 1000 classes -> logits
  mobilevit      MobileViTForImageClassification (mobilevit-xx-small config), 256x256;
                 1000 classes -> logits
  clip_text      CLIPTextModel, 128, 2, 4, FFN 512, quick GELU; vocab 49408, the last token
                 end-of-text (the pooled output gathers it) -> last_hidden_state, pooler_output
  clip_vision    CLIPVisionModel (ViT-B/32 patching), 224x224, patch 32, 128, 2, 4, FFN 512
                 -> last_hidden_state, pooler_output
  whisper_encoder  WhisperEncoder, d_model 128, 2, 4, FFN 512; 80 log-mel bins x 3000 frames
                 (the 30 s window; features from transformers' WhisperFeatureExtractor on a
                 synthetic 3 s tone) -> last_hidden_state [1, 1500, 128]
  wav2vec2       Wav2Vec2Model, conv feature extractor of 7 layers (kernels 10,3,3,3,3,2,2,
                 strides 5,2,2,2,2,2,2, 128 channels, GroupNorm), 128, 2, 4, FFN 512, conv
                 position embedding (kernel 128, 16 groups, weight norm); 16,000 samples (1 s)
                 -> last_hidden_state [1, 49, 128]
  hubert         HubertModel, the wav2vec2 shape above -> last_hidden_state
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SEED = 0
OPSET = 20
TEXT_LEN = 32
# ids below this are special tokens (pad, bos, eos, unk) in every tokenizer here
FIRST_PLAIN_TOKEN = 5
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CLIP_MEAN, CLIP_STD = (0.4815, 0.4578, 0.4082), (0.2686, 0.2613, 0.2758)
SAMPLE_RATE = 16_000


def _modules() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ModuleNotFoundError as err:
        raise SystemExit(f"make_zoo needs torch and transformers ({err.name} is missing): "
                         "pip install -e '.[bench]' or scripts/install_torch_cpu.sh") from None
    return torch, transformers


@dataclass(frozen=True)
class ZooModel:
    """One zoo entry: how to build it, what to feed it and what it returns.

    build(transformers) -> the HF model; inputs(rng, model) -> named numpy inputs, in
    the exported input order; run(model, **inputs as tensors) -> the output tensors,
    named by `outputs`.
    """

    name: str
    summary: str
    build: Callable[[Any], Any]
    inputs: Callable[[np.random.Generator, Any], dict[str, np.ndarray]]
    run: Callable[..., tuple[Any, ...]]
    outputs: tuple[str, ...]


# == inputs ==============================================================================
def _token_ids(rng: np.random.Generator, vocab: int, length: int = TEXT_LEN) -> np.ndarray:
    return rng.integers(FIRST_PLAIN_TOKEN, vocab, (1, length)).astype(np.int64)


def _text(vocab: int, *, token_types: bool = False) -> Callable[[np.random.Generator, Any], dict[str, np.ndarray]]:
    def make(rng: np.random.Generator, model: Any) -> dict[str, np.ndarray]:
        feeds = {"input_ids": _token_ids(rng, vocab), "attention_mask": np.ones((1, TEXT_LEN), np.int64)}
        if token_types:  # a sentence pair: segment A then segment B
            feeds["token_type_ids"] = (np.arange(TEXT_LEN) >= TEXT_LEN // 2).astype(np.int64)[None]
        return feeds
    return make


def _clip_text_inputs(rng: np.random.Generator, model: Any) -> dict[str, np.ndarray]:
    ids = _token_ids(rng, model.config.eos_token_id)
    ids[0, -1] = model.config.eos_token_id  # CLIP pools the hidden state at the end-of-text token
    return {"input_ids": ids, "attention_mask": np.ones_like(ids)}


def _image(size: int, mean: tuple[float, ...] = IMAGENET_MEAN,
           std: tuple[float, ...] = IMAGENET_STD) -> Callable[[np.random.Generator, Any], dict[str, np.ndarray]]:
    """An RGB image in [0, 1] normalized as the model's image processor does."""
    def make(rng: np.random.Generator, model: Any) -> dict[str, np.ndarray]:
        rgb = rng.random((1, 3, size, size))
        pixels = (rgb - np.reshape(mean, (1, 3, 1, 1))) / np.reshape(std, (1, 3, 1, 1))
        return {"pixel_values": pixels.astype(np.float32)}
    return make


def _audio(rng: np.random.Generator, seconds: float) -> np.ndarray:
    """A few tones with noise at speech-like levels."""
    t = np.arange(int(SAMPLE_RATE * seconds)) / SAMPLE_RATE
    tones = sum(0.1 / (k + 1) * np.sin(2 * np.pi * f * t) for k, f in enumerate(rng.uniform(100, 3000, 4)))
    return (tones + 0.01 * rng.standard_normal(t.shape)).astype(np.float32)


def _waveform_inputs(rng: np.random.Generator, model: Any) -> dict[str, np.ndarray]:
    wave = _audio(rng, 1.0)
    wave = (wave - wave.mean()) / np.sqrt(wave.var() + 1e-7)  # as Wav2Vec2FeatureExtractor(do_normalize=True)
    return {"input_values": wave[None]}


def _whisper_inputs(rng: np.random.Generator, model: Any) -> dict[str, np.ndarray]:
    _, transformers = _modules()
    extractor = transformers.WhisperFeatureExtractor(feature_size=model.config.num_mel_bins)
    features = extractor(_audio(rng, 3.0), sampling_rate=SAMPLE_RATE, return_tensors="np").input_features
    return {"input_features": features.astype(np.float32)}


def _gpt2_decode_inputs(rng: np.random.Generator, model: Any) -> dict[str, np.ndarray]:
    """One new token after a 31-token prompt whose keys and values GPT-2 computed itself."""
    torch, _ = _modules()
    vocab = model.config.vocab_size
    prompt = torch.from_numpy(_token_ids(rng, vocab, TEXT_LEN - 1))
    with torch.no_grad():
        cache = model(input_ids=prompt, use_cache=True).cache
    feeds = {"input_ids": _token_ids(rng, vocab, 1), "attention_mask": np.ones((1, TEXT_LEN), np.int64)}
    for i, layer in enumerate(cache.layers):
        feeds[f"past_key_{i}"] = layer.keys.numpy().copy()
        feeds[f"past_value_{i}"] = layer.values.numpy().copy()
    return feeds


# == forward functions ===================================================================
def _hidden(model: Any, **inputs: Any) -> tuple[Any, ...]:
    return (model(**inputs).last_hidden_state,)


def _hidden_pooled(model: Any, **inputs: Any) -> tuple[Any, ...]:
    out = model(**inputs)
    return out.last_hidden_state, out.pooler_output


def _logits(model: Any, **inputs: Any) -> tuple[Any, ...]:
    return (model(**inputs).logits,)


def _causal_logits(model: Any, **inputs: Any) -> tuple[Any, ...]:
    return (model(**inputs, use_cache=False).logits,)


def _decode_step(model: Any, input_ids: Any, attention_mask: Any, **past: Any) -> tuple[Any, ...]:
    _, transformers = _modules()
    layers = model.config.n_layer
    cache = transformers.DynamicCache(
        ddp_cache_data=[(past[f"past_key_{i}"], past[f"past_value_{i}"]) for i in range(layers)], config=model.config)
    out = model(input_ids=input_ids, attention_mask=attention_mask, cache=cache, use_cache=True)
    present = [t for layer in out.cache.layers for t in (layer.keys, layer.values)]
    return (out.logits, *present)


# == the zoo =============================================================================
def _bert(t: Any) -> Any:
    return t.BertModel(t.BertConfig(vocab_size=30522, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                    intermediate_size=512))


def _distilbert(t: Any) -> Any:
    return t.DistilBertModel(t.DistilBertConfig(vocab_size=30522, dim=128, n_layers=2, n_heads=4, hidden_dim=512))


def _roberta(t: Any) -> Any:
    return t.RobertaModel(t.RobertaConfig(vocab_size=50265, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                          intermediate_size=512, max_position_embeddings=514, type_vocab_size=1,
                                          pad_token_id=1, bos_token_id=0, eos_token_id=2))


def _electra(t: Any) -> Any:
    return t.ElectraModel(t.ElectraConfig(vocab_size=30522, embedding_size=128, hidden_size=256, num_hidden_layers=2,
                                          num_attention_heads=4, intermediate_size=1024))


def _gpt2_config(t: Any) -> Any:
    return t.GPT2Config(vocab_size=50257, n_positions=1024, n_embd=128, n_layer=2, n_head=4)


def _gpt2(t: Any) -> Any:
    return t.GPT2LMHeadModel(_gpt2_config(t))


def _t5_encoder(t: Any) -> Any:
    return t.T5EncoderModel(t.T5Config(vocab_size=32128, d_model=128, d_kv=32, d_ff=512, num_layers=2, num_heads=4,
                                       relative_attention_num_buckets=32, feed_forward_proj="relu"))


def _llama(t: Any) -> Any:
    return t.LlamaForCausalLM(t.LlamaConfig(vocab_size=32000, hidden_size=128, intermediate_size=352,
                                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                            max_position_embeddings=2048))


def _qwen2(t: Any) -> Any:
    return t.Qwen2ForCausalLM(t.Qwen2Config(vocab_size=151936, hidden_size=128, intermediate_size=384,
                                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                            max_position_embeddings=32768, rope_theta=1e6, tie_word_embeddings=True))


def _mistral(t: Any) -> Any:
    return t.MistralForCausalLM(t.MistralConfig(vocab_size=32000, hidden_size=128, intermediate_size=352,
                                                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                max_position_embeddings=32768, sliding_window=4096))


def _vit(t: Any) -> Any:
    return t.ViTForImageClassification(t.ViTConfig(image_size=224, patch_size=16, hidden_size=192, num_hidden_layers=4,
                                                   num_attention_heads=3, intermediate_size=768, num_labels=1000))


def _convnext(t: Any) -> Any:
    return t.ConvNextForImageClassification(t.ConvNextConfig(hidden_sizes=[48, 96, 192, 384], depths=[1, 1, 2, 1],
                                                             num_labels=1000))


def _resnet(t: Any) -> Any:
    return t.ResNetForImageClassification(t.ResNetConfig(embedding_size=32, hidden_sizes=[128, 256, 512, 1024],
                                                         depths=[1, 1, 1, 1], layer_type="bottleneck", num_labels=1000))


def _mobilevit(t: Any) -> Any:
    # apple/mobilevit-xx-small
    return t.MobileViTForImageClassification(t.MobileViTConfig(
        image_size=256, hidden_sizes=[64, 80, 96], neck_hidden_sizes=[16, 16, 24, 48, 64, 80, 320], expand_ratio=2.0,
        num_labels=1000))


def _clip_text(t: Any) -> Any:
    return t.CLIPTextModel(t.CLIPTextConfig(vocab_size=49408, hidden_size=128, intermediate_size=512,
                                            num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=77))


def _clip_vision(t: Any) -> Any:
    return t.CLIPVisionModel(t.CLIPVisionConfig(image_size=224, patch_size=32, hidden_size=128, intermediate_size=512,
                                                num_hidden_layers=2, num_attention_heads=4))


def _whisper_encoder(t: Any) -> Any:
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    return WhisperEncoder(t.WhisperConfig(d_model=128, encoder_layers=2, encoder_attention_heads=4,
                                          encoder_ffn_dim=512, num_mel_bins=80, max_source_positions=1500))


def _speech_config(config_class: Any) -> Any:
    return config_class(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
                        conv_dim=(128,) * 7, conv_kernel=(10, 3, 3, 3, 3, 2, 2), conv_stride=(5, 2, 2, 2, 2, 2, 2),
                        num_conv_pos_embeddings=128, num_conv_pos_embedding_groups=16, feat_extract_norm="group")


def _wav2vec2(t: Any) -> Any:
    return t.Wav2Vec2Model(_speech_config(t.Wav2Vec2Config))


def _hubert(t: Any) -> Any:
    return t.HubertModel(_speech_config(t.HubertConfig))


_HIDDEN = ("last_hidden_state",)
_POOLED = ("last_hidden_state", "pooler_output")
_LOGITS = ("logits",)
_GPT2_LAYERS = 2

ZOO: dict[str, ZooModel] = {m.name: m for m in (
    ZooModel("bert", "BertModel, hidden 128, 2 layers, vocab 30522, text 32", _bert,
             _text(30522, token_types=True), _hidden_pooled, _POOLED),
    ZooModel("distilbert", "DistilBertModel, hidden 128, 2 layers, vocab 30522, text 32", _distilbert,
             _text(30522), _hidden, _HIDDEN),
    ZooModel("roberta", "RobertaModel, hidden 128, 2 layers, vocab 50265, text 32", _roberta,
             _text(50265), _hidden_pooled, _POOLED),
    ZooModel("electra", "ElectraModel, embedding 128 -> hidden 256, 2 layers, vocab 30522, text 32", _electra,
             _text(30522, token_types=True), _hidden, _HIDDEN),
    ZooModel("gpt2", "GPT2LMHeadModel, hidden 128, 2 layers, vocab 50257, text 32, no cache", _gpt2,
             _text(50257), _causal_logits, _LOGITS),
    ZooModel("gpt2_decode", "GPT2LMHeadModel decode step: 1 token after a 31-token cache", _gpt2,
             _gpt2_decode_inputs, _decode_step,
             ("logits", *(f"present_{kv}_{i}" for i in range(_GPT2_LAYERS) for kv in ("key", "value")))),
    ZooModel("t5_encoder", "T5EncoderModel, d_model 128, 2 layers, vocab 32128, text 32", _t5_encoder,
             _text(32128), _hidden, _HIDDEN),
    ZooModel("llama", "LlamaForCausalLM, hidden 128, 2 layers, GQA 4/2, vocab 32000, text 32", _llama,
             _text(32000), _causal_logits, _LOGITS),
    ZooModel("qwen2", "Qwen2ForCausalLM, hidden 128, 2 layers, GQA 4/2, vocab 151936 (tied), text 32", _qwen2,
             _text(151936), _causal_logits, _LOGITS),
    ZooModel("mistral", "MistralForCausalLM, hidden 128, 2 layers, GQA 4/2, vocab 32000, text 32", _mistral,
             _text(32000), _causal_logits, _LOGITS),
    ZooModel("vit", "ViTForImageClassification, 224x224 patch 16, hidden 192, 4 layers", _vit,
             _image(224, (0.5,) * 3, (0.5,) * 3), _logits, _LOGITS),
    ZooModel("convnext", "ConvNextForImageClassification, 224x224, widths 48-384, depths 1/1/2/1", _convnext,
             _image(224), _logits, _LOGITS),
    ZooModel("resnet", "ResNetForImageClassification, 224x224, bottleneck, widths 128-1024, depths 1/1/1/1",
             _resnet, _image(224), _logits, _LOGITS),
    ZooModel("mobilevit", "MobileViTForImageClassification (xx-small), 256x256", _mobilevit,
             _image(256, (0.0,) * 3, (1.0,) * 3), _logits, _LOGITS),
    ZooModel("clip_text", "CLIPTextModel, hidden 128, 2 layers, vocab 49408, text 32", _clip_text,
             _clip_text_inputs, _hidden_pooled, _POOLED),
    ZooModel("clip_vision", "CLIPVisionModel, 224x224 patch 32, hidden 128, 2 layers", _clip_vision,
             _image(224, CLIP_MEAN, CLIP_STD), _hidden_pooled, _POOLED),
    ZooModel("whisper_encoder", "WhisperEncoder, d_model 128, 2 layers, 80 mels x 3000 frames", _whisper_encoder,
             _whisper_inputs, _hidden, _HIDDEN),
    ZooModel("wav2vec2", "Wav2Vec2Model, 7 conv layers of 128, hidden 128, 2 layers, 16000 samples", _wav2vec2,
             _waveform_inputs, _hidden, _HIDDEN),
    ZooModel("hubert", "HubertModel, 7 conv layers of 128, hidden 128, 2 layers, 16000 samples", _hubert,
             _waveform_inputs, _hidden, _HIDDEN),
)}
MODELS = tuple(ZOO)


# == weights =============================================================================
def _randomize_constants(model: Any, torch: Any) -> None:
    """Seeded random values for every parameter HF fills with one constant, and for
    BatchNorm running statistics (fresh ones are 0 and 1): a dropped bias or norm scale
    would otherwise leave the outputs unchanged."""
    generator = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for _, param in model.named_parameters():
            flat = param.detach().reshape(-1)
            if not bool((flat == flat[0]).all()):
                continue
            constant = float(flat[0])
            noise = torch.randn(param.shape, generator=generator, dtype=param.dtype)
            # scales near 1 stay near 1 (a norm scale); zeros and tiny layer scales get +-0.1
            param.copy_(constant * (1 + 0.1 * noise) if abs(constant) >= 0.5 else 0.1 * noise)
        for module in model.modules():
            if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and module.running_mean is not None:
                n = module.num_features
                module.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
                module.running_var.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)


def _exportable(model: Any, spec: ZooModel, names: list[str], torch: Any) -> Any:
    """`model` as a module whose forward takes the zoo's named inputs positionally (the exported order)."""

    class Exported(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: Any) -> tuple[Any, ...]:
            return spec.run(self.model, **dict(zip(names, tensors)))

    return Exported().eval()


def build(name: str) -> tuple[Any, dict[str, np.ndarray]]:
    """(the seeded HF model in eval mode, its named inputs)."""
    torch, transformers = _modules()
    if name not in ZOO:
        raise SystemExit(f"unknown zoo model '{name}'; choose from {', '.join(MODELS)}")
    spec = ZOO[name]
    torch.manual_seed(SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = spec.build(transformers)
    _randomize_constants(model, torch)
    model.eval()
    return model, spec.inputs(np.random.default_rng(SEED), model)


def make(name: str, out_dir: Path) -> Path:
    """Write OUT_DIR/name.onnx and OUT_DIR/name.inputs.npz; returns the model path."""
    torch, _ = _modules()
    model, feeds = build(name)
    spec = ZOO[name]
    names = list(feeds)
    wrapped = _exportable(model, spec, names, torch)
    args = tuple(torch.from_numpy(feeds[n]) for n in names)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.onnx"
    # the exporter logs a warning for each torchvision op it cannot register (torchvision is not needed)
    logging.getLogger("torch.onnx._internal.exporter._registration").setLevel(logging.ERROR)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # dynamo=True is torch 2.13's default exporter, named so a changed default cannot change the zoo
        torch.onnx.export(wrapped, args, str(path), input_names=names, output_names=list(spec.outputs),
                          opset_version=OPSET, dynamo=True, external_data=False, verbose=False)
    np.savez(out_dir / f"{name}.inputs.npz", **feeds)
    return path


def inputs_path(model: Path) -> Path:
    """Where make() wrote the inputs of `model` (OUT_DIR/NAME.onnx)."""
    return model.with_suffix(".inputs.npz")


def load_inputs(model: Path) -> dict[str, np.ndarray]:
    with np.load(inputs_path(model)) as data:
        return {name: data[name] for name in data.files}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path, nargs="?")
    parser.add_argument("names", nargs="*", default=list(MODELS))
    parser.add_argument("--list", action="store_true", help="print the zoo's models and exit")
    args = parser.parse_args(argv)
    if args.list:
        for spec in ZOO.values():
            print(f"{spec.name:<16} {spec.summary}")
        return 0
    if args.out_dir is None:
        parser.error("OUT_DIR is required (or --list)")
    for name in args.names:
        start = time.perf_counter()
        path = make(name, args.out_dir)
        print(f"{name:<16} {time.perf_counter() - start:6.1f} s  {path.stat().st_size:>11,} B  {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
