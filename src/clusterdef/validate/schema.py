"""Turn pydantic validation errors into located findings with helpful hints."""

from __future__ import annotations

import difflib
import re
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import Finding, Path, Severity


@lru_cache(maxsize=1)
def _known_fields() -> tuple[str, ...]:
    from ..matrix.model import ValidatedSet
    from ..model import Definition

    seen: set[str] = set()

    def walk(model: type[BaseModel]) -> None:
        for name, info in model.model_fields.items():
            seen.add(name)
            for sub in _models_in(info.annotation):
                if sub.__name__ not in _visited:
                    _visited.add(sub.__name__)
                    walk(sub)

    _visited: set[str] = set()
    walk(Definition)
    walk(ValidatedSet)
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


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def schema_findings(exc: ValidationError, data: Any, prefix: Path = ()) -> list[Finding]:
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
            close = difflib.get_close_matches(field, _known_fields(), n=1, cutoff=0.75)
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
                                    f"{field}: {tag} {_describe(ctx.get('tag', value))} is not one of "
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
            from ..model.types import HINTS

            pattern = err.get("ctx", {}).get("pattern", "")
            hint = HINTS.get(pattern, "see `clusterdef schema` for the expected format")
            message = f"{field}: {_describe(value)} does not match the expected format"
            if "[0-9a-f]{2}" in pattern:
                hint = "MAC addresses are lower-case and colon-separated, e.g. 52:54:00:12:34:56"
                if isinstance(value, str) and re.fullmatch(pattern, value.lower()):
                    # the same rule as a CSV inventory: upper case is refused, never silently changed
                    message = f"{field}: MAC {_describe(value)} has upper-case letters (write {value.lower()})"
                    hint = ("MAC addresses are lower-case and colon-separated, in a `list` as in a CSV inventory "
                            "(docs/provisioning.md)")
            findings.append(Finding("invalid-value", Severity.ERROR, path, message, hint))
        elif kind.endswith("_parsing"):
            findings.append(Finding("type-error", Severity.ERROR, path,
                                    f"{field}: {msg} (got {_describe(value)})",
                                    "check the field's type in `clusterdef schema`"))
        elif kind.endswith("_type") or kind in ("model_type", "model_attributes_type", "dict_type", "list_type"):
            findings.append(Finding("type-error", Severity.ERROR, path,
                                    f"{field}: {msg} (got {_describe(value)})",
                                    "check the field's type in `clusterdef schema`"))
        else:
            findings.append(Finding("invalid-value", Severity.ERROR, path,
                                    f"{field}: {msg} (got {_describe(value)})",
                                    "see `clusterdef schema` for allowed values"))
    return findings


def text_findings(data: Any, prefix: Path = ()) -> list[Finding]:
    """The text net: every key and string anywhere in the data, checked for control, bidi and
    zero-width characters before the model sees it (iteratively: depth is bounded by the loader,
    not by Python's stack). One located finding per offending string."""
    from ..model.types import INVISIBLE

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
                        f"{name}: the {what} {_describe(text)} contains U+{ord(bad):04X}, a control, "
                        "bidi or zero-width character",
                        "definitions are plain one-line text: remove the character (a newline in a value "
                        "would add lines to rendered files)"))
            if isinstance(value, (dict, list)):
                stack.append((child, value))
    findings.reverse()
    return findings
