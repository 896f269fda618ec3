"""Tables that the Python side, the C runtime and packaging/FORMAT.md each spell out, checked
against their one source in Python: the dtypes (aot.ir.types.DType), the format version
(aot.artifact.FORMAT_VERSION), the status codes and ABI versions (aot.runtime.abi), and the
limits both readers enforce. The C sources and the spec are parsed as text, so a row added
on one side only fails here."""
import re

import pytest
from onnx import TensorProto

from aot import artifact, manifest_check
from aot.importers.onnx.loader import ONNX_DTYPES
from aot.ir.types import DType
from aot.runtime import abi
from paths_util import ROOT

HEADER = (ROOT / "runtime_c/include/aot_runtime.h").read_text()
STATUS_C = (ROOT / "runtime_c/src/status.c").read_text()
FORMAT_MD = (ROOT / "packaging/FORMAT.md").read_text()


def _c_enum(typedef: str) -> dict[str, int]:
    """NAME -> value of `typedef enum <typedef> { ... }` in aot_runtime.h."""
    body = re.search(rf"typedef enum {typedef} \{{(.*?)\}}", HEADER, re.S)
    assert body, typedef
    text = re.sub(r"/\*.*?\*/", "", body.group(1), flags=re.S)
    return {name: int(value) for name, value in re.findall(r"(\w+)\s*=\s*(\d+)", text)}


def _define(name: str, text: str | None = None) -> int:
    match = re.search(rf"#define {name} \(?(?:UINT64_C\()?(\d+)u?\)?(?: << (\d+))?", HEADER if text is None else text)
    assert match, name
    return int(match.group(1)) << int(match.group(2) or 0)


def _markdown_table(text: str, heading: str) -> list[list[str]]:
    """The rows (cells stripped of backticks) of the first table after `heading`."""
    section = text.split(heading, 1)[1]
    rows = []
    for line in section.splitlines():
        if line.startswith("|"):
            rows.append([cell.strip().strip("`") for cell in line.strip("|").split("|")])
        elif rows:
            break
    return rows[2:]  # past the header and the |---| line


# -- dtypes -------------------------------------------------------------------------
def test_the_c_header_enum_is_the_dtype_table():
    want = {f"AOT_DTYPE_{d.manifest_name.upper()}": d.abi_code for d in DType}
    assert _c_enum("aot_dtype") == {"AOT_DTYPE_INVALID": 0, **want}


def test_status_c_names_and_sizes_are_the_dtype_table():
    rows = re.findall(r'\{"(\w+)", AOT_DTYPE_(\w+), (\d+)\}', STATUS_C)
    assert sorted(rows) == sorted((d.manifest_name, d.manifest_name.upper(), str(d.itemsize)) for d in DType)


def test_format_md_dtype_table_is_the_dtype_table():
    rows = _markdown_table(FORMAT_MD, "### Dtypes")
    got = [(name, int(code), int(size), onnx.split()[0]) for name, code, size, onnx in rows]
    by_code = sorted(DType, key=lambda d: d.abi_code)
    assert got == [(d.manifest_name, d.abi_code, d.itemsize, d.onnx_name) for d in by_code]


def test_the_onnx_importer_maps_each_element_type_to_its_row():
    assert ONNX_DTYPES == {getattr(TensorProto, d.onnx_name): d for d in DType}


@pytest.mark.parametrize("dtype", list(DType), ids=lambda d: d.value)
def test_each_row_is_consistent_with_numpy(dtype):
    assert dtype.to_numpy().itemsize == dtype.itemsize
    assert DType.from_numpy(dtype.to_numpy()) is dtype
    assert DType.from_manifest_name(dtype.manifest_name) is dtype
    assert DType.from_abi_code(dtype.abi_code) is dtype


def test_names_and_codes_are_unique():
    for column in ("value", "manifest_name", "abi_code", "onnx_name", "numpy_type"):
        values = [getattr(d, column) for d in DType]
        assert len(set(values)) == len(values), column


# -- versions -------------------------------------------------------------------------
def test_format_version_is_the_same_in_python_the_header_and_the_spec():
    assert _define("AOT_FORMAT_VERSION") == artifact.FORMAT_VERSION
    title = re.search(r"^# The \.aot container, format version (\d+)$", FORMAT_MD, re.M)
    assert title and int(title.group(1)) == artifact.FORMAT_VERSION
    header_row = next(r for r in _markdown_table(FORMAT_MD, "## Header (64 bytes)") if r[2] == "format_version")
    assert header_row[3] == str(artifact.FORMAT_VERSION)
    versions = [int(r[0]) for r in _markdown_table(FORMAT_MD, "## Versions")]
    assert versions == list(range(1, artifact.FORMAT_VERSION + 1))


def test_every_abi_addition_is_marked_with_a_version_the_header_has():
    current = _define("AOT_ABI_VERSION")
    marked = {int(v) for v in re.findall(r"ABI version (\d+)", HEADER)}
    assert marked and max(marked) <= current
    history = re.search(r"#define AOT_ABI_VERSION \d+u /\*(.*?)\*/", HEADER, re.S).group(1)
    assert [int(v) for v in re.findall(r"(\d+):", history)] == list(range(2, current + 1))
    assert abi.ABI_VERSION <= abi.OPTIONS_ABI_VERSION <= current


def test_the_binding_mirrors_the_status_codes():
    mirrored = {name: value for name, value in vars(abi).items() if name.startswith("AOT_")}
    assert mirrored == _c_enum("aot_status")


# -- limits both readers enforce --------------------------------------------------------
def test_the_readers_share_their_limits():
    internal_h = (ROOT / "runtime_c/src/internal.h").read_text()
    model_c = (ROOT / "runtime_c/src/model.c").read_text()
    json_c = (ROOT / "runtime_c/src/json.c").read_text()
    assert _define("AOT__MAX_MANIFEST_BYTES", internal_h) == artifact.MAX_MANIFEST_BYTES
    assert _define("AOT__MAX_CODE_BYTES", internal_h) == artifact.MAX_SECTION_BYTES
    assert _define("MAX_DEPTH", json_c) == artifact.MAX_MANIFEST_DEPTH
    assert _define("MAX_MEMBERS", json_c) == artifact.MAX_MANIFEST_MEMBERS
    assert _define("MAX_RANK", model_c) == manifest_check.MAX_RANK
    assert _define("MAX_ALIGN", model_c) == manifest_check.MAX_ALIGN
    checks = re.search(r"#define MAX_CHECKS \(1u << (\d+)\)", model_c)
    assert checks and 1 << int(checks.group(1)) == manifest_check.MAX_CHECKS
