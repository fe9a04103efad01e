"""From a validated definition to the complete output tree (targets + resolved
definition) and its manifest metadata. Pure apart from reading MAC inventories."""

from __future__ import annotations

import json
from pathlib import Path

from . import __version__
from .errors import DefinitionError, Finding, Severity
from .render import TARGETS, delivery, render_all
from .quoting import UnsafeValue
from .resolve import resolve
from .validate.pipeline import Result
from .writer import sha256

RESOLVED = "definition.resolved.json"


def build_tree(result: Result, targets: list[str] | None = None) -> tuple[dict[str, str], dict]:
    """Render a clean validation result. Raises ValueError if it has errors, and DefinitionError
    when a value cannot be written safely into some output language (the types should have
    refused it; this is the second wall, see quoting.py)."""
    d, matrix, source = result.definition, result.matrix, result.source
    if not result.ok or d is None:
        raise ValueError("cannot render a definition with errors")
    if matrix is None or source is None:  # validate_source always sets both
        raise ValueError("a validation result without its matrix or source")
    resolved = resolve(d, matrix, Path(result.file).resolve().parent)
    try:
        tree = render_all(resolved, targets)
    except UnsafeValue as exc:
        raise DefinitionError([Finding(
            "render-unsafe-value", Severity.ERROR, (), f"a value cannot be written safely: {exc}",
            "the value passed validation but not quoting; narrow the field's value (and report the gap)",
            result.file)]) from None
    tree[RESOLVED] = json.dumps({
        "definition": d.model_dump(mode="json"),
        "set": resolved.set.model_dump(mode="json"),
    }, indent=2, sort_keys=True) + "\n"
    try:  # every file names the hosts that use it (delivery.yaml); a file without is a renderer's bug
        tree[delivery.FILE] = delivery.render(resolved, tree)
    except delivery.Undelivered as exc:
        raise DefinitionError([Finding(
            "render-undelivered", Severity.ERROR, (), f"rendered files no delivery rule covers: {exc}",
            "add a rule for them to src/clusterdef/render/delivery.yaml (and report the gap)", result.file)]) from None
    meta = {
        "clusterdef": __version__,
        "cluster": d.cluster.name,
        "set": d.cluster.matrix,
        "definition": {"file": Path(result.file).name, "sha256": sha256(source.text)},
        "targets": sorted(targets or TARGETS),
    }
    return tree, meta
