"""The cluster itself: its name and the validated set it runs."""

from __future__ import annotations

from .base import Model, Name
from ..types import SetName, Text


class Cluster(Model):
    name: Name
    matrix: SetName
    """Name of the validated set (a file in matrices/sets/) this cluster runs."""
    allow_candidate: bool = False
    """Allow a set whose status is `candidate` (lab or canary clusters only)."""
    site: Text = ""
    description: Text = ""
