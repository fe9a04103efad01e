"""NVIDIA's Xid catalogue (xid.csv, copied from shared/reference/nvidia-xid/xid.csv; provenance in
xid.csv.source): Xid code -> mnemonic, category and the catalogue's immediate-action bucket.

The health check (render/slurm nodecheck) drains a node for a new Xid in the kernel log unless the
catalogue's action is one the node itself needs nothing for (xid_nodecheck.csv, each row with its
source): IGNORE (informational), RESTART_APP (the application's fault, e.g. Xid 13/31 from a bad
kernel) and WORKFLOW_XID_45 (Xid 45: the driver cleaning up after an application that was ended,
which every scancelled, timed-out or preempted CUDA job leaves). An Xid the catalogue does not list,
or an action the table does not classify, drains too: an error nobody has classified is not a
healthy node."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).with_name("xid.csv")
NODECHECK = Path(__file__).with_name("xid_nodecheck.csv")


@lru_cache(maxsize=1)
def node_actions() -> dict[str, str]:
    """Catalogue action -> what the health check does with the node: "keep" or "drain"."""
    with NODECHECK.open(encoding="utf-8", newline="") as fh:
        return {r["action"]: r["node"] for r in csv.DictReader(fh)}


@dataclass(frozen=True)
class Xid:
    code: int
    name: str
    category: str
    action: str

    @property
    def drains(self) -> bool:
        return node_actions().get(self.action, "drain") != "keep"


@lru_cache(maxsize=1)
def catalogue() -> dict[int, Xid]:
    with DATA.open(encoding="utf-8", newline="") as fh:
        return {int(r["xid"]): Xid(int(r["xid"]), r["name"], r["category"], r["action"]) for r in csv.DictReader(fh)}
