"""Shared base and field types of the definition model."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints

from .. import hostlist


class Model(BaseModel):
    """Every model is frozen and rejects unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


# Names become Slurm names, Kubernetes object names and file names: DNS-1123 labels.
Name = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")]

# A version as written by its vendor: 580.82.07, 13.0.1, v25.3.4, 1.17.8, 25.05.3
Version = Annotated[str, StringConstraints(pattern=r"^v?\d+(\.\d+)*([.+~-][0-9A-Za-z.+~-]+)?$")]

_DURATION = re.compile(r"^(UNLIMITED|INFINITE|(\d+-)?\d+(:\d{2}){0,2}|\d+)$")


def _check_hostlist(value: str) -> str:
    try:
        hostlist.parse(value)
    except hostlist.HostlistError as exc:
        raise ValueError(str(exc)) from None
    return value


def _check_slurm_time(value: str) -> str:
    if not _DURATION.match(value):
        raise ValueError(
            f"{value!r} is not a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM:SS or UNLIMITED)"
        )
    return value


Hostlist = Annotated[str, AfterValidator(_check_hostlist)]
SlurmTime = Annotated[str, AfterValidator(_check_slurm_time)]
