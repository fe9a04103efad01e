"""Command line: argparse sub-commands, one module per verb family, one thin function per verb (parse,
call the library, print, exit code). Only this package prints, itself or through the report functions it
hands its consoles to (validate.report, apply.report).

    common.py    consoles, exit codes, shared options (--matrices, --today, --format), error exits
    validate.py  validate             render.py    render, schema
    matrix.py    matrix list|show     plan.py      plan
    drift.py     drift                tenancy.py   isolation, access
    drill.py     drill                fabric.py    fabric check
    baseline.py  baseline parse|record|compare
    apply.py     apply                approve.py   approve

argparse (standard library) rather than typer: typer 0.29 imports its click and builds pydantic adapters
for every parameter at each start (a two-verb typer app took 0.19 s of CPU to start here, the same with
argparse 0.02 s)."""

from __future__ import annotations

import argparse
import gc
import sys
from typing import Callable, Optional

from . import apply, approve, baseline, drift, drill, fabric, matrix, plan, render, tenancy, validate
from .common import EXIT_BAD, EXIT_OK, err

DESCRIPTION = "Validate a GPU cluster definition and compile it into everything that builds the cluster."


def parser() -> argparse.ArgumentParser:
    """The whole command line: one sub-command per verb, in the order `clusterdef --help` lists them."""
    top = argparse.ArgumentParser(prog="clusterdef", description=DESCRIPTION)
    verbs = top.add_subparsers(dest="verb", metavar="VERB")
    validate.add(verbs)
    render.add(verbs)  # render, schema
    matrix.add(verbs)
    plan.add(verbs)
    drift.add(verbs)
    tenancy.add_isolation(verbs)
    tenancy.add_access(verbs)
    drill.add(verbs)
    fabric.add(verbs)
    baseline.add(verbs)
    apply.add(verbs)
    approve.add(verbs)
    return top


def _parse(argv: Optional[list[str]]) -> tuple[Callable[..., None], dict, bool]:
    """The verb to run, its arguments, and whether it is long-running (common.add_verb)."""
    top = parser()
    args = vars(top.parse_args(argv))
    verb = args.pop("_verb", None)
    if verb is None:  # `clusterdef` or `clusterdef matrix` alone: show what there is
        (args.get("_group") or top).print_help(sys.stderr)
        raise SystemExit(EXIT_BAD)
    long_running = args.pop("_long_running", False)
    for key in ("_group", "verb", "sub_verb"):
        args.pop(key, None)
    return verb, args, long_running


def app(argv: Optional[list[str]] = None) -> None:
    """Parse `argv` and run the verb; exits (SystemExit) with the verb's code."""
    verb, args, _ = _parse(argv)
    verb(**args)
    raise SystemExit(EXIT_OK)


def main() -> None:
    """The process: `app` with the interpreter tuned for a verb that is one bounded pass."""
    import os

    # clusterdef's models use no pydantic plugin; looking for one scans the entry points of every
    # installed distribution (about 20 ms of each start in a venv with the test extras)
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        verb, args, long_running = _parse(None)
        if not long_running:
            # One pass whose garbage reference counting frees: the cycle collector's passes over the
            # models and YAML trees cost 7-10 % of a render (4,096 nodes: 35 ms, for 3 MB more; 16,384
            # nodes: 100 ms, for 4.5 MB)
            gc.disable()
        try:
            verb(**args)
        except SystemExit as done:
            code = done.code
        else:
            code = EXIT_OK
        if long_running or not (code is None or isinstance(code, int)):
            sys.exit(code)
        # Done and nothing runs after: flush the streams and leave without tearing the objects down
        # one by one (another 30 ms of a 4,096-node render). A stream that cannot be flushed takes
        # the ordinary exit, which reports it.
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            sys.exit(code)
        os._exit(code or 0)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
