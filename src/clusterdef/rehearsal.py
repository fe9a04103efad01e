"""The restore rehearsal's record beside the definition, `<definition stem>.rehearsal.json` (its format:
drill.py's docstring, docs/backup.md): `clusterdef drill` appends to it, validation reads the date of the
last passed rehearsal (check backup-rehearsal-stale). Below both: validation reads the record without
importing the drill, which renders the tree it rehearses."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from pathlib import Path

from .writer import write_file_atomic

FORMAT = "clusterdef-rehearsal/1"


def record_path(definition_file: str | Path) -> Path:
    p = Path(definition_file)
    return p.with_name(p.stem + ".rehearsal.json")


class RecordError(ValueError):
    """The record file exists but cannot be read as a rehearsal record."""


def read_record(path: Path) -> list[dict]:
    """The rehearsals in a record file ([] when there is none)."""
    from .limits import InputError, load_json

    if not path.exists() and not path.is_symlink():
        return []
    try:
        data = load_json(path, "rehearsal")  # bounded: size, nesting, number length, regular file only
    except InputError as exc:
        raise RecordError("; ".join(f"{path.name}: {f.message}" for f in exc.findings)) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("rehearsals"), list):
        raise RecordError(f"{path.name}: not a {FORMAT} record")
    return [r for r in data["rehearsals"] if isinstance(r, dict)]


def last_passed(rehearsals: list[dict]) -> date | None:
    """The date of the newest passed rehearsal."""
    dates = []
    for r in rehearsals:
        if r.get("result") != "passed" or not isinstance(r.get("date"), str):
            continue
        try:
            dates.append(datetime.fromisoformat(r["date"].replace("Z", "+00:00")).date())
        except ValueError:
            continue
    return max(dates, default=None)


def last_passed_seconds(rehearsals: list[dict]) -> float | None:
    """How long the newest passed rehearsal took (its `seconds`: the restores and the checks, timed by
    `clusterdef drill`), None when no passed rehearsal records a duration (service-rto-* checks)."""
    best: tuple[datetime, float] | None = None
    for r in rehearsals:
        secs = r.get("seconds")
        if r.get("result") != "passed" or not isinstance(r.get("date"), str) or isinstance(secs, bool) \
                or not isinstance(secs, (int, float)) or secs < 0:
            continue
        try:
            when = datetime.fromisoformat(r["date"].replace("Z", "+00:00"))
        except ValueError:
            continue
        when = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
        if best is None or when > best[0]:
            best = (when, float(secs))
    return None if best is None else best[1]


def append_record(path: Path, entry: dict) -> None:
    rehearsals = read_record(path)
    rehearsals.append(entry)
    text = json.dumps({"format": FORMAT, "rehearsals": rehearsals}, indent=2, sort_keys=True) + "\n"
    # a fresh temporary sibling, removed on failure (a fixed `.tmp` name was written through whatever it was,
    # a link included, and left half-written when the write failed); writer.OutputError names the path
    write_file_atomic(path, text)
