"""Node images. Driver, CUDA, NCCL and toolkit versions come from the validated set, never from here."""

from __future__ import annotations

from typing import Literal

from pydantic import StringConstraints
from typing_extensions import Annotated

from .base import Model

ImageVersion = Annotated[str, StringConstraints(pattern=r"^[0-9A-Za-z][0-9A-Za-z._-]*$")]


class Image(Model):
    version: ImageVersion
    """Image version; artefact names carry it, so a change means a new image."""
    distribution: Literal["debian", "ubuntu"]
    release: str
    kernel: str
    """Kernel package version the image ships (e.g. 6.1.0-28-amd64)."""
    packages: tuple[str, ...] = ()
    kernel_cmdline: tuple[str, ...] = ()
