"""From a definition file to a model plus every finding, placed at file:line:column."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from pydantic import ValidationError

from ..errors import DefinitionError, Finding, Severity, has_errors
from ..limits import read_text
from ..matrix.load import Matrix, load_matrix, matrices_root
from ..model import Definition
from ..source import Source, load_file
from .registry import Context, run_checks
from .schema import schema_findings, text_findings
from .secrets import secret_findings


@dataclass
class Result:
    file: str
    source: Source | None
    definition: Definition | None
    matrix: Matrix | None
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.definition is not None and not has_errors(self.findings)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.WARNING]


def _order(findings: list[Finding]) -> list[Finding]:
    rank = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
    unique = list(dict.fromkeys(findings))
    return sorted(unique, key=lambda f: (f.file, f.line, f.column, rank[f.severity], f.code))


def validate_source(source: Source, matrix: Matrix, today: date, base_dir: Path | None = None) -> Result:
    result = Result(source.file, source, None, matrix)
    data = source.data
    if not isinstance(data, dict):
        result.findings.append(source.place(Finding(
            "not-a-mapping", Severity.ERROR, (),
            "the definition must be a YAML mapping with `cluster`, `hardware`, `images`, `nodes` and `network`",
            "start from clusters/lab.yaml")))
        return result
    net = text_findings(data)
    net += [f for f in secret_findings(data) if f.path not in {n.path for n in net}]
    try:
        definition = Definition.model_validate(data)
    except ValidationError as exc:
        flagged = {f.path for f in net}
        schema = [f for f in schema_findings(exc, data) if f.path not in flagged]
        result.findings = _order([source.place(f) for f in net + schema])
        return result
    if net:  # free-text fields (descriptions) or literal secrets that the model let through
        result.findings = _order([source.place(f) for f in net])
        return result
    ctx = Context(definition, matrix, today, base_dir or Path(source.file).resolve().parent, source.file)
    result.definition = definition
    result.findings = _order([source.place(f) for f in list(definition.queue_policy_findings) + list(run_checks(ctx))])
    return result


def _text_only(path) -> Source | None:
    """The file's text without data, so a YAML syntax error can still show its line."""
    try:
        return Source(str(path), read_text(path, "definition"))
    except DefinitionError:
        return None


def validate_file(path: str | Path, matrices: str | Path | None = None, today: date | None = None) -> Result:
    """Load and validate one definition file. Never raises on bad input."""
    today = today or date.today()
    try:
        source = load_file(path)
    except DefinitionError as exc:
        return Result(str(path), _text_only(path), None, None, list(exc.findings))
    root = matrices_root(matrices, path)
    if root is None or not (root / "sets").is_dir():
        return Result(str(path), source, None, None, [source.place(Finding(
            "matrices-not-found", Severity.ERROR, ("cluster", "matrix"),
            "no matrices directory found"
            + (f" at {root}" if root else " beside or above the definition, and none bundled"),
            "pass --matrices DIR or set CLUSTERDEF_MATRICES to the folder holding sets/ and compat/"))])
    matrix, matrix_findings = load_matrix(root)
    result = validate_source(source, matrix, today)
    if matrix_findings:
        result.findings = _order(matrix_findings + result.findings)
    return result
