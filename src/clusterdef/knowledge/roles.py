"""Which roles of roles/ install packages on the host (roles.yaml)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from ..source import safe_yaml

DATA = Path(__file__).with_name("roles.yaml")


@cache
def roles() -> dict[str, dict]:
    """role name -> {installs_packages: bool}."""
    return dict(safe_yaml().load(DATA.read_text(encoding="utf-8"))["roles"])


def installs_packages(role: str) -> bool:
    return bool(roles().get(role, {}).get("installs_packages"))
