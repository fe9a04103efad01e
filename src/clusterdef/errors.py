"""Findings: the one currency of validation. Every problem carries a code, a
severity, where it is in the definition (a path) and in the file (line:column),
a message and a hint."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Iterable, TypeVar

Path = tuple[str | int, ...]
T = TypeVar("T")


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Finding:
    code: str
    severity: Severity
    path: Path
    message: str
    hint: str = ""
    file: str = ""
    line: int = 0  # 1-based; 0 when unknown
    column: int = 0  # 1-based; 0 when unknown

    @property
    def dotted(self) -> str:
        return dotted(self.path)

    @property
    def where(self) -> str:
        if not self.file:
            return "<definition>"
        if self.line:
            return f"{self.file}:{self.line}:{self.column or 1}"
        return self.file

    def to_json(self) -> dict:
        return {
            "code": self.code,
            "severity": self.severity.value,
            "path": self.dotted,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "message": self.message,
            "hint": self.hint,
        }


def dotted(path: Iterable[str | int]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<root>"


def error(code: str, path: Path, message: str, hint: str = "") -> Finding:
    return Finding(code, Severity.ERROR, tuple(path), message, hint)


def warning(code: str, path: Path, message: str, hint: str = "") -> Finding:
    return Finding(code, Severity.WARNING, tuple(path), message, hint)


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(f.severity is Severity.ERROR for f in findings)


def present(value: T | None, what: str) -> T:
    """`value`, which the caller's guard ensures is set (a renderer runs only when its section is in
    the definition, a check only where validation found it): a None here is a bug in clusterdef,
    named as such rather than surfacing as an AttributeError further on."""
    if value is None:
        raise ValueError(f"{what} is not set, yet this code runs only when it is (a bug in clusterdef)")
    return value


@dataclass
class DefinitionError(Exception):
    """Raised when a definition cannot be loaded or validated; carries every finding."""

    findings: list[Finding] = field(default_factory=list)

    def __str__(self) -> str:
        return "; ".join(f"{f.where}: {f.code} {f.message}" for f in self.findings)
