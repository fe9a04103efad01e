"""Bounded reading of user files: every file clusterdef reads from a user goes through here.

A file is read only when it is a regular file (a FIFO, a device such as /dev/zero or a
folder is refused before a byte is read; the open is non-blocking so a FIFO with no
writer never hangs), and at most its kind's size limit plus one byte is read:

    definition  16 MiB  YAML definitions and matrix files; the 4,096-node estate is 44 KiB
    inventory   16 MiB  MAC CSV; a `host,mac` line is ~30 bytes, 16,384 nodes ~0.5 MiB
    facts       64 MiB  one node's facts are ~1 KiB; a single list for 16,384 nodes ~16 MiB
    log        no limit nccl-tests output is streamed line by line (iter_lines): NCCL_DEBUG=INFO from a few
                        thousand ranks is hundreds of MiB, so memory is bounded by the line length
                        (MAX_STREAM_LINE) and the parser's own caps, not by refusing the file
    baseline     4 MiB  a few dozen entries of ~30 sizes each are a few KiB
    plan       256 MiB  a plan file carries the unified diff of every rendered file
    manifest    16 MiB  an output folder's manifest.json: ~150 bytes per rendered file
    run record 256 MiB  apply's record: per step the changed tasks and folded host lists (--resume reads it)
    lldp        16 MiB  one host's `lldpctl -f json`: ~1.5 KiB per neighbor, a host has a few dozen ports

The limits are far above any real file and far below what hurts a machine; a kind whose real
files are not bounded (a log) is streamed instead.

Parsed YAML and JSON are checked before they are built into Python objects:
nesting deeper than MAX_DEPTH (the composers recurse; a definition is ~8 deep), aliases
that expand to more than MAX_ALIAS_NODES nodes (a billion-laughs file is 1 KiB), and
integers longer than MAX_INT_DIGITS digits (Python refuses >4,300; no field needs 100).
The YAML check walks parser events once, keeping the expanded size of each anchor, so
nested aliases are counted at their full expansion in time linear in the file.
Every problem is a located Finding raised as InputError (a DefinitionError).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Iterator

from .errors import DefinitionError, Finding, Severity

MiB = 1 << 20
LIMITS = {"definition": 16 * MiB, "inventory": 16 * MiB, "facts": 64 * MiB,
          "baseline": 4 * MiB, "plan": 256 * MiB, "manifest": 16 * MiB, "run record": 256 * MiB,
          "ibnetdiscover": 64 * MiB, "rehearsal": 4 * MiB, "lldp": 16 * MiB}
MAX_DEPTH = 64
MAX_ALIAS_NODES = 100_000
MAX_INT_DIGITS = 100

_LONG_INT = re.compile(r"[-+]?[0-9_]{%d,}" % (MAX_INT_DIGITS + 1))


class InputError(DefinitionError):
    """A user file that cannot be read or parsed within the limits; carries one finding."""


def _fail(code: str, file: str, message: str, hint: str, line: int = 0, col: int = 0) -> InputError:
    return InputError([Finding(code, Severity.ERROR, (), message, hint, file, line, col if line else 0)])


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _open_regular(path: str | Path, kind: str) -> tuple[int, os.stat_result]:
    """A descriptor of the regular file at `path` and its status; InputError for anything else."""
    name = str(path)
    try:
        # O_NONBLOCK: opening a FIFO without a writer returns at once instead of hanging
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise _fail("file-not-found", name, f"{name} does not exist", "check the path") from None
    except OSError as exc:
        raise _fail("file-unreadable", name, f"cannot read {name}: {exc.strerror or exc}",
                    f"the {kind} must be a readable file") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _fail("file-not-regular", name, f"{name} is {_kind_of(st.st_mode)}, not a regular file",
                        f"pass the {kind} file itself")
    except OSError as exc:
        os.close(fd)
        raise _fail("file-unreadable", name, f"cannot read {name}: {exc.strerror or exc}",
                    f"the {kind} must be a readable file") from None
    except InputError:
        os.close(fd)
        raise
    return fd, st


# The longest line iter_lines hands over; the rest of a longer line is read past, never held.
MAX_STREAM_LINE = 64 * 1024


def iter_lines(path: str | Path, kind: str) -> Iterator[str]:
    """The text lines of a regular file (as str.splitlines() would split the whole text, UTF-8 with
    replacement), read a buffer at a time: a line longer than MAX_STREAM_LINE bytes comes back as one
    empty line, so line numbers stay right and memory stays bounded. InputError as read_bytes, raised
    before the first line."""
    fd, _ = _open_regular(path, kind)
    name = str(path)

    def lines() -> Iterator[str]:
        try:
            with os.fdopen(fd, "rb", buffering=MiB) as fh:
                while True:
                    chunk = fh.readline(MAX_STREAM_LINE + 1)
                    if not chunk:
                        return
                    if len(chunk) > MAX_STREAM_LINE and not chunk.endswith(b"\n"):
                        while chunk and not chunk.endswith(b"\n"):  # read past the rest of the line
                            chunk = fh.readline(MiB)
                        yield ""
                        continue
                    yield from chunk.decode("utf-8", errors="replace").splitlines() or [""]
        except OSError as exc:
            raise _fail("file-unreadable", name, f"cannot read {name}: {exc.strerror or exc}",
                        f"the {kind} must be a readable file") from None

    return lines()


def read_bytes(path: str | Path, kind: str) -> bytes:
    """The file's bytes; InputError unless it is a regular file within LIMITS[kind]."""
    name, limit = str(path), LIMITS[kind]
    fd, st = _open_regular(path, kind)
    try:
        if st.st_size > limit:
            raise _too_large(name, kind, limit)
        chunks, total = [], 0
        while total <= limit:  # the size can change under us: read at most limit + 1 bytes
            chunk = os.read(fd, min(MiB, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise _too_large(name, kind, limit)
        return b"".join(chunks)
    except OSError as exc:
        raise _fail("file-unreadable", name, f"cannot read {name}: {exc.strerror or exc}",
                    f"the {kind} must be a readable file") from None
    finally:
        os.close(fd)


def _too_large(name: str, kind: str, limit: int) -> InputError:
    return _fail("file-too-large", name, f"{name} is larger than {limit // MiB} MiB, the limit for a {kind} file",
                 f"a real {kind} file is far smaller; check this is the right file")


def read_text(path: str | Path, kind: str) -> str:
    """read_bytes decoded as UTF-8 (InputError `file-unreadable` naming the byte otherwise)."""
    data = read_bytes(path, kind)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail("file-unreadable", str(path), f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                    f"the {kind} must be a UTF-8 text file") from None


# --------------------------------------------------------------------------- YAML

def check_yaml(text: str, file: str) -> None:
    """Refuse deep nesting, alias expansion and long integers from the parser's events,
    before anything is composed (the composer recurses). Syntax errors are left to the
    loader, which reports them with their line."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError
    from ruamel.yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, ScalarEvent

    sizes: dict[str, int] = {}  # anchor -> number of nodes it stands for, expanded
    stack: list[list] = []  # open collections: [expanded size so far, anchor]
    via_alias = 0

    def add(n: int) -> None:
        if stack:
            stack[-1][0] += n

    try:
        for ev in YAML(typ="safe", pure=False).parse(text):
            mark = ev.start_mark
            if isinstance(ev, CollectionStartEvent):
                stack.append([1, ev.anchor])
                if len(stack) > MAX_DEPTH:
                    raise _fail("nesting-too-deep", file, f"YAML nested more than {MAX_DEPTH} levels deep",
                                "a definition needs a handful of levels; flatten the structure",
                                mark.line + 1, mark.column + 1)
            elif isinstance(ev, CollectionEndEvent):
                n, anchor = stack.pop() if stack else (1, None)
                if anchor:
                    sizes[anchor] = n
                add(n)
            elif isinstance(ev, ScalarEvent):
                if ev.anchor:
                    sizes[ev.anchor] = 1
                if not ev.style and _LONG_INT.fullmatch(ev.value):
                    raise _fail("number-too-long", file, f"an integer of {len(ev.value)} characters "
                                f"(more than {MAX_INT_DIGITS} digits)",
                                "no field takes a number this long; quote it if it is meant as text",
                                mark.line + 1, mark.column + 1)
                add(1)
            elif isinstance(ev, AliasEvent):
                n = sizes.get(ev.anchor, 1)
                via_alias += n
                if via_alias > MAX_ALIAS_NODES:
                    raise _fail("yaml-aliases", file, f"YAML aliases expand to more than {MAX_ALIAS_NODES:,} "
                                "nodes (an alias bomb?)", "write the repeated parts out, or use fewer, "
                                "smaller anchors", mark.line + 1, mark.column + 1)
                add(n)
    except YAMLError:
        return  # the loader reports it with its position


# --------------------------------------------------------------------------- JSON

# strings masked out (same length, so offsets still give lines) before brackets and numbers are scanned
_JSON_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_JSON_TOKEN = re.compile(r"[\[\]{}]|(?<![\w.+-])-?[0-9]{%d,}(?![\w.])" % (MAX_INT_DIGITS + 1))


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def load_json(path: str | Path, kind: str) -> Any:
    """Parse a JSON file read within limits; InputError for too deep nesting, long integers
    and invalid JSON (`json-syntax`, with its line)."""
    name = str(path)
    text = read_text(path, kind)
    masked = _JSON_STRING.sub(lambda m: '"' + " " * (len(m[0]) - 2) + '"', text)
    depth = 0
    for m in _JSON_TOKEN.finditer(masked):
        tok = m[0]
        if tok in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise _fail("nesting-too-deep", name, f"JSON nested more than {MAX_DEPTH} levels deep",
                            f"a {kind} file needs a handful of levels", *_line_col(text, m.start()))
        elif tok in "]}":
            depth -= 1
        else:
            raise _fail("number-too-long", name, f"an integer of {len(tok)} characters (more than "
                        f"{MAX_INT_DIGITS} digits)", "no field takes a number this long",
                        *_line_col(text, m.start()))
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        line, col = (exc.lineno, exc.colno) if isinstance(exc, json.JSONDecodeError) else (0, 0)
        raise _fail("json-syntax", name, f"invalid JSON: {getattr(exc, 'msg', exc)}",
                    f"the {kind} must be valid JSON", line, col) from None
