"""onnxruntime as it runs on an AVX2 machine, for benchmarks on an AVX-512 host.

`--cpu x86-64-v3` builds let aot's AVX2 code be timed on an AVX-512 machine,
but onnxruntime picks its kernels from the CPU it runs on, so a ratio against
it compares aot's AVX2 code with onnxruntime's AVX-512 code. onnxruntime has no
switch for this. Its kernel choice (MLAS's platform setup and its CPUIDInfo)
takes AVX-512 only when XGETBV says the OS saves the ZMM state, so a copy of
the package whose XGETBV instructions report XCR0 = 7 (x87, SSE and AVX state
only, as on an AVX2 machine) takes the AVX2/FMA kernels an AVX2 server runs.

    use_avx2_onnxruntime()   # before anything imports onnxruntime
"""
from __future__ import annotations

import hashlib
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

CACHE = Path.home() / ".cache" / "aot" / "onnxruntime-avx2"
XGETBV = b"\x0f\x01\xd0"
# push 7; pop rax: the same three bytes, EAX = 7 (EDX, the high half, is left as it was
# and is reserved as zero on every CPU those checks look at)
XCR0_AVX_ONLY = b"\x6a\x07\x58"


def _xgetbv_offsets(library: Path) -> list[int]:
    """File offsets of the XGETBV instructions objdump finds in the library's code."""
    try:
        listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(library)],
                                 capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        raise SystemExit(f"peer_avx2: objdump (binutils) could not disassemble {library}: {error}") from error
    addresses = [int(m.group(1), 16) for m in re.finditer(r"^\s*([0-9a-f]+):\s+xgetbv\b", listing, re.M)]
    text = subprocess.run(["readelf", "-lW", str(library)], capture_output=True, text=True, check=True).stdout
    offsets = []
    for address in addresses:
        for line in text.splitlines():  # LOAD  offset vaddr paddr filesz memsz flags
            fields = line.split()
            if fields[:1] == ["LOAD"] and "E" in fields[6:-1]:
                offset, vaddr, size = int(fields[1], 16), int(fields[2], 16), int(fields[4], 16)
                if vaddr <= address < vaddr + size:
                    offsets.append(address - vaddr + offset)
    if len(offsets) != len(addresses) or not offsets:
        raise SystemExit(f"peer_avx2: found {len(addresses)} XGETBV instructions in {library}, "
                         f"{len(offsets)} in its code segment; cannot mask AVX-512 there")
    return offsets


def avx2_onnxruntime_dir() -> Path:
    """A folder holding an `onnxruntime` package that takes its AVX2 kernels (made once, cached)."""
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or spec.origin is None:
        raise SystemExit("peer_avx2: onnxruntime is not installed")
    package = Path(spec.origin).parent
    libraries = sorted(package.glob("capi/onnxruntime_pybind11_state*.so"))
    if len(libraries) != 1:
        raise SystemExit(f"peer_avx2: expected one onnxruntime_pybind11_state library in {package / 'capi'}")
    key = hashlib.sha256(libraries[0].read_bytes()).hexdigest()[:16]
    root = CACHE / key
    if (root / "onnxruntime").is_dir():
        return root
    staging = CACHE / f"{key}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(package, staging / "onnxruntime")
    library = staging / "onnxruntime" / "capi" / libraries[0].name
    code = bytearray(library.read_bytes())
    for offset in _xgetbv_offsets(library):
        if code[offset:offset + 3] != XGETBV:
            raise SystemExit(f"peer_avx2: no XGETBV at file offset {offset:#x} of {library}")
        code[offset:offset + 3] = XCR0_AVX_ONLY
    library.write_bytes(bytes(code))
    staging.rename(root)  # whole or absent: a run cut short leaves only the .partial folder
    return root


def use_avx2_onnxruntime() -> None:
    """Make `import onnxruntime` load the AVX2 copy; call before onnxruntime is imported."""
    if "onnxruntime" in sys.modules:
        raise RuntimeError("peer_avx2: onnxruntime is already imported; call use_avx2_onnxruntime first")
    root = avx2_onnxruntime_dir()
    sys.path.insert(0, str(root))
    import onnxruntime

    if not Path(onnxruntime.__file__).is_relative_to(root):
        raise RuntimeError(f"peer_avx2: imported {onnxruntime.__file__}, not the copy in {root}")
