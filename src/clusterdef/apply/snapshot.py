"""The rollback point `clusterdef apply` records before its first change.

Before any playbook touches a node, `write(pdd, old, new)` copies both definitions and both
rendered trees into `<private data dir>/snapshot/` (the old tree is what a rollback goes back to)
with a sha256 per file; the run record names the folder and the hashes. The first step of the
prepare stage then runs `snapshot.yml`, which collects every node's versions with the gpu_facts
role and fetches them to `snapshot/facts/<host>.json`; `versions(dir, hosts)` reads those files
(node data: bounded, typed like `clusterdef drift --facts`) and groups hosts with the same
versions, so the record stays small on thousands of nodes. A host without a readable facts file
fails the step: no node is changed without its versions on record.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .. import hostlist
from ..writer import write_file_atomic
from ..plan.diff import tree_hash

FOLDER = "snapshot"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write(pdd: Path, old, new) -> dict:
    """Both sides' definition text and rendered tree under pdd/snapshot/{from,to}/; returns the
    run record's `snapshot` entry (folder, per side: file label, definition and tree sha256)."""
    root = Path(pdd) / FOLDER
    entry: dict = {"dir": str(root), "facts_dir": str(root / "facts")}
    for side, s in (("from", old), ("to", new)):
        if s is None:  # a bring-up plan: nothing to go back to
            entry[side] = None
            continue
        base = root / side
        write_file_atomic(base / "definition.yaml", s.text)
        for rel, text in s.tree.items():
            write_file_atomic(base / "tree" / rel, text)
        manifest = {rel: _sha(text) for rel, text in sorted(s.tree.items())}
        write_file_atomic(base / "manifest.json", json.dumps(manifest, indent=1) + "\n")
        entry[side] = {"file": s.label, "definition_sha256": _sha(s.text), "tree_sha256": tree_hash(s.tree),
                       "files": len(manifest)}
    (root / "facts").mkdir(parents=True, exist_ok=True)
    return entry


def versions(facts_dir: Path, hosts: list[str]) -> tuple[list[dict], list[str]]:
    """(groups of hosts with the same recorded versions, hosts without a readable facts file).
    Each facts file is read as `clusterdef drift --facts` reads one (bounded, checked)."""
    from ..drift import FactsError, read_facts

    by_versions: dict[str, tuple[dict, list[str]]] = {}
    missing: list[str] = []
    for host in hosts:
        path = Path(facts_dir) / f"{host}.json"
        try:
            records = read_facts(path) if path.is_file() else []
        except FactsError:
            records = []
        doc = next((item for _, item in records if item["host"] == host), None)
        if doc is None:
            missing.append(host)
            continue
        key = json.dumps(doc.get("versions", {}), sort_keys=True)
        by_versions.setdefault(key, (doc.get("versions", {}), []))[1].append(host)
    groups = [{"hosts": hostlist.fold(hs), "count": len(hs), "versions": v}
              for v, hs in sorted(by_versions.values(), key=lambda vh: -len(vh[1]))]
    return groups, missing
