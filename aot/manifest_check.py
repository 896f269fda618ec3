"""The manifest fields the C runtime relies on, checked as runtime_c/src/model.c checks them.

`read_artifact` calls `check_manifest` right after the JSON parse, before any other
section is decoded, so a manifest edited after compilation (CRCs recomputed) is an
ArtifactError naming the field, here as in the runtime, and `aot inspect` and the other
readers use these fields without guarding each. The rules are packaging/FORMAT.md's
"What the runtime reads". What only the code can confirm (its `aot_code_info`: arena
and tensor sizes, kernel work and symbols) the runtime compares at open; this reader
loads no code.
"""
from __future__ import annotations

from typing import Any, Mapping

from aot.errors import ArtifactError
from aot.ir.types import DType

MAX_RANK = 32
MAX_ALIGN = 4096
MAX_CHECKS = 1 << 20
INT64_MAX = (1 << 63) - 1
# a kernel's work: the runtime's chunk arithmetic (index x items) must not overflow int64
MAX_WORK = INT64_MAX // 4
# CUDA's launch limits (every SM aot targets): grid x up to 2^31 - 1, y and z 65535; a block
# of at most 1024 threads (z at most 64); dynamic shared memory below 256 KiB on any GPU
MAX_GRID = ((1 << 31) - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
MAX_BLOCK_THREADS = 1024
MAX_SHARED_BYTES = 256 << 10
# a kernel's parameters: one address each (CUDA allows 4 KiB of parameters, 8 bytes an address)
MAX_KERNEL_ARGS = 512


def _fail(message: str) -> ArtifactError:
    return ArtifactError(f"section 'manifest': {message}")


def _object(parent: Mapping[str, Any], key: str, where: str) -> dict:
    value = parent.get(key)
    if not isinstance(value, dict):
        raise _fail(f"{where}\"{key}\" must be an object")
    return value


def _array(parent: Mapping[str, Any], key: str, where: str = "") -> list:
    value = parent.get(key)
    if not isinstance(value, list):
        raise _fail(f"{where}\"{key}\" must be an array")
    return value


def _string(obj: Mapping[str, Any], key: str, where: str, required: bool = True) -> str | None:
    if key not in obj:
        if required:
            raise _fail(f"{where}: missing \"{key}\"")
        return None
    value = obj[key]
    if not isinstance(value, str) or "\0" in value:
        raise _fail(f"{where}: \"{key}\" must be a string without NULs")
    return value


def _int(obj: Mapping[str, Any], key: str, where: str, lo: int, hi: int, default: int | None = None) -> int:
    if key not in obj:
        if default is None:
            raise _fail(f"{where}: missing \"{key}\"")
        return default
    value = obj[key]
    # bool is an int to Python, not to JSON
    if type(value) is not int or not lo <= value <= hi:
        raise _fail(f"{where}: \"{key}\" must be an integer in [{lo}, {hi}]")
    return value


def _alignment(obj: Mapping[str, Any], where: str) -> int:
    align = _int(obj, "alignment", where, 1, MAX_ALIGN, default=64)
    if align & (align - 1):
        raise _fail(f"{where}: alignment {align} is not a power of two")
    return align


def _tensors(manifest: Mapping[str, Any], key: str, required: bool) -> None:
    tensors = _array(manifest, key)
    if required and not tensors:
        raise _fail(f"\"{key}\" is empty (a model has at least one)")
    seen: set[str] = set()
    for i, t in enumerate(tensors):
        where = f"{key}[{i}]"
        if not isinstance(t, dict):
            raise _fail(f"{where}: must be an object")
        name = _string(t, "name", where)
        dtype = _string(t, "dtype", where)
        if not name:
            raise _fail(f"{where}: empty name")
        if name in seen:
            raise _fail(f"{where}: duplicate name {name!r}")
        seen.add(name)
        element = DType.from_manifest_name(dtype)
        if element is None:
            raise _fail(f"{where} ({name!r}): unknown dtype \"{dtype}\"")
        shape = t.get("shape")
        if not isinstance(shape, list) or len(shape) > MAX_RANK:
            raise _fail(f"{where} ({name!r}): \"shape\" must be an array of at most {MAX_RANK} ints")
        size = element.itemsize
        for k, dim in enumerate(shape):
            if type(dim) is not int or dim < 0:
                raise _fail(f"{where} ({name!r}): shape[{k}] must be a non-negative integer")
            size *= dim
            if size > INT64_MAX:
                raise _fail(f"{where} ({name!r}): byte size overflows")


def _weights(manifest: Mapping[str, Any], sections: Mapping[str, int]) -> None:
    weights = manifest.get("weights")
    if not isinstance(weights, dict):
        raise _fail("\"weights\" must be an object (a model without weights has \"bytes\": 0)")
    section = _string(weights, "section", "weights")
    size = _int(weights, "bytes", "weights", 0, INT64_MAX)
    _alignment(weights, "weights")
    if section not in sections:
        if size:
            raise ArtifactError(f"section {section!r}: missing (manifest weights)")
    elif sections[section] != size:
        raise ArtifactError(f"section {section!r}: raw size {sections[section]} != {size} bytes in the manifest")


MAX_X86_FEATURES = 256


def _cpu(manifest: Mapping[str, Any], sections: Mapping[str, int]) -> None:
    """The CPU code variants, best first: the runtime loads the first of its architecture whose
    x86_features the machine has (or the one AOT_CPU_VARIANT names by its "cpu")."""
    kernel_count = len(_array(manifest, "kernels"))
    for i, entry in enumerate(_array(manifest, "cpu")):
        where = f"cpu[{i}]"
        if not isinstance(entry, dict):
            raise _fail(f"{where}: must be an object")
        _string(entry, "arch", where)
        section = _string(entry, "section", where)
        if section not in sections:
            raise ArtifactError(f"section {section!r}: missing (manifest cpu)")
        for key in ("entry", "checks", "code_info", "cpu"):
            _string(entry, key, where, required=False)
        for key in ("x86_features", "aarch64_features"):
            features = entry.get(key)
            if features is not None and (not isinstance(features, list) or len(features) > MAX_X86_FEATURES
                                         or not all(isinstance(f, str) and f and "\0" not in f for f in features)):
                raise _fail(f"{where}: \"{key}\" must be an array of at most {MAX_X86_FEATURES} non-empty "
                            f"strings without NULs")
        kernels = entry.get("kernels")
        if kernels is None:
            continue
        if not isinstance(kernels, list) or len(kernels) != kernel_count:
            raise _fail(f"{where}: \"kernels\" must be an array with one entry per kernel ({kernel_count})")
        for j, kernel in enumerate(kernels):
            _code_fields(kernel, f"{where}.kernels[{j}]")


def _code_fields(kernel: Any, where: str) -> None:
    """A kernel's symbol, work and optional cost_ns in one CPU variant's code."""
    if not isinstance(kernel, dict):
        raise _fail(f"{where}: must be an object")
    _string(kernel, "symbol", where)
    _int(kernel, "work", where, 0, MAX_WORK)
    if "cost_ns" in kernel:
        _int(kernel, "cost_ns", where, 0, INT64_MAX)


def _kernels(manifest: Mapping[str, Any]) -> None:
    # symbol and work are the CPU code's: a GPU-only artifact's kernels may carry only a name,
    # and so may an artifact whose every variant lists its own (a runtime reads those)
    needs_code = any(entry.get("kernels") is None for entry in manifest["cpu"])
    for i, kernel in enumerate(_array(manifest, "kernels")):
        where = f"kernels[{i}]"
        if not isinstance(kernel, dict):
            raise _fail(f"{where}: must be an object")
        _string(kernel, "name", where, required=False)
        if needs_code:
            _code_fields(kernel, where)
            continue
        _string(kernel, "symbol", where, required=False)
        if "work" in kernel:
            _int(kernel, "work", where, 0, MAX_WORK)
        if "cost_ns" in kernel:
            _int(kernel, "cost_ns", where, 0, INT64_MAX)


def _dims(launch: Mapping[str, Any], key: str, where: str, limits: tuple[int, int, int]) -> int:
    """A launch's grid or block, [x, y, z] each in [1, limit]; its product."""
    dims = launch.get(key)
    if not isinstance(dims, list) or len(dims) != 3:
        raise _fail(f"{where}: \"{key}\" must be an array of 3 integers")
    product = 1
    for axis, (dim, limit) in enumerate(zip(dims, limits)):
        if type(dim) is not int or not 1 <= dim <= limit:
            raise _fail(f"{where}: {key}[{axis}] must be an integer in [1, {limit}]")
        product *= dim
    return product


def _launch_args(launch: Mapping[str, Any], where: str, manifest: Mapping[str, Any], arena_bytes: int,
                 status: bool) -> None:
    """A launch's `args`; with `status` (the checks launch) the last one, and only it, is
    {"kind": "status"}: the runtime's int32 status word."""
    args = _array(launch, "args", f"{where}: ")
    if not args or len(args) > MAX_KERNEL_ARGS:
        raise _fail(f"{where}: \"args\" must hold 1 to {MAX_KERNEL_ARGS} arguments")
    counts = {"input": len(manifest["inputs"]), "output": len(manifest["outputs"])}
    sizes = {"arena": arena_bytes, "weights": manifest["weights"]["bytes"]}
    for j, arg in enumerate(args):
        at = f"{where}: args[{j}]"
        if not isinstance(arg, dict):
            raise _fail(f"{at}: must be an object")
        kind = _string(arg, "kind", at)
        if status and (kind == "status") != (j == len(args) - 1):
            raise _fail(f"{at}: the checks launch takes one \"status\" argument, its last")
        if kind in counts:
            if counts[kind] == 0:
                raise _fail(f"{at}: the model has no {kind}s")
            _int(arg, "index", at, 0, counts[kind] - 1)
        elif kind in sizes:
            # an address inside the buffer (or its end, for an empty value)
            _int(arg, "offset", at, 0, sizes[kind])
        elif not (status and kind == "status"):
            raise _fail(f"{at}: \"kind\" must be one of arena, weights, input, output")


def _launch(launch: Any, at: str, manifest: Mapping[str, Any], arena_bytes: int, status: bool = False) -> None:
    """One launch of the plan: symbol, grid, block, dynamic shared memory and arguments."""
    if not isinstance(launch, dict):
        raise _fail(f"{at}: must be an object")
    _string(launch, "symbol", at)
    _dims(launch, "grid", at, MAX_GRID)
    if _dims(launch, "block", at, MAX_BLOCK) > MAX_BLOCK_THREADS:
        raise _fail(f"{at}: a block of more than {MAX_BLOCK_THREADS} threads")
    _int(launch, "shared_bytes", at, 0, MAX_SHARED_BYTES)
    _launch_args(launch, at, manifest, arena_bytes, status)


def _cuda(manifest: Mapping[str, Any], sections: Mapping[str, int]) -> None:
    """The GPU code and its launch plan (FORMAT.md "cuda"): optional; when present, every SM's
    code sections exist and its launch plan has one launch per manifest kernel, in order, and
    a checks launch exactly when the manifest has checks."""
    if "cuda" not in manifest:
        return
    cuda = _object(manifest, "cuda", "")
    arena = _object(cuda, "arena", "cuda.")
    arena_bytes = _int(arena, "bytes", "cuda.arena", 0, INT64_MAX)
    _alignment(arena, "cuda.arena")
    weights = _string(cuda, "weights", "cuda")
    if weights != manifest["weights"]["section"]:
        raise _fail(f"cuda: \"weights\" is {weights!r}, not the weights section {manifest['weights']['section']!r}")
    sms = _array(cuda, "sms", "cuda.")
    if not sms:
        raise _fail("cuda: \"sms\" is empty (GPU code has at least one architecture)")
    kernels = manifest["kernels"]
    checks = len(manifest.get("checks") or [])
    seen: set[str] = set()
    for i, entry in enumerate(sms):
        where = f"cuda.sms[{i}]"
        if not isinstance(entry, dict):
            raise _fail(f"{where}: must be an object")
        sm = _string(entry, "sm", where)
        if not sm or sm in seen:
            raise _fail(f"{where}: \"sm\" {sm!r} is empty or given twice")
        seen.add(sm)
        for key, required in (("ptx", True), ("cubin", False)):
            section = _string(entry, key, where, required)
            if section is not None and section not in sections:
                raise ArtifactError(f"section {section!r}: missing (manifest {where}.{key})")
        launches = _array(entry, "kernels", f"{where}.")
        if len(launches) != len(kernels):
            raise _fail(f"{where}: {len(launches)} kernels, the manifest has {len(kernels)}")
        for j, (launch, kernel) in enumerate(zip(launches, kernels)):
            at = f"{where}.kernels[{j}]"
            _launch(launch, at, manifest, arena_bytes)
            name = _string(launch, "name", at, required=False)
            if name is not None and name != kernel.get("name", name):
                raise _fail(f"{at}: name {name!r} is not kernels[{j}]'s {kernel.get('name')!r}")
        # a GPU run that skipped the checks would return outputs the checks exist to refuse
        if checks and "checks" not in entry:
            raise _fail(f"{where}: the manifest has {checks} checks but no \"checks\" launch")
        if "checks" in entry:
            if not checks:
                raise _fail(f"{where}: a \"checks\" launch, but the manifest has no checks")
            _launch(entry["checks"], f"{where}.checks", manifest, arena_bytes, status=True)


def _checks(manifest: Mapping[str, Any]) -> None:
    checks = manifest.get("checks")
    if checks is None:
        return
    if not isinstance(checks, list):
        raise _fail("\"checks\" must be an array")
    if len(checks) > MAX_CHECKS:
        raise _fail(f"more than {MAX_CHECKS} checks")
    for i, check in enumerate(checks):
        where = f"checks[{i}]"
        if not isinstance(check, dict):
            raise _fail(f"{where}: must be an object")
        if not _string(check, "message", where):
            raise _fail(f"{where}: empty message")


def _donations(manifest: Mapping[str, Any]) -> None:
    """Optional [{"input": j, "output": k}]: each input and output at most once, of one dtype and shape."""
    donations = manifest.get("donations")
    if donations is None:
        return
    if not isinstance(donations, list):
        raise _fail("\"donations\" must be an array")
    inputs, outputs = manifest["inputs"], manifest["outputs"]
    if len(donations) > len(inputs):
        raise _fail(f"{len(donations)} donations for {len(inputs)} inputs")
    seen: list[tuple[int, int]] = []
    for i, pair in enumerate(donations):
        where = f"donations[{i}]"
        if not isinstance(pair, dict):
            raise _fail(f"{where}: must be an object")
        j = _int(pair, "input", where, 0, len(inputs) - 1)
        k = _int(pair, "output", where, 0, len(outputs) - 1)
        a, b = inputs[j], outputs[k]
        if a["dtype"] != b["dtype"] or a["shape"] != b["shape"]:
            raise _fail(f"{where}: input {a['name']!r} and output {b['name']!r} differ in dtype or shape")
        for n, (jj, kk) in enumerate(seen):
            if jj == j or kk == k:
                raise _fail(f"{where}: input {a['name']!r} or output {b['name']!r} is in donations[{n}] too")
        seen.append((j, k))


def check_manifest(manifest: Mapping[str, Any], sections: Mapping[str, int]) -> None:
    """Raise ArtifactError unless `manifest` (whose format_version the caller has checked)
    has every field the runtime relies on, well-formed; `sections` maps each section's
    name to its raw size."""
    model = manifest.get("model")
    if isinstance(model, dict):
        _string(model, "name", "model", required=False)
    _tensors(manifest, "inputs", required=False)
    _tensors(manifest, "outputs", required=True)
    arena = _object(manifest, "arena", "")
    _int(arena, "bytes", "arena", 0, INT64_MAX)
    _alignment(arena, "arena")
    _weights(manifest, sections)
    _cpu(manifest, sections)
    _kernels(manifest)
    _checks(manifest)
    _donations(manifest)
    _cuda(manifest, sections)
