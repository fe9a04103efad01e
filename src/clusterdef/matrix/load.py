"""Load matrices/: validated sets (sets/*.yaml) and compatibility facts (compat/*.yaml)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ..errors import DefinitionError, Finding
from ..limits import read_bytes
from ..source import load_file
from ..schema_errors import schema_findings
from .compat import Compat
from .model import (CudaDriverFile, DriverBranchesFile, KubernetesSkew, NcclFile, OperatorFile, PackageSourcesFile,
                    SlurmFile, ValidatedSet)

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


def _file(path: Path, model, findings: list[Finding]):
    """The file validated as a whole against its model (its defaults when absent or invalid), with a
    located finding for every problem of its shape or its rows."""
    if not path.is_file():
        return model()
    try:
        src = load_file(path)
    except DefinitionError as exc:
        findings.extend(exc.findings)
        return model()
    data = {} if src.data is None else src.data
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        findings.extend(src.place(_matrix_hint(f, path)) for f in schema_findings(exc, data, roots=(model,)))
        return model()


def _matrix_hint(finding: Finding, path: Path) -> Finding:
    """Point the hint at the file's documented shape, not at the definition's schema."""
    from dataclasses import replace

    where = f"the shape of {path.parent.name}/{path.name} in matrices/README.md"
    return replace(finding, hint=finding.hint.replace("`clusterdef schema`", where))


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
    slurm = _file(c / "slurm-releases.yaml", SlurmFile, findings)
    compat = Compat(
        cuda_driver=_file(c / "cuda-driver-min.yaml", CudaDriverFile, findings).rows,
        gpu_operator=_file(c / "gpu-operator.yaml", OperatorFile, findings).releases,
        nccl=_file(c / "nccl-cuda.yaml", NcclFile, findings).releases,
        slurm=slurm.releases,
        slurm_rule=slurm.upgrade_rule,
        driver_branches=_file(c / "driver-branches.yaml", DriverBranchesFile, findings).branches,
        kubernetes=_file(c / "kubernetes-skew.yaml", KubernetesSkew, findings),
        package_sources=_file(c / "package-sources.yaml", PackageSourcesFile, findings).sources,
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
            findings.extend(src.place(f) for f in schema_findings(exc, src.data, roots=(ValidatedSet,)))
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
