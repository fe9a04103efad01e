"""Deterministic YAML for rendered files, shared by every target that writes YAML."""

from __future__ import annotations

import json
import re
from functools import lru_cache

# A small block-style YAML emitter for JSON-like data. Strings are plain only when every YAML
# reader (1.1 as in Helm/go-yaml, and 1.2) reads them back as the same string; otherwise they are
# double-quoted JSON strings, which are valid YAML. Key order is the order the renderers chose.
_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*")  # fullmatch: `$` also matches before a final newline
_SPECIAL = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}
# json.dumps(s, ensure_ascii=False) builds a JSONEncoder per call (a non-default argument); one encoder,
# the same output (json/__init__.py, Python 3.11)
_QUOTE = json.JSONEncoder(ensure_ascii=False).encode


class Unsafe(str):
    """A string Ansible must never template (a script's text can hold `{#` or `{{`): written with
    Ansible's `!unsafe` tag."""


def _scalar(v) -> str:
    if type(v) is str:
        return _text(v)
    if isinstance(v, Unsafe):
        return "!unsafe " + _QUOTE(str(v))
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float)):
        return json.dumps(v)
    return _text(str(v))


def _text(s: str) -> str:
    if _PLAIN.fullmatch(s) and (len(s) > 5 or s.lower() not in _SPECIAL):  # the specials have at most 5 letters
        return s
    return _QUOTE(s)


@lru_cache(maxsize=4096, typed=True)  # typed: the key True is not the key 1
def _key(k) -> str:
    """A mapping key: the same few hundred keys (metadata, name, labels, ...) over and over."""
    return _scalar(k)


_BLOCK = (dict, list, tuple)


def _emit(v, indent: str, out: list[str]) -> None:
    """Append the lines of a block mapping or sequence (v non-empty) at `indent`."""
    if isinstance(v, dict):
        inner = indent + "  "
        for k, x in v.items():
            key = _key(k)
            if x and isinstance(x, _BLOCK):
                out.append(f"{indent}{key}:")
                _emit(x, indent if isinstance(x, (list, tuple)) else inner, out)
            else:
                out.append(f"{indent}{key}: {_leaf(x)}")
    else:
        inner = indent + "  "
        cut = len(inner)
        for x in v:
            if x and isinstance(x, _BLOCK):
                sub: list[str] = []
                _emit(x, inner, sub)
                out.append(f"{indent}- {sub[0][cut:]}")
                out.extend(sub[1:])
            else:
                out.append(f"{indent}- {_leaf(x)}")


def _leaf(x) -> str:
    if type(x) is str:
        return _text(x)
    if isinstance(x, dict):
        return "{}"
    if isinstance(x, (list, tuple)):
        return "[]"
    return _scalar(x)


def _doc(obj) -> str:
    if isinstance(obj, (dict, list, tuple)) and obj:
        out: list[str] = []
        _emit(obj, "", out)
        return "\n".join(out) + "\n"
    return _leaf(obj) + "\n"


def dump(obj, header: str = "") -> str:
    return _header(header) + _doc(obj)


def dump_all(objs, header: str = "") -> str:
    return _header(header) + "".join("---\n" + _doc(o) for o in objs)


def _header(text: str) -> str:
    return "".join(f"# {ln}".rstrip() + "\n" for ln in text.splitlines()) if text else ""
