"""Seed corpus, trusted code images and dictionary for the runtime fuzzer
(runtime_c/tests/fuzz_open.c), from small artifacts compiled by aot.

    python benchmarks/fuzz_seeds.py OUT_DIR [--cpu native]

writes OUT_DIR/seeds/ (one file per artifact variant and target: the artifact
bytes followed by the harness's selector byte), OUT_DIR/code/ (each seed's
decoded code section: the only images the harness lets the runtime dlopen) and
OUT_DIR/aot.dict (libFuzzer dictionary: the manifest's keys and names).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from seed_artifacts import Seed, compile_seeds, repack  # noqa: E402

# the harness's last-byte selector (fuzz_open.c)
JSON, OPEN, RUN_1, RUN_3 = 0, 1, 2, 3

# Stored forms of each seed: as compiled (manifest zstd), and with the manifest
# stored plainly so that byte mutations reach the JSON text.
VARIANTS = {
    "zstd": {},
    "plain": {"manifest": "none", "weights": "none"},
    "plainmanifest": {"manifest": "none"},
}


def _tokens(value, out: set[str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(json.dumps(k))
            _tokens(v, out)
    elif isinstance(value, list):
        for v in value:
            _tokens(v, out)
    elif isinstance(value, str) and len(value) <= 32:
        out.add(json.dumps(value))


def dictionary(seeds: list[Seed]) -> list[str]:
    tokens: set[str] = {'"AOTMODEL"', '"null"', '"[]"', '"{}"', '"-1"', '"0"', '"18446744073709551615"',
                        '"9223372036854775807"', '"\\x28\\xb5\\x2f\\xfd"', '"\\x7fELF"'}
    words: set[str] = set()
    for seed in seeds:
        _tokens(seed.artifact.manifest, words)
    for w in sorted(words):
        if all(32 <= ord(c) < 127 for c in w):
            tokens.add(json.dumps(w))  # a dictionary entry is a C-style quoted string
    return sorted(tokens)


def write_corpus(out_dir: Path, cpu: str = "native", seeds: list[Seed] | None = None) -> dict[str, Path]:
    """Write seeds/, code/ and aot.dict under out_dir; return their paths."""
    seeds = seeds if seeds is not None else compile_seeds(out_dir / "artifacts", cpu)
    seeds_dir, code_dir = out_dir / "seeds", out_dir / "code"
    seeds_dir.mkdir(parents=True, exist_ok=True)
    code_dir.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        if seed.has_cpu_code:
            (code_dir / f"{seed.name}.so").write_bytes(seed.artifact.sections[seed.code_section])
        (seeds_dir / f"{seed.name}.manifest.json").write_bytes(seed.artifact.sections["manifest"] + bytes([JSON]))
        for variant, codecs in VARIANTS.items():
            data = seed.data if not codecs else repack(seed, codecs)
            for sel in (OPEN, RUN_1, RUN_3):
                (seeds_dir / f"{seed.name}.{variant}.{sel}").write_bytes(data + bytes([sel]))
    dict_path = out_dir / "aot.dict"
    dict_path.write_text("\n".join(dictionary(seeds)) + "\n")
    return {"seeds": seeds_dir, "code": code_dir, "dict": dict_path}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--cpu", default="native", help="target CPU of the seed artifacts (default: this machine)")
    args = ap.parse_args()
    for what, path in write_corpus(args.out_dir, args.cpu).items():
        print(f"{what}: {path}")


if __name__ == "__main__":
    main()
