"""Reading an artifact for a gate: the whole file checked, and every error naming the file.

The container reader's messages name the section and what is wrong ("truncated: file is
100000 bytes, header says 242226"); a gate reads two artifacts at once (a baseline, a diff),
so its messages also say which file.
"""
from __future__ import annotations

from pathlib import Path

from aot.artifact import Artifact, read_artifact
from aot.errors import ArtifactError


def read_checked(path: Path) -> Artifact:
    try:
        return read_artifact(path)
    except ArtifactError as err:
        message = str(err)
        raise ArtifactError(message if message.startswith(str(path)) else f"{path}: {message}") from None
    except OSError as err:
        raise ArtifactError(f"{path}: cannot read: {err.strerror or err}") from None
