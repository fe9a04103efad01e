"""Shared field types of the definition model that only the definition uses (the string and number types
and the base Model, which the validated sets share, are in clusterdef/types.py)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

from .. import hostlist
from ..types import Model, Name, Version  # noqa: F401  (re-exported: most models import them from here)


_DURATION = re.compile(r"^(UNLIMITED|INFINITE|([0-9]{1,5}-)?[0-9]{1,6}(:[0-9]{2}){0,2}|[0-9]{1,9})$")


def _check_hostlist(value: str) -> str:
    try:
        hostlist.parse(value)
        hostlist.check_names(value)
    except hostlist.HostlistError as exc:
        raise ValueError(str(exc)) from None
    return value


def _check_slurm_time(value: str) -> str:
    if not _DURATION.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM:SS or UNLIMITED)"
        )
    return value


def slurm_minutes(value: str) -> float | None:
    """A Slurm time (slurm.conf(5) MaxTime: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in minutes;
    None for UNLIMITED/INFINITE."""
    if value in ("UNLIMITED", "INFINITE"):
        return None
    days, _, rest = value.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:  # D-HH, D-HH:MM, D-HH:MM:SS
        h, m, s = (parts + [0, 0])[:3]
        return int(days) * 1440 + h * 60 + m + s / 60
    if len(parts) == 3:
        return parts[0] * 60 + parts[1] + parts[2] / 60
    return parts[0] + (parts[1] / 60 if len(parts) == 2 else 0)


def slurm_time(minutes: int) -> str:
    """Minutes as Slurm's HH:MM:SS, or D-HH:MM:SS from a day on."""
    d, rest = divmod(minutes, 1440)
    return f"{d}-{rest // 60:02d}:{rest % 60:02d}:00" if d else f"{rest // 60:02d}:{rest % 60:02d}:00"


Hostlist = Annotated[str, AfterValidator(_check_hostlist)]
SlurmTime = Annotated[str, AfterValidator(_check_slurm_time)]
