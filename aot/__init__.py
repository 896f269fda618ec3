"""aot: an ahead-of-time compiler for ML models.

    aot.compile("model.onnx", "model.aot")
    session = aot.Session("model.aot")
    outputs = session.run(None, {"x": x})
"""
from aot.errors import (AotError, ArgumentError, ArtifactError, CodegenError, IRError, MissingDependencyError,
                        ModelError, RunError, UnsupportedError)

from aot.version import __version__

__all__ = [
    "AotError", "ArgumentError", "ArtifactError", "CodegenError", "IRError", "MissingDependencyError", "ModelError",
    "RunError", "UnsupportedError", "Session", "DeviceArray", "compile", "__version__",
]


def __getattr__(name: str):
    # Imported lazily so `import aot` stays cheap and never builds the runtime.
    if name == "compile":
        from aot.driver import compile_model

        return compile_model
    if name == "Session":
        from aot.runtime.session import Session

        return Session
    if name == "DeviceArray":
        from aot.runtime.device_array import DeviceArray

        return DeviceArray
    raise AttributeError(f"module 'aot' has no attribute {name!r}")
