"""`clusterdef drill`: rehearse the restore of the Slurm backups into scratch targets."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional

from rich.markup import escape

from .common import EXIT_BAD, EXIT_WARN, add_definition, add_format, add_matrices, add_today, add_verb, bad_path, \
    err, out, report, today as day, valid


def add(verbs: Any) -> None:
    sub = add_verb(verbs, "drill", drill, long_running=True)
    add_definition(sub, help="Cluster definition (YAML) with a backup section.")
    sub.add_argument("--state-dir", default=None, metavar="STATE_DIR",
                     help="Scratch StateSaveLocation to restore into (default: backup.rehearsal.state_dir).")
    sub.add_argument("--database", default=None, metavar="DATABASE",
                     help="Scratch database to restore into (default: backup.rehearsal.database).")
    sub.add_argument("--record", action=argparse.BooleanOptionalAction, default=True,
                     help="Append the result to <definition>.rehearsal.json.")
    add_format(sub, help="Report format.")
    add_matrices(sub)
    add_today(sub)


def drill(definition: Path, state_dir: Optional[str], database: Optional[str], record: bool, fmt: str,
          matrices: Optional[Path], today: Optional[str]) -> None:
    """Rehearse the restore: run the rendered backup/slurmdbd and backup/slurm restore.sh into a scratch
    database and state folder, check what came back, record date and result beside the definition (docs/backup.md).
    Exit 0 when it passed, 1 when it failed, 2 on bad input."""
    from .. import drill as drill_mod
    from ..errors import DefinitionError
    from ..rehearsal import RecordError
    from ..validate.pipeline import validate_file
    from ..writer import OutputError

    result = validate_file(definition, matrices, day(today))
    d, _ = valid(result)
    refused = drill_mod.refusal(d, definition, database, state_dir)
    if refused:
        bad_path(refused)
    try:
        entry, path = drill_mod.run(result, database=database, state_dir=state_dir, record=record)
    except DefinitionError as exc:
        report(type(result)(result.file, result.source, None, None, exc.findings), "text", err)
        raise SystemExit(EXIT_BAD)
    except (OSError, OutputError, RecordError) as exc:
        bad_path(f"cannot record the rehearsal: {exc}")
    if fmt == "json":
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
