"""Quoting for every output language clusterdef writes, in one place.

The model's types (types.py) already refuse what no consumer can carry; this module is
the second wall. Each helper either returns the value written safely for its language or raises
UnsafeValue when the language cannot carry it at all (a newline in a line-oriented config has no
quoting). Values that come from nodes (facts, logs) go through the same helpers.

Templates are rendered with `guarded_env`: its `finalize` hook refuses any interpolated value
outside a small safe alphabet unless a quoting filter produced it, so a template that forgets to
quote fails the render (and the tests) instead of writing a command.
"""

from __future__ import annotations

import re
import shlex

from .types import INVISIBLE


class UnsafeValue(ValueError):
    """A value that the output language cannot carry."""


class Quoted(str):
    """A string already written safely for its output language."""


# What a template may interpolate without a filter: names, versions, addresses, URLs, hostlists,
# numbers. No quotes, `$`, backtick, `;`, `&`, `|`, `<`, `>`, `#`, `\`, newline or control character.
_SAFE = re.compile(r"^[A-Za-z0-9 _.,:=/@+%\[\]()-]*$")


def _one_line(value, language: str) -> str:
    text = str(value)
    bad = next((c for c in text if c in INVISIBLE), None)
    if bad is not None:
        raise UnsafeValue(f"{text[:60]!r} contains U+{ord(bad):04X}, which {language} cannot carry")
    return text


def shell(value) -> Quoted:
    """One shell word (POSIX sh and bash), single-quoted where needed."""
    text = str(value)
    if "\0" in text:
        raise UnsafeValue(f"{text[:60]!r} contains NUL, which a shell word cannot carry")
    return Quoted(shlex.quote(text))


def slurm(value) -> Quoted:
    """A slurm.conf / topology.conf / gres.conf value: one line, no `#` (a comment) and no `"`;
    double-quoted when it holds a space."""
    text = _one_line(value, "slurm.conf")
    if '"' in text or "#" in text or "\\" in text:
        raise UnsafeValue(f"{text[:60]!r}: slurm.conf values cannot carry '\"', '#' or '\\'")
    return Quoted(f'"{text}"' if " " in text or text == "" else text)


def sacctmgr(value) -> Quoted:
    """A single-quoted value in a `sacctmgr load` file (fields are ':'-separated)."""
    text = _one_line(value, "a sacctmgr file")
    if "'" in text or ":" in text or "\\" in text:
        raise UnsafeValue(f"{text[:60]!r}: sacctmgr file values cannot carry \"'\", ':' or '\\'")
    return Quoted(f"'{text}'")


def lua(value) -> Quoted:
    """A Lua string literal (Lua 5.x, "Lexical Conventions"): double-quoted, every byte outside
    printable ASCII and every `"` and `\\` written as a decimal escape `\\ddd`."""
    out = []
    for b in str(value).encode("utf-8"):
        c = chr(b)
        out.append(c if 0x20 <= b < 0x7F and c not in '"\\' else f"\\{b:03d}")
    return Quoted('"' + "".join(out) + '"')


def word(value, language: str) -> Quoted:
    """One token in a line-oriented config that has no quoting (dnsmasq, iPXE, mkosi lists):
    printable, no whitespace, no comment or expansion characters."""
    text = _one_line(value, language)
    if not text or re.search(r"[\s\"'`$#;\\]", text):
        raise UnsafeValue(f"{text[:60]!r} is not a single plain token, as {language} needs")
    return Quoted(text)


def line(value, language: str) -> Quoted:
    """Text on one line of a comment or a free-form value (descriptions in headers)."""
    return Quoted(_one_line(value, language))


def prom_label(value) -> str:
    """A Prometheus text-format label value (backslash, quote and newline escaped)."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def systemd(value) -> Quoted:
    """A value in a systemd unit: one line, '%' doubled (specifiers), quoted when it has spaces."""
    text = _one_line(value, "a systemd unit").replace("%", "%%")
    if '"' in text or "\\" in text:
        raise UnsafeValue(f"{text[:60]!r}: unit values here cannot carry '\"' or '\\'")
    return Quoted(f'"{text}"' if " " in text else text)


def ini(value) -> Quoted:
    """A value in an SSSD (ding-libs INI) file: one line, none of the characters its parser or
    SSSD's own expansion gives a meaning (`#`/`;` comments, `%` specifiers, quotes, backslash)."""
    text = _one_line(value, "sssd.conf")
    if re.search(r"[#;%\"'\\]", text) or text != text.strip():
        raise UnsafeValue(f"{text[:60]!r}: sssd.conf values cannot carry '#', ';', '%', quotes, '\\' "
                          "or surrounding spaces")
    return Quoted(text)


def sudoers_group(value) -> Quoted:
    """A `%group` in a sudoers rule: bare when plain, the whole `"%group"` double-quoted otherwise
    (sudoers(5): a quoted name may hold spaces; `%"group"` is an empty group to visudo)."""
    text = _one_line(value, "sudoers")
    if re.search(r"[\"\\,:=()!#]", text) or not text:
        raise UnsafeValue(f"{text[:60]!r}: a sudoers group cannot carry quotes, backslash, ',', ':', '=', "
                          "'(', ')', '!' or '#'")
    return Quoted(f"%{text}" if re.fullmatch(r"[A-Za-z0-9_.-]+", text) else f'"%{text}"')
_UNIT_SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:_.")


def unit_name(mount: str) -> str:
    """The mount unit's name for a path, as `systemd-escape --path --suffix=mount` writes it:
    slashes trimmed and turned into '-', every other byte outside [A-Za-z0-9:_.] (and a leading '.')
    as \\xNN."""
    path = "/".join(p for p in mount.split("/") if p) or "/"
    if path == "/":
        return "-.mount"
    out = []
    for i, ch in enumerate(path):
        if ch == "/":
            out.append("-")
        elif ch in _UNIT_SAFE and not (i == 0 and ch == "."):
            out.append(ch)
        else:
            out.extend(f"\\x{b:02x}" for b in ch.encode())
    return "".join(out) + ".mount"


def _finalize(value):
    if value is None or isinstance(value, (Quoted, bool, int, float)):
        return value
    plain(value)
    return value


def plain(value) -> str:
    """`value` as text a template may interpolate without a filter (the check of _finalize), for lines a
    renderer builds itself; UnsafeValue otherwise."""
    text = str(value)
    if not _SAFE.fullmatch(text):  # fullmatch: `$` alone also matches before a final newline
        raise UnsafeValue(f"unquoted value {text[:60]!r} in a template: pass it through a quoting filter "
                          "(sh, slurm, word, line) or narrow its type")
    return text


def plain_all(values) -> list[Quoted]:
    """Each value as plain() has it, checked in one scan for the thousands a renderer builds per node:
    _SAFE is a class of characters that has the space, so the values joined by spaces pass it exactly
    when each one does. UnsafeValue names the first that does not."""
    texts = [str(v) for v in values]
    if not _SAFE.fullmatch(" ".join(texts)):
        for text in texts:
            plain(text)
    return [Quoted(text) for text in texts]


def _line_filter(value, language: str = "this file") -> Quoted:
    return line(value, language)


def _word_filter(value, language: str = "this file") -> Quoted:
    return word(value, language)


def guarded_env(package: str, folder: str = "templates", **options):
    """A Jinja environment whose templates can only interpolate safe or explicitly quoted values."""
    from jinja2 import Environment, StrictUndefined

    from .jinja_precompiled import PrecompiledLoader  # the templates' code compiled ahead (clusterdef/_jinja/)

    env = Environment(loader=PrecompiledLoader(package, folder), undefined=StrictUndefined, keep_trailing_newline=True,
                      trim_blocks=True, lstrip_blocks=True, autoescape=False, finalize=_finalize, **options)
    env.filters.update({
        "sh": shell, "q": shell, "slurm": slurm, "systemd": systemd,
        "line": _line_filter, "word": _word_filter,
    })
    return env
