"""Load matrices/: validated sets (sets/*.yaml) and compatibility facts (compat/*.yaml).

Two folders, in layers: the bundled one that ships with clusterdef (`bundled_matrices`), under the
site's (`-m`, $CLUSTERDEF_MATRICES, or the nearest matrices/ beside or above the definition). A site
set overrides the bundled set of the same name, and a site compat file the bundled file of the same
name; everything else the site leaves out comes from the bundled folder."""

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
SITE, BUNDLED = "site", "bundled"


@dataclass(frozen=True)
class Matrix:
    root: Path  # the site folder, or the bundled one when there is no site folder
    sets: dict[str, ValidatedSet] = field(default_factory=dict)
    set_files: dict[str, Path] = field(default_factory=dict)
    compat: Compat = field(default_factory=Compat)
    origins: dict[str, str] = field(default_factory=dict)  # set name -> SITE or BUNDLED
    folders: dict[str, Path] = field(default_factory=dict)  # SITE / BUNDLED -> the folder loaded as that layer

    def set_root(self, name: str) -> Path:
        """The matrices folder the set came from (its `baseline:` path is relative to it)."""
        return self.set_files[name].parent.parent if name in self.set_files else self.root


def bundled_matrices() -> Path | None:
    """The validated sets and compatibility data that ship with clusterdef: clusterdef/bundled_matrices/
    in an installed wheel (setup.py copies the repository's matrices/ there), else the repository's
    matrices/ when clusterdef runs from a source checkout (src/clusterdef, or an editable install)."""
    pkg = Path(__file__).resolve().parent.parent
    candidates = [pkg / "bundled_matrices"]
    if pkg.parent.name == "src":
        candidates.append(pkg.parent.parent / "matrices")
    return next((c for c in candidates if (c / "sets").is_dir()), None)


def matrices_root(explicit: str | Path | None, definition_file: str | Path | None = None) -> Path | None:
    """The folder to load: the one given (-m), else the site's (`find_matrices`), else the bundled one."""
    if explicit:
        return Path(explicit)
    return find_matrices(definition_file) or bundled_matrices()


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


def _layers(root: Path) -> list[tuple[Path, str]]:
    """The folders under `root`, bottom first: the bundled one, then `root` unless it is the bundled one."""
    bundled = bundled_matrices()
    if bundled is None:
        return [(root, SITE)]
    if root.resolve() == bundled.resolve():
        return [(root, BUNDLED)]
    return [(bundled, BUNDLED), (root, SITE)]


def load_matrix(root: str | Path) -> tuple[Matrix, list[Finding]]:
    """The validated sets and compatibility facts under `root` layered over the bundled ones, with the
    findings against them. Matrix is frozen and its sets are frozen models, so one loaded matrix is
    shared safely."""
    layers = _layers(Path(root))
    prints = [_fingerprint(r) for r, _ in layers]
    key = None if None in prints else tuple(prints)
    if key is not None and key in _LOADED:
        matrix, findings = _LOADED[key]
        return matrix, list(findings)
    matrix, found = _load_matrix(layers)
    if key is not None:
        while len(_LOADED) >= _KEEP:
            _LOADED.pop(next(iter(_LOADED)))
        _LOADED[key] = (matrix, tuple(found))
    return matrix, found


def _compat(layers: list[tuple[Path, str]], findings: list[Finding]) -> Compat:
    """Each compat file from the top layer that has it (the site's replaces the bundled one whole)."""
    def path(name: str) -> Path:
        return next((r / "compat" / name for r, _ in reversed(layers) if (r / "compat" / name).is_file()),
                    layers[-1][0] / "compat" / name)

    slurm = _file(path("slurm-releases.yaml"), SlurmFile, findings)
    return Compat(
        cuda_driver=_file(path("cuda-driver-min.yaml"), CudaDriverFile, findings).rows,
        gpu_operator=_file(path("gpu-operator.yaml"), OperatorFile, findings).releases,
        nccl=_file(path("nccl-cuda.yaml"), NcclFile, findings).releases,
        slurm=slurm.releases,
        slurm_rule=slurm.upgrade_rule,
        driver_branches=_file(path("driver-branches.yaml"), DriverBranchesFile, findings).branches,
        kubernetes=_file(path("kubernetes-skew.yaml"), KubernetesSkew, findings),
        package_sources=_file(path("package-sources.yaml"), PackageSourcesFile, findings).sources,
    )


def _folder_sets(root: Path, findings: list[Finding]) -> tuple[dict[str, ValidatedSet], dict[str, Path]]:
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
    return sets, files


def _load_matrix(layers: list[tuple[Path, str]]) -> tuple[Matrix, list[Finding]]:
    findings: list[Finding] = []
    compat = _compat(layers, findings)
    sets: dict[str, ValidatedSet] = {}
    files: dict[str, Path] = {}
    origins: dict[str, str] = {}
    for root, origin in layers:  # a later layer's set replaces an earlier one's of the same name
        mine, my_files = _folder_sets(root, findings)
        sets.update(mine)
        files.update(my_files)
        origins.update(dict.fromkeys(mine, origin))
    order = sorted(sets)
    return Matrix(root=layers[-1][0], sets={n: sets[n] for n in order}, set_files={n: files[n] for n in order},
                  compat=compat, origins={n: origins[n] for n in order},
                  folders={origin: root for root, origin in layers}), findings


def _err():
    from ..errors import Severity
    return Severity.ERROR
