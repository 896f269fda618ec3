"""The artifact's tooling section: what the compiler records for tools, never for the runtime.

The manifest holds only what the C runtime reads (packaging/FORMAT.md). Everything else the
compiler knows about a model (fusion decisions, the arena plan, where each value lives, the
LLVM target it was compiled for, which source node each run-time check guards, each GPU
kernel's body and what ptxas reported of it) goes to the `tooling` section, zstd JSON the
runtime never decodes, read by `aot inspect`, `aot visualize` (`inspect --graph`,
`--memory-plan`), `aot verify` and the kernel profiler.

Its JSON mirrors the manifest's shape: an object extends the manifest's object of the same
key, a list extends the manifest's list of the same key entry by entry (same length, same
kernel names), so `annotated(manifest, tooling)` is the manifest as a tool wants to see it:

    {"compiler": {"name": "aot", "version": "0.1.0"},
     "model": {"source_sha256": "..."},
     "cpu": [{"triple": "x86_64-unknown-linux-gnu", "features": "+avx2,..."}],
     "arena": {"lower_bound_bytes": 512, "temporaries_bytes": 768},
     "kernels": [{"name": "k0_dot", "ops": ["dot"], "output": "h", "inputs": ["x", "w"], "reason": "..."}],
     "checks": [{"node": "pick_rate", "value": "ok3"}],
     "donations": [{"inferred": true, "how": "in place", "why": "k3_scatter (scatter) writes only ..."}],
     "cuda": {"arena": {"lower_bound_bytes": 512},
              "sms": [{"triple": "nvptx64-nvidia-cuda", "features": "+ptx70", "ptxas": "13.0.88",
                       "kernels": [{"name": "k0_dot", "body": "rows", "blocks": 4, "static_shared_bytes": 0,
                                    "ptxas": {"registers": 30, "stack_bytes": 0, "spill_store_bytes": 0,
                                              "spill_load_bytes": 0, "shared_bytes": 0}}],
                       "checks": {"body": "checks", "blocks": 1, "static_shared_bytes": 0}}]},
     "memory_plan": [{"buffer": "b0", "values": ["h"], "offset": 0, "size": 256, "start": 0, "end": 2}],
     "values": {"h": {"kind": "arena", "index": 0, "offset": 0, "bytes": 256}}}

Every key is optional to a reader (an artifact packed without the section has none);
`check_tooling` refuses one of the wrong type, so a damaged or edited section is an
ArtifactError, never a traceback in a tool.
"""
from __future__ import annotations

from typing import Any, Mapping

from aot.errors import ArtifactError

SECTION = "tooling"


def _fail(message: str) -> ArtifactError:
    return ArtifactError(f"section '{SECTION}': {message}")


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_int(value: Any) -> bool:
    return type(value) is int  # bool is an int to Python, not to JSON


def _check_fields(obj: Any, where: str, fields: Mapping[str, str]) -> None:
    """`obj` is an object whose `fields` (name -> "str", "int" or "strings"), where present,
    have that type."""
    if not isinstance(obj, dict):
        raise _fail(f"{where} must be an object")
    for key, kind in fields.items():
        if key not in obj:
            continue
        value = obj[key]
        ok = {"str": isinstance(value, str), "int": _is_int(value), "strings": _strings(value)}[kind]
        if not ok:
            what = {"str": "a string", "int": "an integer", "strings": "an array of strings"}[kind]
            raise _fail(f"{where}: \"{key}\" must be {what}")


def _check_list(tooling: Mapping[str, Any], key: str, manifest: Mapping[str, Any],
                fields: Mapping[str, str]) -> None:
    """tooling[key] extends manifest[key] entry by entry."""
    if key not in tooling:
        return
    entries = tooling[key]
    runtime = manifest.get(key) or []
    if not isinstance(entries, list) or len(entries) != len(runtime):
        raise _fail(f"\"{key}\" must be an array with one entry per manifest {key}[] entry ({len(runtime)})")
    for i, (entry, theirs) in enumerate(zip(entries, runtime)):
        _check_fields(entry, f"{key}[{i}]", fields)
        if "name" in entry and entry["name"] != theirs.get("name", entry["name"]):
            raise _fail(f"{key}[{i}]: name {entry['name']!r} is not the manifest's {theirs.get('name')!r}")


_CUDA_SM_FIELDS = {"triple": "str", "features": "str", "ptxas": "str"}
_CUDA_KERNEL_FIELDS = {"name": "str", "body": "str", "blocks": "int", "static_shared_bytes": "int"}
_PTXAS_FIELDS = {"registers": "int", "stack_bytes": "int", "spill_store_bytes": "int", "spill_load_bytes": "int",
                 "shared_bytes": "int"}


def _check_cuda(tooling: Mapping[str, Any], manifest: Mapping[str, Any]) -> None:
    """tooling.cuda extends manifest.cuda: its sms[] entry by entry, each one's kernels[] and
    checks launch too."""
    if "cuda" not in tooling:
        return
    cuda = tooling["cuda"]
    runtime = manifest.get("cuda")
    if not isinstance(cuda, dict) or not isinstance(runtime, dict):
        raise _fail("\"cuda\" must be an object, and only where the manifest has one")
    _check_fields(cuda.get("arena", {}), "cuda.arena", {"lower_bound_bytes": "int"})
    sms = cuda.get("sms", [])
    if not isinstance(sms, list) or len(sms) != len(runtime["sms"]):
        raise _fail(f"\"cuda.sms\" must be an array with one entry per manifest cuda.sms[] entry "
                    f"({len(runtime['sms'])})")
    for i, (entry, theirs) in enumerate(zip(sms, runtime["sms"])):
        where = f"cuda.sms[{i}]"
        _check_fields(entry, where, _CUDA_SM_FIELDS)
        kernels = entry.get("kernels", [])
        if not isinstance(kernels, list) or len(kernels) != len(theirs["kernels"]):
            raise _fail(f"{where}: \"kernels\" must be an array with one entry per manifest kernel "
                        f"({len(theirs['kernels'])})")
        for j, (kernel, launch) in enumerate(zip(kernels, theirs["kernels"])):
            at = f"{where}.kernels[{j}]"
            _check_fields(kernel, at, _CUDA_KERNEL_FIELDS)
            if "name" in kernel and kernel["name"] != launch.get("name", kernel["name"]):
                raise _fail(f"{at}: name {kernel['name']!r} is not the manifest's {launch.get('name')!r}")
            if "ptxas" in kernel:
                _check_fields(kernel["ptxas"], f"{at}.ptxas", _PTXAS_FIELDS)
        if "checks" in entry:
            # the checks kernel's body, blocks and ptxas report (nvptx/checks.py)
            if "checks" not in theirs:
                raise _fail(f"{where}.checks: only where the manifest's {where} has a checks launch")
            _check_fields(entry["checks"], f"{where}.checks", _CUDA_KERNEL_FIELDS)
            if "ptxas" in entry["checks"]:
                _check_fields(entry["checks"]["ptxas"], f"{where}.checks.ptxas", _PTXAS_FIELDS)


_MEMORY_PLAN_FIELDS = {"buffer": "str", "values": "strings", "offset": "int", "size": "int", "start": "int",
                       "end": "int"}
_VALUE_FIELDS = {"kind": "str", "index": "int", "offset": "int", "bytes": "int"}


def check_tooling(tooling: Any, manifest: Mapping[str, Any]) -> None:
    """Raise ArtifactError unless `tooling` is an object whose known keys have the types
    tools use and whose lists match the (checked) `manifest`'s."""
    if not isinstance(tooling, dict):
        raise _fail("top level is not a JSON object")
    for key in ("compiler", "model", "arena"):
        if key in tooling and not isinstance(tooling[key], dict):
            raise _fail(f"\"{key}\" must be an object")
    _check_fields(tooling.get("compiler", {}), "compiler", {"name": "str", "version": "str"})
    _check_fields(tooling.get("model", {}), "model", {"source_sha256": "str"})
    _check_fields(tooling.get("arena", {}), "arena", {"lower_bound_bytes": "int", "temporaries_bytes": "int"})
    _check_list(tooling, "cpu", manifest, {"triple": "str", "features": "str"})
    _check_list(tooling, "kernels", manifest,
                {"name": "str", "ops": "strings", "output": "str", "inputs": "strings", "reason": "str"})
    _check_list(tooling, "checks", manifest, {"node": "str", "value": "str"})
    _check_list(tooling, "donations", manifest, {"how": "str", "why": "str"})
    for i, entry in enumerate(tooling.get("donations", [])):
        if not isinstance(entry.get("inferred", False), bool):
            raise _fail(f"donations[{i}]: \"inferred\" must be true or false")
    _check_cuda(tooling, manifest)
    plan = tooling.get("memory_plan", [])
    if not isinstance(plan, list):
        raise _fail("\"memory_plan\" must be an array")
    for i, entry in enumerate(plan):
        _check_fields(entry, f"memory_plan[{i}]", _MEMORY_PLAN_FIELDS)
        missing = [k for k in _MEMORY_PLAN_FIELDS if k not in entry]
        if missing:
            raise _fail(f"memory_plan[{i}]: missing \"{missing[0]}\"")
    values = tooling.get("values", {})
    if not isinstance(values, dict):
        raise _fail("\"values\" must be an object")
    for name, entry in values.items():
        _check_fields(entry, f"values[{name!r}]", _VALUE_FIELDS)


def annotated(manifest: Mapping[str, Any], tooling: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest with the tooling section's fields added (the manifest's own win)."""
    return _merge(manifest, tooling)


def _merge(ours: Any, extra: Any) -> Any:
    if isinstance(ours, Mapping) and isinstance(extra, Mapping):
        merged = {key: _merge(ours[key], extra[key]) if key in extra else ours[key] for key in ours}
        merged.update({key: value for key, value in extra.items() if key not in ours})
        return merged
    if isinstance(ours, list) and isinstance(extra, list) and len(ours) == len(extra):
        return [_merge(a, b) for a, b in zip(ours, extra)]
    return ours
