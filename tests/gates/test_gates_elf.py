"""aot/gates/elf.py: code bytes per kernel from the CPU code's symbol table."""
import struct

import pytest

from aot.artifact import read_artifact
from aot.errors import ArtifactError
from aot.gates.elf import Function, branch_targets, kernel_code_bytes, read_functions
from gates_util import compile_samples


@pytest.fixture(scope="module")
def lenet(tmp_path_factory):
    return read_artifact(compile_samples(tmp_path_factory, {"lenet": {}})["lenet"])


def _code(artifact):
    variant = artifact.manifest["cpu"][0]
    return variant, artifact.sections[variant["section"]]


def test_every_kernel_has_its_wrapper_and_body(lenet):
    variant, image = _code(lenet)
    symbols = [k["symbol"] for k in lenet.manifest["kernels"]]
    sizes = kernel_code_bytes(image, symbols, variant["section"])
    _, functions = read_functions(image, variant["section"])
    assert list(sizes) == symbols
    for symbol in symbols:
        # the wrapper only moves arguments and jumps: its body is what makes a kernel large
        assert sizes[symbol] > functions[symbol].size
    assert variant["entry"] in functions


def test_a_symbol_the_code_lacks_is_left_out(lenet):
    variant, image = _code(lenet)
    assert kernel_code_bytes(image, ["aot_kernel_999"], variant["section"]) == {}


def test_decodes_x86_calls_and_jumps():
    # mov %r9,%rcx; jmp +0x10; call -0x20
    code = bytes([0x4C, 0x89, 0xC9, 0xE9]) + struct.pack("<i", 0x10) + bytes([0xE8]) + struct.pack("<i", -0x20)
    targets = branch_targets(62, Function("k", 0x1000, len(code), code))
    assert 0x1000 + 8 + 0x10 in targets and 0x1000 + 13 - 0x20 in targets


def test_decodes_aarch64_branches():
    b_forward = 0x14000000 | 4  # b +16
    bl_back = 0x94000000 | ((-2) & 0x03FFFFFF)  # bl -8
    code = struct.pack("<III", 0xD503201F, b_forward, bl_back)  # nop; b; bl
    assert branch_targets(183, Function("k", 0x2000, len(code), code)) == [0x2000 + 4 + 16, 0x2000 + 8 - 8]


@pytest.mark.parametrize("damage, says", [
    (lambda image: b"\x7fELF", "not an ELF image"),
    (lambda image: b"MZ" + image[2:], "not an ELF image"),
    (lambda image: image[:4] + b"\x01" + image[5:], "not a 64-bit little-endian"),
    (lambda image: image[:0x28] + struct.pack("<Q", len(image) + 64) + image[0x30:], "ELF section headers outside the image"),
])
def test_a_damaged_image_is_an_artifact_error_naming_the_section(lenet, damage, says):
    variant, image = _code(lenet)
    with pytest.raises(ArtifactError, match=f"section 'cpu.x86_64.test': {says}"):
        read_functions(damage(image), "cpu.x86_64.test")
