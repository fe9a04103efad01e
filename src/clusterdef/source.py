"""Load YAML files as plain data, and map definition paths back to file positions.

Files are read through limits.py (regular files, bounded size, nesting, aliases and
integer length checked first). Data is parsed with ruamel's fast safe loader, composed first and then
constructed, as its `load` does; the composed nodes are kept, and positions are indexed from their marks
only when a finding needs a line number, so a clean definition never pays for the index and a located
one never parses the file twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path as FsPath
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.resolver import VersionedResolver

from .errors import DefinitionError, Finding, Path, Severity
from .limits import check_yaml, read_text


@dataclass
class Source:
    """One YAML file: its text, its data, and a lazily built position index."""

    file: str
    text: str
    data: Any = None
    _positions: dict[Path, tuple[int, int]] | None = field(default=None, repr=False)
    _root: Any = field(default=None, repr=False)  # the composed document, until positions are indexed

    @cached_property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    def positions(self) -> dict[Path, tuple[int, int]]:
        if self._positions is None:
            self._positions = _index_positions(self.text, self._root)
            self._root = None
        return self._positions

    def locate(self, path: Path) -> tuple[int, int]:
        """Best (line, column), 1-based, for a definition path: the deepest
        prefix of the path that exists in the file."""
        pos = self.positions()
        p = tuple(path)
        while p:
            if p in pos:
                return pos[p]
            p = p[:-1]
        return (1, 1) if self.text else (0, 0)

    def place(self, finding: Finding) -> Finding:
        """Return the finding with file, line and column filled in."""
        if finding.line:
            return finding
        line, col = self.locate(finding.path)
        return Finding(
            finding.code, finding.severity, finding.path, finding.message,
            finding.hint, self.file, line, col,
        )

    def line_text(self, line: int) -> str:
        if 1 <= line <= len(self.lines):
            return self.lines[line - 1]
        return ""


class _OneVersionResolver(VersionedResolver):
    """ruamel's resolver, with the implicit-tag table looked up once per load instead of once per
    scalar. VersionedResolver.versioned_resolver asks `processing_version` for every scalar, which
    tries the pure scanner's `%YAML` directive first: the C parser has no such scanner, so each
    call raises and catches an AttributeError, then falls back to the loader's version, which does
    not change during a load (ruamel.yaml 0.19.1, resolver.py). A third of the C load's time for
    the estate (35 -> 23 ms); the data is the same (compared for every YAML file under src/ and
    matrices/)."""

    _table: Any = None

    @property
    def versioned_resolver(self) -> Any:
        if self._table is None:
            self._table = VersionedResolver.versioned_resolver.fget(self)  # type: ignore[attr-defined]
        return self._table


def safe_yaml() -> YAML:
    """ruamel's safe loader on the C parser (libyaml), as every data file of clusterdef is read."""
    yaml = YAML(typ="safe", pure=False)
    yaml.Resolver = _OneVersionResolver
    return yaml


def _index_positions(text: str, root: Any = None) -> dict[Path, tuple[int, int]]:
    """(line, column), 1-based, of every key and sequence item, from the marks of the C composer's
    nodes (`root`, kept from the load; composed from `text` when not given). Keys are constructed as
    the safe loader constructs them, so the paths are the data's; a merge key's mappings are walked in
    place, where the data has their keys, after the mapping's own keys, which win as they do in the data."""
    from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

    yaml = safe_yaml()
    if root is None:
        try:
            root = yaml.compose(text)
        except YAMLError:
            return {}
    key_of = yaml.constructor.construct_object
    out: dict[Path, tuple[int, int]] = {}
    # iterative: limits.check_yaml bounds the depth and what aliases expand to before this runs
    todo: list[tuple[Any, Path]] = [(root, ())]
    while todo:
        node, path = todo.pop()
        if isinstance(node, MappingNode):
            below = len(todo)  # merged mappings go under this mapping's own values: walked after them
            for key_node, value in node.value:
                if not isinstance(key_node, ScalarNode):
                    continue
                if key_node.tag == "tag:yaml.org,2002:merge":
                    merged = value.value if isinstance(value, SequenceNode) else [value]
                    todo[below:below] = [(m, path) for m in merged]
                    continue
                child = path + (key_of(key_node),)
                out.setdefault(child, (key_node.start_mark.line + 1, key_node.start_mark.column + 1))
                todo.append((value, child))
        elif isinstance(node, SequenceNode):
            for i, item in enumerate(node.value):
                out.setdefault(path + (i,), (item.start_mark.line + 1, item.start_mark.column + 1))
                todo.append((item, path + (i,)))
    return out


def load_text(text: str, file: str = "<string>") -> Source:
    """Parse YAML text. Raises DefinitionError with a located finding on bad YAML,
    and on nesting, aliases or integers beyond the limits (see limits.py)."""
    check_yaml(text, file)
    yaml = safe_yaml()
    try:
        root = yaml.compose(text)  # then constructed, as yaml.load does (ruamel.yaml 0.19 main.py, get_single_data)
        data = yaml.constructor.construct_document(root) if root is not None else None
    except MarkedYAMLError as exc:
        problem = " ".join(str(x) for x in (exc.context, exc.problem) if x)
        # An unclosed bracket is noticed lines later; point at where it was opened.
        opened = exc.context_mark if exc.context and "flow" in str(exc.context) else None
        mark = opened or exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        col = mark.column + 1 if mark else 0
        if opened and exc.problem_mark:
            problem += f" (noticed at line {exc.problem_mark.line + 1})"
        hint = "check indentation, quoting and that each key appears once in its mapping"
        lines = text.splitlines()
        here = lines[line - 1] if 0 < line <= len(lines) else ""
        if "\t" in here and "\t" not in here.strip():  # a tab in the indentation (or trailing)
            col = here.index("\t") + 1
            problem = f"a tab character at column {col}: YAML does not allow tabs for indentation ({problem})"
            hint = "indent with spaces, never tabs: replace the tab on this line with spaces"
        elif "\t" in here or "tab" in problem.lower():
            col = here.index("\t") + 1 if "\t" in here else col
            problem = f"a tab character at column {col} ({problem})"
            hint = "YAML reads a tab here as neither indentation nor text: replace it with spaces, or quote the value"
        elif "duplicate" in problem.lower():
            hint = "a key may appear only once in a mapping; merge or rename the duplicate"
        elif opened:
            hint = "close the [ or { opened here, or put the value in quotes"
        raise DefinitionError([
            Finding("yaml-syntax", Severity.ERROR, (), f"YAML could not be parsed: {problem}",
                    hint, file, line, col)
        ]) from None
    except YAMLError as exc:
        raise DefinitionError([
            Finding("yaml-syntax", Severity.ERROR, (), f"YAML could not be parsed: {exc}",
                    "check the file is valid YAML", file, 1, 1)
        ]) from None
    return Source(file=file, text=text, data=data, _root=root)


def load_file(path: str | FsPath) -> Source:
    """Read a YAML file within the definition size limit (regular files only) and parse it."""
    return load_text(read_text(path, "definition"), str(path))
