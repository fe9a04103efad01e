"""The packages that carry the commands of the rendered backup jobs (backup_packages.yaml)."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from ..source import safe_yaml


@cache
def backup_packages() -> dict:
    """{commands: {package: [command]}, every: [package], jobs: {kind: [package]}}."""
    return safe_yaml().load(files(__package__).joinpath("backup_packages.yaml").read_text(encoding="utf-8"))
