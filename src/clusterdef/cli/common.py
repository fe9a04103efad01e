"""What the verb modules share: the two consoles, the exit codes, the options several verbs take
(--matrices, --today, --format, --drain, --prometheus), the argument types, and the error printing
that ends a verb with exit 2."""

from __future__ import annotations

import argparse
import inspect
import sys
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Optional

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:  # for annotations only: the verbs import what they use (a light start)
    from ..matrix.load import Matrix
    from ..model import Definition

out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

EXIT_OK, EXIT_WARN, EXIT_BAD = 0, 1, 2

FORMATS = ("text", "json")
TABLE_FORMATS = ("text", "json", "markdown")
FABRIC_KINDS = ("infiniband", "roce", "ethernet")


# --------------------------------------------------------------------------- parsing

def add_verb(verbs: Any, name: str, run: Callable[..., None], long_running: bool = False) -> argparse.ArgumentParser:
    """The sub-command `name` that runs `run`: its docstring is the description, the first paragraph
    the one-line help in the verb list. A `long_running` verb (it waits on other processes or streams
    input of any length) keeps Python's cycle collector and ordinary exit; the others run without them (cli.main)."""
    doc = inspect.getdoc(run) or ""
    sub = verbs.add_parser(name, help=doc.split("\n\n")[0].replace("\n", " "), description=doc,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    sub.set_defaults(_verb=run, _long_running=long_running)
    return sub


def add_group(verbs: Any, name: str, text: str) -> Any:
    """A verb family (`matrix list`, `matrix show`): its own sub-commands under `name`."""
    group = verbs.add_parser(name, help=text, description=text)
    group.set_defaults(_group=group)
    return group.add_subparsers(dest="sub_verb", metavar="VERB")


def choice(*values: str) -> Callable[[str], str]:
    """An argument type: one of `values` (the message names them all)."""
    def convert(value: str) -> str:
        if value not in values:
            raise argparse.ArgumentTypeError(f"{value!r}: choose from {', '.join(values)}")
        return value
    convert.__name__ = "format"
    return convert


def min_int(low: int | None) -> Callable[[str], int]:
    """An argument type: a whole number in ASCII digits, at least `low`."""
    def convert(value: str) -> int:
        from ..textnum import whole

        n = whole(value)
        if n is None:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number (ASCII digits)")
        if low is not None and n < low:
            raise argparse.ArgumentTypeError(f"{n} is below {low}")
        return n
    convert.__name__ = "number"
    return convert


def add_definition(sub: argparse.ArgumentParser, help: str = "Cluster definition (YAML).") -> None:
    sub.add_argument("definition", help=help, type=Path, metavar="DEFINITION")


def add_format(sub: argparse.ArgumentParser, values: tuple[str, ...] = FORMATS, help: Optional[str] = None) -> None:
    sub.add_argument("--format", "-f", dest="fmt", type=choice(*values), default=values[0],
                     metavar="{" + ",".join(values) + "}", help=help)


def add_matrices(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--matrices", "-m", type=Path, default=None, metavar="MATRICES",
                     help="Site folder with sets/ and compat/, over the sets bundled with clusterdef (default: "
                          "nearest matrices/ beside or above the definition, or $CLUSTERDEF_MATRICES; none: the "
                          "bundled sets alone).")


def add_today(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--today", default=None, metavar="DATE",
                     help="Date for lifecycle checks, YYYY-MM-DD (default: today).")


def add_drain_prom(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--drain", type=Path, default=None, metavar="DRAIN",
                     help="Write scontrol drain / kubectl taint lines here.")
    sub.add_argument("--prometheus", dest="prom", type=Path, default=None, metavar="PROMETHEUS",
                     help="Write a Prometheus text-format file here.")


# --------------------------------------------------------------------------- ways out

def today(value: Optional[str]) -> date:
    if not value:
        return date.today()
    try:
        return date.fromisoformat(value)
    except ValueError:
        err.print(f"[red]error[/]: --today {escape(repr(value))} is not a date; use YYYY-MM-DD")
        raise SystemExit(EXIT_BAD)


def instant(option: str, value: Optional[str]):
    """An ISO 8601 instant with its zone (--start, --now), None when not given; a bare local time would be
    read in the machine's zone, so it is refused (exit 2)."""
    from datetime import datetime

    if value is None:
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        at = None
    if at is None or at.tzinfo is None:
        err.print(f"[red]error[/]: {option} {escape(repr(value))} is not an ISO 8601 time with a zone; "
                  "use e.g. 2026-12-08T07:00+01:00")
        raise SystemExit(EXIT_BAD)
    return at


def bad_path(message: str) -> NoReturn:
    """Print an error about a path (escaped: paths may hold [brackets]) and exit 2."""
    err.print(f"[red]error[/]: {escape(message)}")
    raise SystemExit(EXIT_BAD)


def check_outputs(*paths: Optional[Path]) -> None:
    """Exit 2 before any work when an output file path is a folder, a FIFO or a device."""
    from ..writer import OutputError, check_file_target

    for path in paths:
        try:
            if path is not None:
                check_file_target(path)
        except OutputError as exc:
            bad_path(str(exc))


def write_file(path: Path, text: str) -> None:
    """Write an output file atomically; exit 2 naming it when that is impossible."""
    from ..writer import OutputError, write_file_atomic

    try:
        write_file_atomic(path, text)
    except OutputError as exc:
        bad_path(str(exc))


def report(result, fmt: str, console: Console) -> None:
    """A validation result as text on `console`, or as JSON on stdout."""
    from ..validate.report import print_text, summary_line, to_json

    if fmt == "json":
        sys.stdout.write(to_json(result.file, result.findings, result.ok) + "\n")
        return
    print_text(console, result.findings, {result.file: result.source} if result.source else {})
    if result.findings:
        console.print(f"{escape(str(result.file))}: {escape(str(summary_line(result.findings)))}")


def validated(result) -> tuple[Definition, Matrix]:
    """The definition and matrix of a result that validated (ok: both are set)."""
    assert result.definition is not None and result.matrix is not None
    return result.definition, result.matrix


def valid(result) -> tuple[Definition, Matrix]:
    """Exit 2 with the findings unless the definition validated; else its definition and matrix."""
    if not result.ok:
        report(result, "text", err)
        raise SystemExit(EXIT_BAD)
    return validated(result)


def print_findings(findings, sources) -> None:
    from ..validate.report import print_text

    print_text(err, findings, sources)


def print_warnings(warnings: list[str]) -> None:
    for w in warnings:
        err.print(f"[yellow]warning[/]: {escape(w)}")


def load_matrix(matrices: Optional[Path]):
    """The validated sets of --matrices (or the nearest matrices/); exit 2 when there are none or
    they do not load."""
    from ..matrix.load import load_matrix as load, matrices_root
    from ..validate.report import print_text

    root = matrices_root(matrices, None)
    if root is None or not (Path(root) / "sets").is_dir():
        where = f" at {root}" if root else ""
        err.print(f"[red]error[/]: no matrices folder (with sets/) found{escape(where)}; pass --matrices DIR or set "
                  "CLUSTERDEF_MATRICES")
        raise SystemExit(EXIT_BAD)
    matrix, findings = load(root)
    if findings:
        print_text(err, findings, {})
        raise SystemExit(EXIT_BAD)
    return matrix
