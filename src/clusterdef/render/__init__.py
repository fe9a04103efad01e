"""Render targets: pure functions from the resolved definition to a FileTree.

Adding a target is one module with `render(resolved) -> FileTree` plus one line in TARGETS."""

from __future__ import annotations

from typing import Callable

from ..resolve import Resolved
from . import (ansible, backup, identity, images, inventory, kubernetes, network, observability, pxe, slurm, storage,
               versions)

FileTree = dict[str, str]
Renderer = Callable[[Resolved], FileTree]

TARGETS: dict[str, Renderer] = {
    "inventory": inventory.render,
    "versions": versions.render,
    "pxe": pxe.render,
    "images": images.render,
    "slurm": slurm.render,
    "ansible": ansible.render,
    "kubernetes": kubernetes.render,
    "network": network.render,
    "storage": storage.render,
    "observability": observability.render,
    "identity": identity.render,
    "backup": backup.render,
}


def template_environments() -> dict:
    """The Jinja environments of the targets, by package: what scripts/compile-templates compiles ahead."""
    return {"clusterdef.render.pxe": pxe._env, "clusterdef.render.images": images._env,
            "clusterdef.render.slurm": slurm._templates()}


def render_all(resolved: Resolved, targets: list[str] | None = None) -> FileTree:
    tree: FileTree = {}
    for name in targets or list(TARGETS):
        for rel, content in TARGETS[name](resolved).items():
            if rel in tree:
                raise RuntimeError(f"targets write the same file twice: {rel}")
            tree[rel] = content
    return tree
