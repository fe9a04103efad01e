"""Command line: one thin function per verb (parse, call one function, print, exit code). Only this module
prints, itself or through the report functions it hands its consoles to (validate.report, apply.report).

The verbs are plain functions whose parameters declare their arguments (`Argument`, `Option`,
as typer spells them); `parser()` turns them into argparse sub-commands. argparse (standard
library) rather than typer: typer 0.29 imports its click and builds pydantic adapters for every
parameter at each start (a two-verb typer app took 0.19 s of CPU to start here, the same with
argparse 0.02 s)."""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from dataclasses import dataclass
from datetime import date
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:  # for annotations only: the verbs import what they use (a light start)
    from .matrix.load import Matrix
    from .model import Definition

DESCRIPTION = "Validate a GPU cluster definition and compile it into everything that builds the cluster."
GROUPS = {
    "matrix": "Validated version sets.",
    "fabric": "InfiniBand fabric: the as-built cabling against the definition.",
    "baseline": "nccl-tests performance baselines.",
}

out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

EXIT_OK, EXIT_WARN, EXIT_BAD = 0, 1, 2


class Format(str, Enum):
    text = "text"
    json = "json"


class FabricKind(str, Enum):
    infiniband = "infiniband"
    roce = "roce"
    ethernet = "ethernet"


# --------------------------------------------------------------------------- argument declarations

@dataclass(frozen=True)
class Param:
    """One parameter of a verb: positional when `flags` is empty; `default` ... means required."""

    default: Any
    flags: tuple[str, ...] = ()
    help: str = ""
    metavar: Optional[str] = None
    min: Optional[int] = None


def Argument(default: Any = ..., *, help: str = "") -> Any:  # noqa: N802 (reads as the typer call it replaces)
    return Param(default, (), help)


def Option(default: Any, *flags: str, help: str = "", metavar: Optional[str] = None,  # noqa: N802
           min: Optional[int] = None) -> Any:
    return Param(default, flags, help, metavar, min)


VERBS: dict[str, Callable[..., None]] = {}


def command(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register a verb under `name` ("validate", or "matrix list" for a sub-verb)."""
    def register(fn: Callable[..., None]) -> Callable[..., None]:
        VERBS[name] = fn
        return fn
    return register


def _enum_type(enum: type[Enum]) -> Callable[[str], Enum]:
    def convert(value: str) -> Enum:
        try:
            return enum(value)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{value!r}: choose from {', '.join(str(e.value) for e in enum)}") from None
    convert.__name__ = "format"
    return convert


def _min_int(low: int | None) -> Callable[[str], int]:
    def convert(value: str) -> int:
        from .textnum import whole

        n = whole(value)
        if n is None:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number (ASCII digits)")
        if low is not None and n < low:
            raise argparse.ArgumentTypeError(f"{n} is below {low}")
        return n
    convert.__name__ = "number"
    return convert


def _add(sub: argparse.ArgumentParser, name: str, annotation: str, p: Param) -> None:
    """One argparse argument from a parameter's annotation (a string: annotations are postponed)."""
    kind = annotation.removeprefix("Optional[").removesuffix("]")
    kw: dict[str, Any] = {"help": p.help or None}
    if p.metavar or (p.flags and kind != "bool"):
        kw["metavar"] = p.metavar or p.flags[0].lstrip("-").upper().replace("-", "_")
    enum = globals().get(kind)
    if kind == "bool":
        flags = p.flags[0].split("/") if "/" in p.flags[0] else list(p.flags)
        action = argparse.BooleanOptionalAction if len(flags) == 2 else "store_true"
        sub.add_argument(flags[0], *p.flags[1:], dest=name, action=action, default=p.default, **kw)
        return
    if kind.startswith("list["):
        kw["action"] = "append"
        kind = kind[len("list["):-1]
    if isinstance(enum, type) and issubclass(enum, Enum):
        kw["type"] = _enum_type(enum)
        kw["metavar"] = p.metavar or "{" + ",".join(str(e.value) for e in enum) + "}"
    elif kind == "Path":
        kw["type"] = Path
    elif kind == "int":
        kw["type"] = _min_int(p.min)
    if not p.flags:
        sub.add_argument(name, **{k: v for k, v in kw.items() if k != "metavar"}, metavar=name.upper())
        return
    required = p.default is ...
    sub.add_argument(*p.flags, dest=name, required=required, default=None if required else p.default, **kw)


def parser() -> argparse.ArgumentParser:
    """The whole command line: one sub-command per verb, built from the verbs' parameters."""
    top = argparse.ArgumentParser(prog="clusterdef", description=DESCRIPTION)
    verbs = top.add_subparsers(dest="verb", metavar="VERB")
    groups: dict[str, Any] = {}
    for name, fn in VERBS.items():
        group, _, leaf = name.rpartition(" ")
        if group and group not in groups:
            g = verbs.add_parser(group, help=GROUPS[group], description=GROUPS[group])
            g.set_defaults(_group=g)
            groups[group] = g.add_subparsers(dest="sub_verb", metavar="VERB")
        doc = inspect.getdoc(fn) or ""
        sub = (groups[group] if group else verbs).add_parser(
            leaf, help=doc.split("\n\n")[0].replace("\n", " "), description=doc,
            formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.set_defaults(_verb=fn)
        for pname, param in inspect.signature(fn).parameters.items():
            _add(sub, pname, str(param.annotation), param.default)
    return top


def app(argv: Optional[list[str]] = None) -> None:
    """Parse `argv` and run the verb; exits (SystemExit) with the verb's code."""
    top = parser()
    args = vars(top.parse_args(argv))
    verb = args.pop("_verb", None)
    if verb is None:  # `clusterdef` or `clusterdef matrix` alone: show what there is
        (args.get("_group") or top).print_help(sys.stderr)
        raise SystemExit(EXIT_BAD)
    for key in ("_group", "verb", "sub_verb"):
        args.pop(key, None)
    verb(**args)
    raise SystemExit(EXIT_OK)


MatricesOpt = Option(None, "--matrices", "-m", help="Folder with sets/ and compat/ (default: nearest matrices/ "
                           "beside or above the definition, or $CLUSTERDEF_MATRICES).")
DrainOpt = Option(None, "--drain", help="Write scontrol drain / kubectl taint lines here.")
PromOpt = Option(None, "--prometheus", help="Write a Prometheus text-format file here.")
TodayOpt = Option(None, "--today", help="Date for lifecycle checks, YYYY-MM-DD (default: today).",
                        metavar="DATE")


def _start(value: Optional[str]):
    """--start: an ISO 8601 instant with its zone (a bare local time would be read in the machine's zone)."""
    from datetime import datetime

    if value is None:
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        at = None
    if at is None or at.tzinfo is None:
        err.print(f"[red]error[/]: --start {escape(repr(value))} is not an ISO 8601 time with a zone; "
                  "use e.g. 2026-12-08T07:00+01:00")
        raise SystemExit(EXIT_BAD)
    return at


def _today(value: Optional[str]) -> date:
    if not value:
        return date.today()
    try:
        return date.fromisoformat(value)
    except ValueError:
        err.print(f"[red]error[/]: --today {escape(repr(value))} is not a date; use YYYY-MM-DD")
        raise SystemExit(EXIT_BAD)


def _bad_path(message: str) -> None:
    """Print an error about a path (escaped: paths may hold [brackets]) and exit 2."""
    from rich.markup import escape

    err.print(f"[red]error[/]: {escape(message)}")
    raise SystemExit(EXIT_BAD)


def _check_outputs(*paths: Optional[Path]) -> None:
    """Exit 2 before any work when an output file path is a folder, a FIFO or a device."""
    from .writer import OutputError, check_file_target

    for path in paths:
        try:
            if path is not None:
                check_file_target(path)
        except OutputError as exc:
            _bad_path(str(exc))


def _write_file(path: Path, text: str) -> None:
    """Write an output file atomically; exit 2 naming it when that is impossible."""
    from .writer import OutputError, write_file_atomic

    try:
        write_file_atomic(path, text)
    except OutputError as exc:
        _bad_path(str(exc))


def _report(result, fmt: Format, console: Console) -> None:
    from .validate.report import print_text, summary_line, to_json

    if fmt is Format.json:
        sys.stdout.write(to_json(result.file, result.findings, result.ok) + "\n")
        return
    print_text(console, result.findings, {result.file: result.source} if result.source else {})
    if result.findings:
        console.print(f"{escape(str(result.file))}: {escape(str(summary_line(result.findings)))}")


def _validated(result) -> tuple[Definition, Matrix]:
    """The definition and matrix of a result that validated (ok: both are set)."""
    assert result.definition is not None and result.matrix is not None
    return result.definition, result.matrix


def _valid(result) -> tuple[Definition, Matrix]:
    """Exit 2 with the findings unless the definition validated; else its definition and matrix."""
    if not result.ok:
        _report(result, Format.text, err)
        raise SystemExit(EXIT_BAD)
    return _validated(result)


@command("validate")
def validate(
    definition: Path = Argument(..., help="Cluster definition (YAML)."),
    matrices: Optional[Path] = MatricesOpt,
    fmt: Format = Option(Format.text, "--format", "-f", help="Output format."),
    strict: bool = Option(False, "--strict", help="Exit 1 when there are warnings."),
    today: Optional[str] = TodayOpt,
) -> None:
    """Check a definition. Exit 0 when clean, 1 on warnings with --strict, 2 on errors."""
    from .validate.pipeline import validate_file

    result = validate_file(definition, matrices, _today(today))
    _report(result, fmt, out)  # the report is what validate is for: stdout (`validate DEF > report.txt`)
    if not result.ok:
        raise SystemExit(EXIT_BAD)
    d, _ = _validated(result)
    if fmt is Format.text and not result.findings:
        out.print(f"[green]ok[/] {escape(str(definition))}: cluster {escape(str(d.cluster.name))}, "
                  f"set {escape(str(d.cluster.matrix))}")
    if strict and result.warnings:
        raise SystemExit(EXIT_WARN)


@command("render")
def render(
    definition: Path = Argument(..., help="Cluster definition (YAML)."),
    output: Optional[Path] = Option(None, "--output", "-o", help="Output folder (default: out/<cluster name>)."),
    target: Optional[list[str]] = Option(None, "--target", "-t", help="Render only these targets."),
    matrices: Optional[Path] = MatricesOpt,
    today: Optional[str] = TodayOpt,
) -> None:
    """Validate, then write the rendered tree atomically (with manifest and resolved definition)."""
    from .build import build_tree
    from .errors import DefinitionError
    from .render import TARGETS
    from .validate.pipeline import validate_file
    from .writer import OutputError, write_tree

    unknown = [t for t in target or [] if t not in TARGETS]
    if unknown:
        err.print(f"[red]error[/]: unknown target(s) {escape(', '.join(unknown))}; known: {escape(', '.join(TARGETS))}")
        raise SystemExit(EXIT_BAD)
    result = validate_file(definition, matrices, _today(today))
    _report(result, Format.text, err)
    if not result.ok:
        err.print("[red]nothing written[/]: fix the errors above first")
        raise SystemExit(EXIT_BAD)
    d, _ = _validated(result)
    try:
        tree, meta = build_tree(result, target)
    except DefinitionError as exc:
        _report(type(result)(result.file, result.source, None, None, exc.findings), Format.text, err)
        err.print("[red]nothing written[/]")
        raise SystemExit(EXIT_BAD)
    dest = output or Path("out") / d.cluster.name
    try:
        write_tree(dest, tree, meta)
    except (OutputError, OSError) as exc:
        err.print(f"[red]error[/]: cannot write {escape(str(dest))}: {escape(str(exc))}")
        if "which this render does not write" not in str(exc):  # that message carries its own way out
            err.print("  [green]hint:[/] choose another --output, or remove the folder")
        raise SystemExit(EXIT_BAD)
    out.print(f"[green]rendered[/] {len(tree) + 1} files for cluster {escape(d.cluster.name)} into {escape(str(dest))}")


@command("schema")
def schema(
    output: Optional[Path] = Option(None, "--output", "-o", help="Write to this file instead of stdout."),
) -> None:
    """Print the JSON Schema of the definition (for editors: yaml-language-server modeline)."""
    from .schema import definition_schema

    text = json.dumps(definition_schema(), indent=2, sort_keys=True) + "\n"
    if output:
        _write_file(output, text)
    else:
        sys.stdout.write(text)


def _load_matrix(matrices: Optional[Path]):
    from .matrix.load import find_matrices, load_matrix
    from .validate.report import print_text

    root = matrices or find_matrices(None)
    if root is None or not (Path(root) / "sets").is_dir():
        where = f" at {root}" if root else ""
        err.print(f"[red]error[/]: no matrices folder (with sets/) found{escape(where)}; pass --matrices DIR or set "
                  "CLUSTERDEF_MATRICES")
        raise SystemExit(EXIT_BAD)
    matrix, findings = load_matrix(root)
    if findings:
        print_text(err, findings, {})
        raise SystemExit(EXIT_BAD)
    return matrix


@command("matrix list")
def matrix_list(matrices: Optional[Path] = MatricesOpt, today: Optional[str] = TodayOpt,
                fmt: Format = Option(Format.text, "--format", "-f")) -> None:
    """List validated sets, their status, versions and consistency."""

    from .matrix.checks import check_set

    m = _load_matrix(matrices)
    day = _today(today)
    rows = []
    for _, vs in sorted(m.sets.items()):
        problems = check_set(vs, m.compat, day)
        rows.append((vs, problems))
    if fmt is Format.json:
        sys.stdout.write(json.dumps([{"name": vs.name, "status": vs.status,
                                      "components": vs.components.model_dump(exclude_none=True),
                                      "problems": [p._asdict() | {"severity": p.severity.value} for p in probs]}
                                     for vs, probs in rows], indent=2) + "\n")
        return
    colour = {"validated": "green", "candidate": "yellow", "retired": "dim"}
    body = []
    for vs, probs in rows:
        c = vs.components
        checks = "[green]ok[/]" if not probs else "[red]" + escape(", ".join(p.code for p in probs)) + "[/]"
        body.append([escape(vs.name), f"[{colour[vs.status]}]{vs.status}[/]"]
                    + [escape(str(v)) for v in (c.driver, c.cuda, c.nccl, c.container_toolkit, c.gpu_operator,
                                                c.kubernetes, c.slurm)] + [checks])
    _print_table(out, f"validated sets in {escape(str(m.root))}",
                 ["set", "status", "driver", "CUDA", "NCCL", "toolkit", "GPU Operator", "Kubernetes", "Slurm",
                  "checks"], body)


def _print_table(console: Console, title: str, headers: list[str], rows: list[list[str]]) -> None:
    """A table (cells are rich markup, data already escaped) when it fits the console's width;
    otherwise one record per row, `first cell  header value, header value, ...`, wrapped at
    word boundaries, so nothing is cut to `2025…` when piped or in an 80-column CI log."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    widths = [max([len(h)] + [Text.from_markup(r[i]).cell_len for r in rows]) for i, h in enumerate(headers)]
    if sum(widths) + 3 * len(widths) + 1 <= console.width:
        table = Table(title=title, box=box.SIMPLE_HEAD)
        for h in headers:
            table.add_column(h, no_wrap=True)
        for r in rows:
            table.add_row(*r)
        console.print(table)
        return
    console.print(title)
    for r in rows:
        console.print(f"[bold]{r[0]}[/]  " + ", ".join(f"{escape(h)} {v}" for h, v in zip(headers[1:], r[1:])),
                      soft_wrap=False, overflow="fold")





@command("matrix show")
def matrix_show(name: str = Argument(..., help="Set name."), matrices: Optional[Path] = MatricesOpt,
                today: Optional[str] = TodayOpt,
                fmt: Format = Option(Format.text, "--format", "-f")) -> None:
    """Show one set: every component, firmware per platform, provenance and its checks."""
    from difflib import get_close_matches

    from .matrix.checks import check_set

    m = _load_matrix(matrices)
    vs = m.sets.get(name)
    if vs is None:
        close = get_close_matches(name, list(m.sets), n=1)
        err.print(f"[red]error[/]: no set named {escape(repr(name))}"
                  + (f"; did you mean {escape(repr(close[0]))}?" if close else ""))
        raise SystemExit(EXIT_BAD)
    problems = check_set(vs, m.compat, _today(today))
    if fmt is Format.json:
        sys.stdout.write(json.dumps({**vs.model_dump(mode="json"), "file": str(m.set_files[name]),
                                     "problems": [p.message for p in problems]}, indent=2) + "\n")
        return
    out.print(f"[bold]{escape(str(vs.name))}[/] ({escape(str(vs.status))}) {escape(str(vs.summary))}")
    out.print(f"file: {escape(str(m.set_files[name]))}")
    for k, v in vs.components.model_dump(exclude_none=True).items():
        out.print(f"  {k:<18} {escape(str(v))}")
    for platform, pins in sorted(vs.firmware.items()):
        out.print(f"  firmware {escape(str(platform))}: "
                  + ", ".join(f"{escape(str(c))}={escape(str(v))}" for c, v in sorted(pins.items())))
    if vs.baseline:
        out.print(f"  baseline: {escape(str(vs.baseline))}")
    for src in vs.provenance.sources:
        out.print(f"  source: {escape(str(src))}")
    for p in problems:
        out.print(f"  [red]{escape(str(p.severity.value))}[/] {escape(str(p.code))}: {escape(str(p.message))} "
                  f"[green]hint:[/] {escape(str(p.hint))}")
    if problems and any(p.severity.value == "error" for p in problems):
        raise SystemExit(EXIT_BAD)


# --------------------------------------------------------------------------- plan, drift, baseline

class PlanFormat(str, Enum):
    text = "text"
    markdown = "markdown"
    json = "json"


def _print_findings(findings, sources) -> None:
    from .validate.report import print_text

    print_text(err, findings, sources)


@command("plan")
def plan(
    to: Path = Option(..., "--to", help="The new definition (YAML)."),
    from_: Optional[Path] = Option(None, "--from", help="The old definition (YAML)."),
    base: Optional[str] = Option(None, "--base", help="Compare with the --to file as it is at this git ref "
                                       "(e.g. origin/main) instead of --from."),
    fmt: PlanFormat = Option(PlanFormat.text, "--format", "-f", help="text, markdown (PR comment) or json."),
    plan_file: Optional[Path] = Option(None, "--plan-file", "-o", help="Write the plan file (JSON with the "
                                             "hashes of both definitions and rendered trees) here."),
    allow_candidate: bool = Option(False, "--allow-candidate", help="Allow a candidate target set; the "
                                         "plan then covers the canary stage only."),
    matrices: Optional[Path] = MatricesOpt,
    today: Optional[str] = TodayOpt,
    start: Optional[str] = Option(None, "--start", help="When the rollout starts, ISO 8601 with a zone "
                                  "(2026-12-08T07:00+01:00), to lay the stages out in the maintenance windows "
                                  "(default: the first window opening of --today)."),
) -> None:
    """Plan the change from one definition to another: set change, compatibility, disruption, rollout, file
    diffs; with neither --from nor --base, the bring-up plan of a new cluster (day 0). Exit 0 with a plan, 2 when
    refused or on bad input."""
    from .plan import FROM_SIDE_IGNORED, PlanInputError, base_side, load_side, make_plan
    from .plan.formats import to_json, to_markdown, to_text
    from .plan.planfile import seal

    if from_ is not None and base is not None:
        err.print("[red]error[/]: give at most one of --from OLD.yaml or --base GIT_REF (neither: a bring-up plan)")
        raise SystemExit(EXIT_BAD)
    _check_outputs(plan_file)
    day = _today(today)
    begin = _start(start)
    try:
        if from_ is None and base is None:  # day 0: the bring-up plan of a new cluster
            from .plan.bringup import make_bringup

            p = make_bringup(load_side(to, matrices, day))
        else:
            # a candidate target is the plan's decision (refused without --allow-candidate), not a definition error
            new = load_side(to, matrices, day, {"matrix-candidate"})
            if base is not None:  # --base "" is refused there, not ignored
                old = base_side(base, to, matrices, day)
            else:
                assert from_ is not None  # one of them, checked above
                old = load_side(from_, matrices, day, FROM_SIDE_IGNORED)
            p = make_plan(old, new, allow_candidate, begin)  # image identity across the two sides: located errors
    except PlanInputError as exc:
        _print_findings(exc.findings, exc.sources)
        err.print("[red]no plan[/]: fix the definition errors above first")
        raise SystemExit(EXIT_BAD)
    if fmt is PlanFormat.json:
        sys.stdout.write(to_json(p.doc))
    elif fmt is PlanFormat.markdown:
        sys.stdout.write(to_markdown(p.doc))
    else:
        out.print(to_text(p.doc))
    if p.refused:
        for r in p.refusals:
            err.print(f"[red]refused[/] {escape(str(r.code))}: {escape(str(r.message))}  "
                      f"[green]hint:[/] {escape(str(r.hint))}")
        raise SystemExit(EXIT_BAD)
    if plan_file:
        _write_file(plan_file, to_json(seal(p.doc)))  # sealed: apply checks the whole document
        err.print(f"plan file written to {escape(str(plan_file))}")


@command("drift")
def drift(
    definition: Path = Argument(..., help="Cluster definition (YAML)."),
    facts: Path = Option(..., "--facts", help="A facts JSON file (one node or a list) or a folder of them."),
    fmt: Format = Option(Format.text, "--format", "-f", help="Report format."),
    drain: Optional[Path] = DrainOpt,
    prom: Optional[Path] = PromOpt,
    matrices: Optional[Path] = MatricesOpt,
    today: Optional[str] = TodayOpt,
) -> None:
    """Which nodes are off the validated set. Exit 0 all on-matrix, 1 when any node is off-matrix, 2 on bad
    input or facts that name none of the definition's hosts."""
    from . import drift as dr
    from . import hostlist
    from .validate.pipeline import validate_file

    _check_outputs(drain, prom)
    d, matrix = _valid(validate_file(definition, matrices, _today(today)))
    try:
        facts_list = dr.read_facts(facts)
    except dr.FactsError as exc:
        _print_findings(exc.findings, {})
        raise SystemExit(EXIT_BAD)
    vs = matrix.sets[d.cluster.matrix]
    report = dr.compare(d, vs, facts_list)
    if not report.nodes:  # facts of another cluster, or none: "all on-matrix" would be a false all-clear
        seen = f"{len(report.strangers)} fact(s), for hosts such as {report.strangers[0]}" if report.strangers \
            else "no facts"
        err.print(f"[red]error[/] {escape(str(facts))}: {escape(seen)}; none names a host of {escape(str(definition))}")
        err.print("  hint: point --facts at this cluster's facts (collected by the gpu_facts role; "
                  "docs/facts-format.md)")
        raise SystemExit(EXIT_BAD)
    if drain:
        lines = dr.drain_lines(report, dr.spared_namespaces(d), d.upgrade.drain.timeout_minutes)
        _write_file(drain, "".join(line + "\n" for line in lines))
    if prom:
        _write_file(prom, dr.prometheus(report))
    if fmt is Format.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2, sort_keys=True) + "\n")
    else:
        for n in report.off_matrix:
            out.print(f"[red]off-matrix[/] {escape(n.host)} ({escape(n.group)}, {escape(n.control_plane)}): "
                      + ", ".join(f"{escape(m.component)} {escape(m.actual)} (set {escape(vs.name)}: "
                                  f"{escape(m.expected)})" for m in n.off))
        for h in report.strangers:
            err.print(f"[yellow]warning[/] facts for {escape(str(h))}, which is not in {escape(str(definition))}")
        unknown = [n for n in report.nodes if n.unknown]
        if unknown:
            out.print(f"[yellow]{len(unknown)} node(s)[/] reported some versions as unknown (see --format json)")
        if report.missing:
            folded = hostlist.fold(report.missing)
            out.print(f"[yellow]without facts[/] ({len(report.missing)}): {escape(folded)}")
        out.print(f"{len(report.nodes)} node(s) checked against {escape(str(vs.name))}: "
                  f"{len(report.off_matrix)} off-matrix, {len(report.missing)} without facts")
    if report.off_matrix:
        raise SystemExit(EXIT_WARN)


class TableFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


@command("isolation")
def isolation(
    definition: Path = Argument(..., help="Cluster definition (YAML)."),
    fmt: TableFormat = Option(TableFormat.text, "--format", "-f", help="Report format."),
    matrices: Optional[Path] = MatricesOpt,
    today: Optional[str] = TodayOpt,
) -> None:
    """Per tenant and layer: the isolation claimed, the mechanism that enforces it and the rendered file.
    Exit 0 when every claim is enforced, 1 when one is not, 2 on bad input."""
    from . import tenancy
    from .validate.pipeline import validate_file

    result = validate_file(definition, matrices, _today(today))
    if result.definition is None:
        _report(result, Format.text, err)
        raise SystemExit(EXIT_BAD)
    table = tenancy.enforcement(result.definition)
    if fmt is TableFormat.json:
        sys.stdout.write(json.dumps(tenancy.to_json(table), indent=2, sort_keys=True) + "\n")
    elif fmt is TableFormat.markdown:
        sys.stdout.write(tenancy.to_markdown(table))
    else:
        for name, te in table.items():
            out.print(f"[bold]{escape(name)}[/] ({te.level})")
            for layer, lay in te.layers.items():
                mark = "[red]NOT ENFORCED[/]" if lay.shortfall else "[green]enforced[/]" if lay.mechanisms else "-"
                out.print(f"  {layer:<12} {escape(lay.claim):<22} {mark}")
                for m in lay.mechanisms:
                    out.print(f"      {escape(m)}")
                if lay.files:
                    out.print(f"      files: {escape(', '.join(lay.files))}")
                if lay.shortfall:
                    out.print(f"      [red]gap[/]: {escape(lay.shortfall)}")
    if any(te.gaps for te in table.values()):
        raise SystemExit(EXIT_WARN)


@command("access")
def access(
    definition: Path = Argument(..., help="Cluster definition (YAML)."),
    fmt: TableFormat = Option(TableFormat.text, "--format", "-f", help="Report format."),
    matrices: Optional[Path] = MatricesOpt,
    today: Optional[str] = TodayOpt,
) -> None:
    """Who can do what, per layer (nodes, Slurm, Kubernetes), and the rendered file that grants it.
    Exit 0, or 2 on bad input."""
    from . import access as access_table
    from .resolve import resolve
    from .validate.pipeline import validate_file

    d, matrix = _valid(validate_file(definition, matrices, _today(today)))
    grants = access_table.table(resolve(d, matrix, definition.parent))
    if fmt is TableFormat.json:
        sys.stdout.write(json.dumps(access_table.to_json(grants), indent=2, sort_keys=True) + "\n")
    elif fmt is TableFormat.markdown:
        sys.stdout.write(access_table.to_markdown(grants))
    else:
        for g in grants:
            out.print(f"[bold]{escape(g.who)}[/] {g.layer}")
            for c in g.can:
                out.print(f"    {escape(c)}")
            if g.files:
                out.print(f"    files: {escape(', '.join(g.files))}")


@command("drill")
def drill(
    definition: Path = Argument(..., help="Cluster definition (YAML) with a backup section."),
    state_dir: Optional[str] = Option(None, "--state-dir", help="Scratch StateSaveLocation to restore into "
                                            "(default: backup.rehearsal.state_dir)."),
    database: Optional[str] = Option(None, "--database", help="Scratch database to restore into "
                                           "(default: backup.rehearsal.database)."),
    record: bool = Option(True, "--record/--no-record", help="Append the result to <definition>.rehearsal.json."),
    fmt: Format = Option(Format.text, "--format", "-f", help="Report format."),
    matrices: Optional[Path] = MatricesOpt,
    today: Optional[str] = TodayOpt,
) -> None:
    """Rehearse the restore: run the rendered backup/slurmdbd and backup/slurm restore.sh into a scratch
    database and state folder, check what came back, record date and result beside the definition (docs/backup.md).
    Exit 0 when it passed, 1 when it failed, 2 on bad input."""
    from . import drill as drill_mod
    from .errors import DefinitionError
    from .validate.pipeline import validate_file
    from .writer import OutputError

    result = validate_file(definition, matrices, _today(today))
    d, _ = _valid(result)
    refused = drill_mod.refusal(d, definition, database, state_dir)
    if refused:
        _bad_path(refused)
    try:
        entry, path = drill_mod.run(result, database=database, state_dir=state_dir, record=record)
    except DefinitionError as exc:
        _report(type(result)(result.file, result.source, None, None, exc.findings), Format.text, err)
        raise SystemExit(EXIT_BAD)
    except (OSError, OutputError, drill_mod.RecordError) as exc:
        _bad_path(f"cannot record the rehearsal: {exc}")
    if fmt is Format.json:
        sys.stdout.write(json.dumps(entry, indent=2, sort_keys=True) + "\n")
    else:
        for c in entry["checks"]:
            mark = "[green]ok[/]  " if c["ok"] else "[red]FAIL[/]"
            out.print(f"  {mark} {escape(c['name'])}: {escape(c['detail'])}")
        colour = "green" if entry["result"] == "passed" else "red"
        where = f"; recorded in {escape(str(path))}" if record else ""
        out.print(f"[{colour}]{entry['result']}[/] restore rehearsal of {escape(d.cluster.name)} "
                  f"into {escape(entry['target']['database'])} and {escape(entry['target']['state_dir'])}{where}")
    if entry["result"] != "passed":
        raise SystemExit(EXIT_WARN)




@command("fabric check")
def fabric_check(
    definition: Path = Argument(..., help="Cluster definition (YAML)."),
    ibnetdiscover: Path = Option(..., "--ibnetdiscover", help="Output of `ibnetdiscover` (default format)."),
    fabric: Optional[str] = Option(None, "--fabric", help="Fabric name (default: the only InfiniBand fabric)."),
    fmt: Format = Option(Format.text, "--format", "-f", help="Report format."),
    drain: Optional[Path] = DrainOpt,
    prom: Optional[Path] = PromOpt,
    matrices: Optional[Path] = MatricesOpt,
    today: Optional[str] = TodayOpt,
) -> None:
    """Hosts cabled to the wrong leaf, missing and degraded links, nodes the definition does not know.
    Exit 0 when the fabric is as declared, 1 when anything is off, 2 on bad input."""
    from .fabric import check as fc
    from .fabric.layout import FabricError, layout
    from .limits import InputError
    from .validate.pipeline import validate_file

    _check_outputs(drain, prom)
    d, _ = _valid(validate_file(definition, matrices, _today(today)))
    try:
        lay = layout(d, fabric)
    except FabricError as exc:
        _bad_path(str(exc))
    try:
        topo = fc.read(ibnetdiscover)
    except InputError as exc:
        _print_findings(exc.findings, {})
        raise SystemExit(EXIT_BAD)
    report = fc.compare(lay, topo)
    if drain:
        _write_file(drain, "".join(line + "\n" for line in fc.drain_lines(report)))
    if prom:
        _write_file(prom, fc.prometheus(report))
    if fmt is Format.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2, sort_keys=True) + "\n")
    else:
        for i in report.issues:
            out.print(f"[red]{i.kind}[/] {escape(i.text()[len(i.kind) + 1:])}")
        out.print(f"fabric {escape(report.fabric)}: {report.links_checked} link(s) checked, "
                  f"{len(report.issues)} issue(s)")
    if report.issues:
        raise SystemExit(EXIT_WARN)




def _parse_log(log: Path):
    from .baseline import BaselineError, parse_file

    try:
        return parse_file(log)
    except BaselineError as exc:
        _bad_path(str(exc))


def _run_line(r) -> str:
    from .baseline import series_name, size_name, size_range

    what = escape(f"{r.test or 'unknown test'}: {r.nodes} node(s), {r.ranks} rank(s), "
                  f"{', '.join(r.gpu_models) or '?'}")
    if r.status == "ok":
        series = r.series()
        sizes = sorted({row.size for row in r.rows})
        kinds = ", ".join(series_name(*s) for s in series[:6]) + (", ..." if len(series) > 6 else "")
        line = (f"[green]ok[/] {what}; {len(r.rows)} rows, {len(sizes)} sizes {size_range(sizes)} x "
                f"{len(series)} datatype/op ({escape(kinds)})")
        peak = r.peak()
        if peak:
            bw, row, half = peak
            line += (f", peak busbw {bw:g} GB/s ({size_name(row.size)} {escape(series_name(row.type, row.redop))} "
                     f"{half})")
        return line + f", avg {r.avg_busbw_gbps:g} GB/s"
    return f"[red]{r.status}[/] {what}: {escape(r.reason)}"


@command("baseline parse")
def baseline_parse(log: Path = Argument(..., help="nccl-tests output."),
                   fmt: Format = Option(Format.text, "--format", "-f")) -> None:
    """Parse an nccl-tests log. Exit 0 when every run is ok, 1 when a run failed or is incomplete."""
    runs = _parse_log(log)
    if fmt is Format.json:
        sys.stdout.write(json.dumps([r.to_json() for r in runs], indent=2) + "\n")
    else:
        if not runs:
            out.print(f"[red]no nccl-tests run[/] found in {escape(str(log))}")
        for r in runs:
            out.print(_run_line(r))
    if not runs or any(r.status != "ok" for r in runs):
        raise SystemExit(EXIT_WARN)


def _one_run(log: Path, test: Optional[str]):
    from .baseline import BaselineError, choose_run

    try:
        return choose_run(_parse_log(log), test, log)
    except BaselineError as exc:
        _bad_path(str(exc))


def _baseline_file(set_name: str, matrices: Optional[Path]) -> Path:
    m = _load_matrix(matrices)
    vs = m.sets.get(set_name)
    if vs is None:
        err.print(f"[red]error[/]: no set named {escape(repr(set_name))} in {escape(str(m.root))}")
        raise SystemExit(EXIT_BAD)
    from .baseline import set_baseline_path

    return set_baseline_path(m.root, set_name, vs.baseline)


@command("baseline record")
def baseline_record(log: Path = Argument(..., help="nccl-tests output of a good run."),
                    set_name: str = Option(..., "--set", help="Validated set the run was taken on."),
                    node_group: str = Option("", "--node-group", help="Node group the run used."),
                    test: Optional[str] = Option(None, "--test", help="Which run when the log has several."),
                    output: Optional[Path] = Option(None, "--output", "-o",
                                                          help="Baseline file (default: the set's baseline)."),
                    fabric: Optional[FabricKind] = Option(None, "--fabric", help="Fabric the collective "
                                                          "crossed; plan warns when a canary's differs."),
                    matrices: Optional[Path] = MatricesOpt) -> None:
    """Record a run as the baseline of a set, node group and node count (refuses a failed run). The GPU
    model is taken from the log."""
    from .baseline import BaselineError, baseline_from_run, record

    _check_outputs(output)
    run = _one_run(log, test)
    if run.status != "ok":
        err.print(f"[red]refused[/]: cannot record a baseline from a {escape(run.status)} run: {escape(run.reason)}")
        raise SystemExit(EXIT_BAD)
    dest = output or _baseline_file(set_name, matrices)
    _check_outputs(dest)
    try:
        text = record(dest, baseline_from_run(run, set_name, node_group, source=log.name,
                                              fabric=fabric.value if fabric else ""))
    except BaselineError as exc:
        _bad_path(str(exc))
    _write_file(dest, text)
    out.print(f"[green]recorded[/] {escape(run.test)} on {run.nodes} node(s) for {escape(set_name)} in "
              f"{escape(str(dest))}")


@command("baseline compare")
def baseline_compare(log: Path = Argument(..., help="nccl-tests output of the new run."),
                     set_name: Optional[str] = Option(None, "--set", help="Set whose baseline to use."),
                     baseline_file: Optional[Path] = Option(None, "--baseline", help="Baseline file."),
                     node_group: str = Option("", "--node-group"),
                     test: Optional[str] = Option(None, "--test"),
                     tolerance: Optional[list[str]] = Option(None, "--tolerance", help="BAND=PCT, bands small "
                                                                   "(<1 MiB), medium (<256 MiB), large; repeatable."),
                     fabric: Optional[FabricKind] = Option(None, "--fabric", help="Fabric kind the run's collective "
                                                           "crossed: a baseline of another kind is not compared."),
                     fmt: Format = Option(Format.text, "--format", "-f"),
                     matrices: Optional[Path] = MatricesOpt) -> None:
    """Compare a run with the recorded baseline. Exit 0 within tolerance, 1 on a regression, #wrong or a
    failed run (even when nothing errored), 2 on bad input."""
    from .baseline import BaselineError, compare, load_baselines, parse_tolerance, pick, series_name, size_name

    try:
        tol = parse_tolerance(tolerance or [])
    except BaselineError as exc:
        _bad_path(str(exc))
    if (set_name is None) == (baseline_file is None):
        err.print("[red]error[/]: give exactly one of --set NAME or --baseline FILE")
        raise SystemExit(EXIT_BAD)
    if baseline_file is not None:
        path = baseline_file
    else:
        assert set_name is not None  # exactly one of them, checked above
        path = _baseline_file(set_name, matrices)
    try:
        baselines = load_baselines(path)
    except BaselineError as exc:
        _bad_path(str(exc))
    run = _one_run(log, test)
    kind = fabric.value if fabric else ""
    base = pick(baselines, run, node_group, kind)
    if base is None:
        known = ", ".join(f"{b.test}/{b.node_group or '-'}/{b.nodes}" for b in baselines)
        err.print(f"[red]error[/]: {escape(str(path))} has no baseline for {escape(run.test or 'this test')} on "
                  f"{run.nodes} node(s); "
                  f"known (test/node group/nodes): {escape(str(known))}")
        raise SystemExit(EXIT_BAD)
    result = compare(run, base, tol, kind)
    if fmt is Format.json:
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        for s in result.sizes:
            colour = "green" if s.ok else "red"
            kind = escape(f"{series_name(s.type, s.redop) or '-':<12} {s.half:<12}")
            out.print(f"  {size_name(s.size):>10} {kind} {s.band:<6} baseline {s.baseline_gbps:>8g} measured "
                      f"{s.measured_gbps:>8g} GB/s  [{colour}]{(-s.drop_pct if s.drop_pct else 0.0):+.2f}%[/] "
                      f"(tolerance {s.tolerance_pct:g}%)")
        for p in result.problems:
            out.print(f"[red]regression[/] {escape(p)}")
        out.print(("[green]pass[/]" if result.ok else "[red]FAIL[/]") + f": {run.test or base.test} vs baseline "
                  f"of {base.set} ({path})")
    if not result.ok:
        raise SystemExit(EXIT_WARN)


@command("apply")
def apply(
    plan_file: Path = Argument(..., help="Plan file written by `clusterdef plan --plan-file`."),
    to: Optional[Path] = Option(None, "--to", help="The new definition (default: the plan's file name "
                                      "beside the plan file or in the working directory)."),
    from_: Optional[Path] = Option(None, "--from", help="The old definition (default: as for --to)."),
    base: Optional[str] = Option(None, "--base", help="The old definition is --to at this git ref (default "
                                       "when the plan was made with --base)."),
    playbooks: Optional[Path] = Option(None, "--playbooks", help="Playbooks folder (upgrade.yml, rollback.yml, "
                                             "gates.yml or enforce-baseline.yml, control-plane.yml, prepare.yml); "
                                             "default: the nearest playbooks/ beside or above the definition."),
    check: bool = Option(False, "--check", help="Preview: Ansible check + diff mode, nothing changes."),
    skip_stage: Optional[list[str]] = Option(None, "--skip-stage", help="Record a stage as done by hand "
                                                   "instead of running it: prepare or control-plane; repeatable."),
    extra_var: Optional[list[str]] = Option(None, "--extra-var", "-e", help="KEY=VALUE passed to every "
                                                  "playbook run; recorded (run record, artifacts), so never a "
                                                  "secret; repeatable."),
    secret_env: Optional[list[str]] = Option(None, "--secret-env", metavar="NAME", help="Pass this "
                                                   "environment variable to the playbooks without recording its "
                                                   "value anywhere (read it with lookup('ansible.builtin.env', "
                                                   "NAME) in a no_log task); repeatable."),
    vault_id: Optional[list[str]] = Option(None, "--vault-id", metavar="[LABEL@]FILE", help="Ansible Vault "
                                                 "password file or client script for every run, passed by "
                                                 "reference; repeatable."),
    forks: Optional[int] = Option(None, "--forks", min=1, help="Hosts Ansible works on at once in each "
                                        "run (default: Ansible's configuration, 5 unless ANSIBLE_FORKS or "
                                        "ansible.cfg says otherwise); size it to the wave."),
    resume: bool = Option(False, "--resume", help="Continue the newest run of this plan (or --run) at its first "
                                 "step not finished OK, once the plan, both definitions and rendered trees are "
                                 "shown unchanged; options left out take the run's values."),
    run_record: Optional[Path] = Option(None, "--run", metavar="RECORD", help="With --resume: the run record "
                                              "to continue (default: the newest <plan>.run-*.json)."),
    matrices: Optional[Path] = MatricesOpt,
    today: Optional[str] = TodayOpt,
) -> None:
    """Run a reviewed plan through ansible-runner: canary, gates, rollback drill, control plane, waves; halt at
    the first failing step. After each step it shows which tasks changed (with --check: would change) on which
    hosts. Writes a run record beside the plan file; --resume continues it. One apply of a cluster at a time.
    Exit 0 done, 1 halted on a failure, 2 a stale or refused plan, a run that cannot be resumed, another apply
    running, or bad input (nothing run)."""
    from .apply import ApplyError, runner
    from .apply.session import OptionError, options, recorded_options, start
    from .writer import OutputError

    given: dict[str, Any] = {"playbooks": playbooks, "extra_var": extra_var, "secret_env": secret_env,
                             "vault_ids": vault_id, "skip_stage": skip_stage, "check": check, "forks": forks}
    resume_from = None
    try:
        if run_record is not None and not resume:
            raise ApplyError(["--run names a run record to continue: give --resume with it"])
        if resume:
            from .apply import resume as resuming

            resume_from = run_record or resuming.latest(plan_file)
            given = recorded_options(given, resuming.load(resume_from))
    except ApplyError as exc:
        for reason in exc.reasons:
            err.print(f"[red]refused[/]: {escape(reason)}")
        if exc.hint:
            err.print(f"  [green]hint:[/] {escape(exc.hint)}")
        raise SystemExit(EXIT_BAD)
    check = bool(given["check"])
    try:
        opts = options(plan_file, to, from_, base, given["playbooks"], given["extra_var"] or [],
                       given["secret_env"] or [], given["vault_ids"] or [], given["skip_stage"] or [], check,
                       given["forks"])
    except OptionError as exc:
        _print_warnings(exc.warnings)
        for p in exc.problems:
            err.print(f"[red]error[/]: {escape(p)}")
        raise SystemExit(EXIT_BAD)
    _print_warnings(opts.warnings)
    try:
        runner.require(opts.playbooks)  # before the lock and the run folder: a refusal leaves nothing behind
    except runner.RunnerMissing as exc:
        err.print(f"[red]error[/]: {escape(str(exc))} (nothing was run)")
        raise SystemExit(EXIT_BAD)
    try:
        session = start(opts, to, from_, base, matrices, _today(today), resume_from)
    except ApplyError as exc:
        if exc.findings:
            _print_findings(exc.findings, exc.sources)
        for reason in exc.reasons:
            err.print(f"[red]refused[/]: {escape(reason)}")
        if exc.hint:
            err.print(f"  [green]hint:[/] {escape(exc.hint)}")
        raise SystemExit(EXIT_BAD)
    except OutputError as exc:
        err.print(f"[red]error[/]: {escape(str(exc))} (nothing was run)")
        raise SystemExit(EXIT_BAD)
    try:
        _apply_run(session, plan_file, check, secret_env)
    finally:
        session.close()


def _apply_run(session, plan_file: Path, check: bool, secret_env) -> None:
    """apply, once the plan is prepared and the cluster's lock held: the steps with their progress."""
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from .apply import report
    from .apply.runner import RunnerMissing

    doc, steps = session.prep.doc, session.prep.steps
    mode = " (check mode: nothing changes)" if check else ""
    if session.complete:
        out.print(f"[green]already complete[/]: {escape(str(session.record_path))} finished all "
                  f"{len(steps)} steps of {escape(str(plan_file))}; nothing to resume")
        return
    err.print(f"applying {escape(str(plan_file))}: {escape(str(doc['from'].get('set')))} -> "
              f"{escape(str(doc['to'].get('set')))} on {escape(str(doc.get('cluster')))}, "
              f"{len(steps)} steps{escape(str(mode))}")
    if session.resumed is not None:
        at = f"step {session.first + 1}/{len(steps)}: {steps[session.first].label}" if session.first < len(steps) \
            else "its end (every step finished; the record is closed)"
        err.print(f"resuming {escape(str(session.record_path))} ({escape(str(session.resumed.get('status')))}) at "
                  f"{escape(at)}")
    if secret_env:
        err.print(f"secret environment, values recorded nowhere: {escape(', '.join(secret_env))}")
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/"
                  "{task.total}"), TimeElapsedColumn(), console=err, transient=True) as progress:
        bar = progress.add_task("starting", total=len(steps), completed=session.first)
        current = {"label": ""}

        def on_step(i, step) -> None:
            current["label"] = escape(step.label)
            progress.update(bar, description=current["label"])

        def on_event(event) -> None:
            data = event.get("event_data") or {}
            if event.get("event") == "playbook_on_task_start" and data.get("task"):
                progress.update(bar, description=f"{current['label']}: {escape(data['task'])}")

        def on_done(i, step, result) -> None:
            report.print_step(progress.console, step, result, check)
            progress.advance(bar)

        try:
            record = session.run(on_step, on_event, on_done)
        except RunnerMissing as exc:
            err.print(f"[red]error[/]: {escape(str(exc))}")
            raise SystemExit(EXIT_BAD)
    err.print(f"run record: {escape(str(session.record_path))}")
    if record["status"] != "succeeded":
        not_run = ", ".join(dict.fromkeys(r["stage"] for r in record["not_run"])) or "nothing"
        out.print(f"[red]halted[/] at {escape(record['halted_at'] or '?')}; not run: {escape(not_run)}")
        out.print(f"  continue with: clusterdef apply {escape(str(plan_file))} --resume")
        raise SystemExit(EXIT_WARN)
    out.print(f"[green]applied[/] {escape(str(plan_file))}{escape(str(mode))}: {len(record['runs'])} steps")


def _print_warnings(warnings: list[str]) -> None:
    for w in warnings:
        err.print(f"[yellow]warning[/]: {escape(w)}")

def main() -> None:
    import os

    # clusterdef's models use no pydantic plugin; looking for one scans the entry points of every
    # installed distribution (about 20 ms of each start in a venv with the test extras)
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
