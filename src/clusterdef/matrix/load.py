"""Load matrices/: validated sets (sets/*.yaml) and compatibility facts (compat/*.yaml)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ..errors import DefinitionError, Finding
from ..limits import read_bytes
from ..source import load_file
from ..validate.schema import schema_findings
from .compat import Compat
from .model import (CudaDriverRow, DriverBranch, KubernetesSkew, NcclRelease, OperatorRelease, PackageSource,
                    SlurmRelease, SlurmUpgradeRule, ValidatedSet)

ENV_VAR = "CLUSTERDEF_MATRICES"


@dataclass(frozen=True)
class Matrix:
    root: Path
    sets: dict[str, ValidatedSet] = field(default_factory=dict)
    set_files: dict[str, Path] = field(default_factory=dict)
    compat: Compat = field(default_factory=Compat)


def find_matrices(definition_file: str | Path | None = None) -> Path | None:
    """$CLUSTERDEF_MATRICES, else the nearest `matrices/` beside or above the definition,
    else one above the working directory."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    starts = []
    if definition_file:
        starts.append(Path(definition_file).resolve().parent)
    starts.append(Path.cwd())
    for start in starts:
        for d in (start, *start.parents):
            if (d / "matrices" / "sets").is_dir():
                return d / "matrices"
    return None


def _rows(path: Path, key: str, model, findings: list[Finding]) -> tuple:
    if not path.is_file():
        return ()
    try:
        src = load_file(path)
    except DefinitionError as exc:
        findings.extend(exc.findings)
        return ()
    data = src.data or {}
    rows = data.get(key, []) if isinstance(data, dict) else []
    out = []
    for i, row in enumerate(rows):
        try:
            out.append(model.model_validate(row))
        except ValidationError as exc:
            findings.extend(src.place(f) for f in schema_findings(exc, row, prefix=(key, i)))
    return tuple(out)


def _single(path: Path, model, findings: list[Finding], key: str | None = None):
    if not path.is_file():
        return model()
    try:
        src = load_file(path)
    except DefinitionError as exc:
        findings.extend(exc.findings)
        return model()
    data = src.data or {}
    if key:
        data = data.get(key, {}) if isinstance(data, dict) else {}
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        findings.extend(src.place(f) for f in schema_findings(exc, data))
        return model()


# the last few matrices loaded in this process, by their files' names and sha256: a process that
# validates many definitions against one matrices/ folder (tests running the command line in-process,
# a Pulumi program, a pre-commit run over several files) parses and validates it once
_LOADED: dict[tuple, tuple[Matrix, tuple[Finding, ...]]] = {}
_KEEP = 4


def _fingerprint(root: Path) -> tuple | None:
    import hashlib

    parts = []
    for path in sorted([*(root / "compat").glob("*.yaml"), *(root / "sets").glob("*.yaml")]):
        try:
            parts.append((path.name, hashlib.sha256(read_bytes(path, "definition")).digest()))
        except DefinitionError:
            return None  # unreadable: loaded afresh, which reports it at its place
    return (str(root.resolve()), tuple(parts))


def load_matrix(root: str | Path) -> tuple[Matrix, list[Finding]]:
    """The validated sets and compatibility facts under `root`, with the findings against them.
    Matrix is frozen and its sets are frozen models, so one loaded matrix is shared safely."""
    root = Path(root)
    key = _fingerprint(root)
    if key is not None and key in _LOADED:
        matrix, findings = _LOADED[key]
        return matrix, list(findings)
    matrix, found = _load_matrix(root)
    if key is not None:
        while len(_LOADED) >= _KEEP:
            _LOADED.pop(next(iter(_LOADED)))
        _LOADED[key] = (matrix, tuple(found))
    return matrix, found


def _load_matrix(root: Path) -> tuple[Matrix, list[Finding]]:
    findings: list[Finding] = []
    c = root / "compat"
    compat = Compat(
        cuda_driver=_rows(c / "cuda-driver-min.yaml", "rows", CudaDriverRow, findings),
        gpu_operator=_rows(c / "gpu-operator.yaml", "releases", OperatorRelease, findings),
        nccl=_rows(c / "nccl-cuda.yaml", "releases", NcclRelease, findings),
        slurm=_rows(c / "slurm-releases.yaml", "releases", SlurmRelease, findings),
        slurm_rule=_single(c / "slurm-releases.yaml", SlurmUpgradeRule, findings, key="upgrade_rule"),
        driver_branches=_rows(c / "driver-branches.yaml", "branches", DriverBranch, findings),
        kubernetes=_single(c / "kubernetes-skew.yaml", KubernetesSkew, findings),
        package_sources=_rows(c / "package-sources.yaml", "sources", PackageSource, findings),
    )
    sets: dict[str, ValidatedSet] = {}
    files: dict[str, Path] = {}
    for path in sorted((root / "sets").glob("*.yaml")):
        try:
            src = load_file(path)
        except DefinitionError as exc:
            findings.extend(exc.findings)
            continue
        try:
            vs = ValidatedSet.model_validate(src.data)
        except ValidationError as exc:
            findings.extend(src.place(f) for f in schema_findings(exc, src.data))
            continue
        if vs.name in sets:
            findings.append(src.place(Finding(
                "matrix-duplicate-set", _err(), ("name",),
                f"set {vs.name!r} is defined in both {files[vs.name].name} and {path.name}",
                "give every set file a unique name")))
            continue
        sets[vs.name] = vs
        files[vs.name] = path
    return Matrix(root=root, sets=sets, set_files=files, compat=compat), findings


def _err():
    from ..errors import Severity
    return Severity.ERROR
