"""A kernel body's LLVM assembly without the names that do not change its code.

The emitters name every value and block after its IR node (`%"x.ptr"`, `"k3_max"`),
and a constant's global after its value (`@"const.w"`), so that dumps of the graph's
code read well. Two kernels doing the same work on different values would then print
differently. A body's function therefore names its locals through a `NumberedScope`:
every argument, block and value is `vN`, numbered as it is made, whatever name the
emitter gave; and `numbered_constants` renames each constant's global to `@"const.N"`
in the order the module made them. Two bodies that do the same work are made in the
same order, so they print the same, are built once and share a cache entry
(build.py). A renaming is one-to-one and keeps local and global names apart, so the
module means what it meant.

    emitted:  %"x.ptr" = bitcast i8* %"x.base" to float*
    printed:  %"v1" = bitcast i8* %"v0" to float*

Numbering as values are made, rather than renaming the printed text (a regular
expression over every token), took a fifth of the CPU time of printing resnet18's
bodies away.
"""
from __future__ import annotations

import re

from llvmlite import ir
from llvmlite.ir._utils import NameScope

CONSTANT_PREFIX = "const."


class NumberedScope(NameScope):
    """A function's local names: `v0`, `v1`, ... in the order they are registered."""

    def register(self, name: str, deduplicate: bool = False) -> str:
        numbered = f"v{len(self._useset) - 1}"  # the base class's set starts with ''
        self._useset.add(numbered)
        return numbered


def number_locals(fn: ir.Function) -> None:
    """Name `fn`'s arguments and everything made in it from now on `vN` (see NumberedScope)."""
    fn.scope = NumberedScope()
    for arg in fn.args:
        arg.name = arg.name  # registered again, in the numbered scope


def numbered_constants(text: str, module: ir.Module) -> str:
    """`text` (module's assembly) with each constant's global named `const.N`, N its place
    among the module's constants. One pass, so a new name never meets an old one."""
    references = {g.get_reference(): f'@"{CONSTANT_PREFIX}{number}"' for number, g in enumerate(
        g for g in module.globals.values() if g.name.startswith(CONSTANT_PREFIX))}
    if not references:
        return text
    pattern = re.compile("|".join(re.escape(reference) for reference in references))
    return pattern.sub(lambda match: references[match.group(0)], text)
