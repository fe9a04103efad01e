"""The installed clusterdef.cluster Ansible collection (scripts/build-collection builds it): where its
playbooks are, for `clusterdef apply` when no playbooks/ folder is beside or above the definition.

Searched where Ansible looks for collections (ansible-core's COLLECTIONS_PATHS setting: the
ANSIBLE_COLLECTIONS_PATH variable, ansible.cfg's collections_path, else ~/.ansible/collections and
/usr/share/ansible/collections), then in this Python's sys.path (`ansible-galaxy collection install -p`
into site-packages), the first match winning, as Ansible's own loader does."""

from __future__ import annotations

import os
import sys
from pathlib import Path

NAMESPACE, NAME = "clusterdef", "cluster"
DEFAULT_PATHS = ("~/.ansible/collections", "/usr/share/ansible/collections")


def configured_paths() -> list[str]:
    """Ansible's collection search path, from its own configuration when ansible-core is importable."""
    try:
        from ansible.config.manager import ConfigManager
    except ImportError:  # clusterdef without the [ansible] extra: the variable, else Ansible's defaults
        env = os.environ.get("ANSIBLE_COLLECTIONS_PATH") or os.environ.get("ANSIBLE_COLLECTIONS_PATHS")
        return env.split(os.pathsep) if env else list(DEFAULT_PATHS)
    paths = ConfigManager().get_config_value("COLLECTIONS_PATHS")
    return [str(p) for p in paths or ()]


def collection_dir(search: list[str]) -> Path | None:
    """The first `ansible_collections/clusterdef/cluster` under one of `search` (a path may also name an
    ansible_collections folder itself, as Ansible allows)."""
    for entry in search:
        base = Path(entry).expanduser()
        root = base if base.name == "ansible_collections" else base / "ansible_collections"
        here = root / NAMESPACE / NAME
        if (here / "galaxy.yml").is_file() or (here / "MANIFEST.json").is_file():
            return here
    return None


def collection_playbooks() -> Path | None:
    """The installed collection's playbooks/ folder, or None when the collection is not installed."""
    found = collection_dir(configured_paths() + [p for p in sys.path if p])
    pb = found / "playbooks" if found else None
    return pb if pb is not None and (pb / "upgrade.yml").is_file() else None


def collections_root(playbook: Path) -> Path | None:
    """The folder holding `ansible_collections/` when `playbook` lies in an installed collection (so
    ansible-playbook can resolve the collection's fully qualified role names), else None."""
    for d in Path(playbook).resolve().parents:
        if d.name == "ansible_collections":
            return d.parent
    return None
