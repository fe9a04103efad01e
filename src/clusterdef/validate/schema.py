"""A definition's shape: pydantic's errors as located findings (schema_errors.py, with the definition's
fields for "did you mean"), and the text net that runs before the model."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..errors import Finding, Path, Severity
from ..schema_errors import describe, schema_findings as _schema_findings


def schema_findings(exc: ValidationError, data: Any, prefix: Path = ()) -> list[Finding]:
    """Located findings for a definition's pydantic error."""
    from ..matrix.model import ValidatedSet
    from ..model import Definition

    return _schema_findings(exc, data, prefix, (Definition, ValidatedSet))


def text_findings(data: Any, prefix: Path = ()) -> list[Finding]:
    """The text net: every key and string anywhere in the data, checked for control, bidi and
    zero-width characters before the model sees it (iteratively: depth is bounded by the loader,
    not by Python's stack). One located finding per offending string."""
    from ..types import INVISIBLE

    findings: list[Finding] = []
    stack: list[tuple[Path, Any]] = [(prefix, data)]
    while stack:
        path, node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            child = path + (key,)
            for text, what in ((key, "key"), (value, "value")):
                if isinstance(text, str) and not INVISIBLE.isdisjoint(text):
                    bad = next(c for c in text if c in INVISIBLE)
                    name = f"{child[-2]}[{key}]" if isinstance(key, int) and len(child) > 1 else str(key)
                    findings.append(Finding(
                        "control-character", Severity.ERROR, child,
                        f"{name}: the {what} {describe(text)} contains U+{ord(bad):04X}, a control, "
                        "bidi or zero-width character",
                        "definitions are plain one-line text: remove the character (a newline in a value "
                        "would add lines to rendered files)"))
            if isinstance(value, (dict, list)):
                stack.append((child, value))
    findings.reverse()
    return findings
