"""Turn pydantic validation errors into located findings with helpful hints, for any model: the
definition (validate/) and the validated sets and compatibility files (matrix/) both use it, so it sits
below both and imports neither."""

from __future__ import annotations

import difflib
import re
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ValidationError

from .errors import Finding, Path, Severity


@lru_cache(maxsize=8)
def known_fields(roots: tuple[type[BaseModel], ...]) -> tuple[str, ...]:
    """Every field name of the root models and of the models nested in them (the "did you mean" list)."""
    seen: set[str] = set()

    def walk(model: type[BaseModel]) -> None:
        for name, info in model.model_fields.items():
            seen.add(name)
            for sub in _models_in(info.annotation):
                if sub.__name__ not in _visited:
                    _visited.add(sub.__name__)
                    walk(sub)

    _visited: set[str] = set()
    for root in roots:
        walk(root)
    return tuple(sorted(seen))


def _models_in(annotation: Any):
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for arg in getattr(annotation, "__args__", ()) or ():
        yield from _models_in(arg)
    meta = getattr(annotation, "__origin__", None)
    if meta is not None and isinstance(meta, type) and issubclass(meta, BaseModel):
        yield meta


def _data_path(loc: tuple, data: Any) -> Path:
    """Drop the segments pydantic adds for union members and discriminator tags,
    so the path addresses what is in the file."""
    out: list[str | int] = []
    node = data
    last = len(loc) - 1
    for i, part in enumerate(loc):
        if part == "[key]":  # pydantic's marker for an invalid mapping key: the key itself is the place
            continue
        if isinstance(node, dict):
            key = part if part in node else str(part) if str(part) in node else None
            if key is not None:
                out.append(key)
                node = node[key]
            elif i == last:  # a missing key names the place it should be
                out.append(part)
            # otherwise a union member or tag name that is not in the file
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            out.append(part)
            node = node[part]
    return tuple(out)


def describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def schema_findings(exc: ValidationError, data: Any, prefix: Path = (),
                    roots: tuple[type[BaseModel], ...] = ()) -> list[Finding]:
    """Located findings for a pydantic error of `data`; an unknown field's hint names the closest field of
    `roots` (the models validated, with those nested in them)."""
    findings = []
    errors = exc.errors(include_url=False)
    item_locs = [tuple(e["loc"]) for e in errors]
    for err in errors:
        kind = err["type"]
        loc = tuple(err["loc"])
        if kind == "too_short" and any(len(o) > len(loc) and o[:len(loc)] == loc for o in item_locs):
            continue  # "at least 1 item after validation": the item's own error says why
        path = prefix + _data_path(loc, data)
        field = str(path[-1]) if path else "<root>"
        if path and isinstance(path[-1], int):  # a list item: name the list and the index
            field = f"{path[-2]}[{path[-1]}]" if len(path) > 1 else f"[{path[-1]}]"
        parent = ".".join(str(p) for p in path[:-1]) or "the top level"
        value = err.get("input")
        msg = err["msg"]
        if kind == "extra_forbidden":
            close = difflib.get_close_matches(field, known_fields(roots), n=1, cutoff=0.75)
            hint = (f"did you mean `{close[0]}`?" if close
                    else f"remove `{field}`; see `clusterdef schema` for the fields allowed here")
            findings.append(Finding("unknown-field", Severity.ERROR, path,
                                    f"unknown field `{field}` in {parent}", hint))
        elif kind == "missing":
            findings.append(Finding("missing-field", Severity.ERROR, path,
                                    f"missing required field `{field}` in {parent}",
                                    f"add `{field}:` under {parent}"))
        elif kind == "union_tag_invalid" or kind == "union_tag_not_found":
            ctx = err.get("ctx", {})
            tag = str(ctx.get("discriminator", "kind")).strip("'\"")
            if kind == "union_tag_invalid":
                path = path + (tag,)
            findings.append(Finding("invalid-value", Severity.ERROR, path,
                                    f"{field}: {tag} {describe(ctx.get('tag', value))} is not one of "
                                    f"{ctx.get('expected_tags', 'the documented kinds')}",
                                    f"set `{tag}` to one of {ctx.get('expected_tags', 'the documented kinds')}"))
        elif kind == "string_type" and isinstance(value, bool):  # a bool is an int to isinstance
            word = "true" if value else "false"
            findings.append(Finding("type-error", Severity.ERROR, path,
                                    f"{field}: expected text, got the boolean {word}",
                                    f"quote it: YAML reads an unquoted {word} as a boolean (write \"{word}\")"))
        elif kind == "string_type" and isinstance(value, (int, float)):
            findings.append(Finding("type-error", Severity.ERROR, path,
                                    f"{field}: expected text, got the number {value!r}",
                                    f"quote it: YAML reads {value!r} as a number (write \"{value}\")"))
        elif kind == "string_pattern_mismatch":
            from .types import HINTS

            pattern = err.get("ctx", {}).get("pattern", "")
            hint = HINTS.get(pattern, "see `clusterdef schema` for the expected format")
            message = f"{field}: {describe(value)} does not match the expected format"
            if "[0-9a-f]{2}" in pattern:
                hint = "MAC addresses are lower-case and colon-separated, e.g. 52:54:00:12:34:56"
                if isinstance(value, str) and re.fullmatch(pattern, value.lower()):
                    # the same rule as a CSV inventory: upper case is refused, never silently changed
                    message = f"{field}: MAC {describe(value)} has upper-case letters (write {value.lower()})"
                    hint = ("MAC addresses are lower-case and colon-separated, in a `list` as in a CSV inventory "
                            "(docs/provisioning.md)")
            findings.append(Finding("invalid-value", Severity.ERROR, path, message, hint))
        elif kind.endswith("_parsing"):
            findings.append(Finding("type-error", Severity.ERROR, path,
                                    f"{field}: {msg} (got {describe(value)})",
                                    "check the field's type in `clusterdef schema`"))
        elif kind.endswith("_type") or kind in ("model_type", "model_attributes_type", "dict_type", "list_type"):
            findings.append(Finding("type-error", Severity.ERROR, path,
                                    f"{field}: {msg} (got {describe(value)})",
                                    "check the field's type in `clusterdef schema`"))
        else:
            findings.append(Finding("invalid-value", Severity.ERROR, path,
                                    f"{field}: {msg} (got {describe(value)})",
                                    "see `clusterdef schema` for allowed values"))
    return findings
