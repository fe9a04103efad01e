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


Hostlist = Annotated[str, AfterValidator(_check_hostlist)]
SlurmTime = Annotated[str, AfterValidator(_check_slurm_time)]
