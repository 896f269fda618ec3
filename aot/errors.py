"""Exceptions raised by the compiler, the artifact reader and the runtime binding.

Every error a user can cause (bad model, unsupported op, damaged artifact, wrong
input) is one of these, with a message naming what is wrong and where.

A message speaks in Python API terms (`shapes={'x': (1, 5)}`). Where the fix is
spelled differently on the command line (`--shape x=1x5`), the error also holds
that spelling in `cli_message`, and the CLI prints it instead: `spelled` builds
both from one sentence.
"""
from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar


class AotError(Exception):
    """Base of every error aot raises on purpose."""

    def __init__(self, message: str = "", *, cli: str | None = None) -> None:
        super().__init__(message)
        self.cli_message = message if cli is None else cli


class ArgumentError(AotError):
    """An argument is wrong before any work starts: a `shapes` value, a CPU name, an
    output path that cannot be written or that is the model itself (CLI exit status 2)."""


class ModelError(AotError):
    """The input model cannot be read or is malformed."""


class UnsupportedError(AotError):
    """The model uses ops or dtypes that aot does not compile."""


class IRError(AotError):
    """The IR is malformed (verifier failure or text parse error)."""


class CodegenError(AotError):
    """No lowering exists for an op/dtype on a target, or LLVM rejected the module."""


class ArtifactError(AotError):
    """An .aot file is truncated, corrupted or of an unknown version."""


class RunError(AotError):
    """Running an artifact failed (wrong input shape/dtype, runtime status)."""


class MissingDependencyError(AotError, ImportError):
    """An optional part of aot needs a package that is not installed (`aot.integrations.ray_serve`
    needs ray[serve]); the message names the extra that brings it. Also an ImportError, so code that
    probes for an optional feature with `except ImportError` keeps working."""


Dims = Sequence[int | str]


class ApiSpelling:
    """How the Python API names the shapes argument: `shapes={'x': (1, 5)}`."""

    option = "shapes"

    def shape(self, name: str, dims: Dims) -> str:
        return f"shapes[{name!r}] = {_tuple(dims)}"

    def shapes(self, fixes: Mapping[str, Dims]) -> str:
        return "shapes={" + ", ".join(f"{name!r}: {_tuple(dims)}" for name, dims in fixes.items()) + "}"


class CliSpelling:
    """How the command line names it: `--shape x=1x5`, quoted for a shell where the name needs it."""

    option = "--shape"

    def shape(self, name: str, dims: Dims) -> str:
        return f"--shape {shlex.quote(f'{name}={_dims(dims)}')}"

    def shapes(self, fixes: Mapping[str, Dims]) -> str:
        return " ".join(self.shape(name, dims) for name, dims in fixes.items())


API = ApiSpelling()
CLI = CliSpelling()
Spelling = ApiSpelling | CliSpelling
E = TypeVar("E", bound=AotError)


def spelled(cls: type[E], compose: Callable[[Spelling], str]) -> E:
    """An error whose message names the shapes argument: API terms, and CLI terms for the CLI."""
    return cls(compose(API), cli=compose(CLI))


def _tuple(dims: Dims) -> str:
    items = [str(d) for d in dims]
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _dims(dims: Dims) -> str:
    return "x".join(str(d) for d in dims)
