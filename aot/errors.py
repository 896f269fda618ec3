"""Exceptions raised by the compiler, the artifact reader and the runtime binding.

Every error a user can cause (bad model, unsupported op, damaged artifact, wrong
input) is one of these, with a message naming what is wrong and where.
"""


class AotError(Exception):
    """Base of every error aot raises on purpose."""


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
