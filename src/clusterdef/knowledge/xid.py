"""NVIDIA's Xid catalogue (xid.csv, copied from shared/reference/nvidia-xid/xid.csv; provenance in
xid.csv.source): Xid code -> mnemonic, category and the catalogue's immediate-action bucket.

The health check (render/slurm nodecheck) drains a node for an Xid in the kernel log since boot unless
the catalogue's action is one the node itself needs nothing for: IGNORE (informational) or RESTART_APP
(the application's fault, e.g. Xid 13/31 from a bad kernel). An Xid the catalogue does not list drains
too: an error nobody has classified is not a healthy node."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).with_name("xid.csv")
HARMLESS = frozenset({"IGNORE", "RESTART_APP"})


@dataclass(frozen=True)
class Xid:
    code: int
    name: str
    category: str
    action: str

    @property
    def drains(self) -> bool:
        return self.action not in HARMLESS


@lru_cache(maxsize=1)
def catalogue() -> dict[int, Xid]:
    with DATA.open(encoding="utf-8", newline="") as fh:
        return {int(r["xid"]): Xid(int(r["xid"]), r["name"], r["category"], r["action"]) for r in csv.DictReader(fh)}
