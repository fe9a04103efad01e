"""The plan file on disk: its schema, the hash sealing the whole document, and where a plan
file differs from the plan the definitions give.

A plan file is hostile input like any other: `apply` validates its structure here, then
re-derives the plan from the two definitions and refuses any difference (a flipped `refused`,
a deleted canary, pasted waves), and checks `plan_sha256` over everything else. Steps are
built from the re-derived plan, never from the file's stages.
"""

from __future__ import annotations

import hashlib
import json
import re

import jsonschema

HASH_FIELD = "plan_sha256"
# Approvals recorded after the plan was sealed (`clusterdef approve`, plan/approvals.py): outside the seal,
# each record bound to it by its own plan_sha256.
RECORDS = "approval_records"
_STR, _INT, _BOOL = {"type": "string"}, {"type": "integer", "minimum": 0}, {"type": "boolean"}
_SHA = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_STRS = {"type": "array", "items": _STR}
_PROBLEMS = {"type": "array", "items": {"type": "object", "required": ["code", "message", "hint"],
                                        "properties": {"code": _STR, "message": _STR, "hint": _STR}}}
_SIDE = {"type": "object", "additionalProperties": False,
         "required": ["file", "set", "status", "definition_sha256", "tree_sha256"],
         "properties": {"file": _STR, "set": _STR, "status": _STR, "definition_sha256": _SHA, "tree_sha256": _SHA}}
_STAGE = {"type": "object", "additionalProperties": False,
          "required": ["name", "kind", "nodes", "hosts", "switches", "steps", "gates", "provisioning", "boot"],
          "properties": {"name": _STR, "nodes": _INT, "hosts": _STR, "switches": _STRS, "steps": _STRS,
                         "gates": _STRS, "provisioning": {"enum": ["", "stateless", "stateful"]},
                         "boot": {"type": "object", "additionalProperties": False,
                                  "properties": {"to": _STR, "back": _STR, "groups": _STR}},
                         "driver": {"type": "object", "additionalProperties": False, "required": ["pool", "canary"],
                                    "properties": {"pool": _STR, "canary": _STR}},
                         "delivery": {"type": "array", "items": {
                             "type": "object", "required": ["via", "playbook", "files", "removed", "hosts"],
                             "properties": {"via": {"enum": ["deliver", "role", "pulumi"]}, "playbook": _STR,
                                            "files": _STRS, "removed": _STRS, "hosts": _STR}}},
                         "services": _STRS,
                         "kind": {"enum": ["image", "prepare", "canary", "rollback-drill", "control-plane", "wave",
                                           "boot-default", "driver-pool", "driver-hold", "deliver", "nodes",
                                           "admit"]}}}
_TEXT = {"type": "string", "maxLength": 500}
_KIND = {"type": "string", "pattern": "^[a-z][a-z0-9_.-]{0,63}$"}  # plan/audit.py KIND
_CHANGE_KEY = {"type": "object", "additionalProperties": False, "required": ["kind", "subject"],
               "properties": {"kind": _KIND, "subject": {"type": "string", "maxLength": 256}}}
_NEEDS_APPROVAL = {"type": "array", "items": {  # plan/audit.py: one entry per change and group that may approve it
    "type": "object", "additionalProperties": False, "required": ["kind", "subject", "group", "why"],
    "properties": {"kind": _KIND, "subject": {"type": "string", "maxLength": 256},
                   "group": {"type": "string", "maxLength": 256}, "why": _TEXT}}}
_APPROVAL = {  # plan/approvals.py: who, for which group, when, why, what it covers, the plan it approves
    "type": "object", "additionalProperties": False,
    "required": ["group", "by", "at", "why", "covers", HASH_FIELD],
    "properties": {"group": {"type": "string", "maxLength": 256}, "by": {"type": "string", "maxLength": 128},
                   "at": {"type": "string", "maxLength": 40}, "why": _TEXT, HASH_FIELD: _SHA,
                   "covers": {"type": "object", "additionalProperties": False, "minProperties": 1,
                              "maxProperties": 1,
                              "properties": {"stage": {"type": "string", "maxLength": 200},
                                             "class": {"enum": ["reflash", "reboot", "driver-reload", "restart",
                                                                "live"]},
                                             "change": _CHANGE_KEY}}}}
# The fields apply reads are typed exactly; the others only by kind (the comparison with the
# re-derived plan checks their content).
SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["plan_format", "clusterdef", "cluster", "from", "to", "refused", "refusals", "warnings",
                 "canary_only", "set_change", "compatibility", "changes", "images", "disruption", "rollout", "files",
                 "kubernetes_objects", HASH_FIELD],
    "properties": {
        "plan_format": {"const": 1}, "clusterdef": _STR, "cluster": _STR, "from": _SIDE, "to": _SIDE,
        "refused": _BOOL, "refusals": _PROBLEMS, "warnings": _PROBLEMS, "canary_only": _BOOL,
        "set_change": {"type": "object"}, "compatibility": {"type": ["object", "null"]},
        "changes": {"type": "array"}, "images": {"type": "array"}, "disruption": {"type": "object"},
        "files": {"type": "array"},
        "kubernetes_objects": {"type": "array"}, HASH_FIELD: _SHA, "bringup": _BOOL,
        "approvals": {"type": "object", "additionalProperties": _STRS},  # disruption -> approver groups (service)
        "changes_needing_approval": _NEEDS_APPROVAL,
        RECORDS: {"type": "array", "maxItems": 256, "items": _APPROVAL},
        "slurm_transition": {"type": "object", "additionalProperties": False,
                             "required": ["from", "to", "held_back", "files"],
                             "properties": {"from": _STR, "to": _STR,
                                            "held_back": {"type": "array", "items": {
                                                "type": "object", "additionalProperties": False,
                                                "required": ["key", "file", "value", "why"],
                                                "properties": {"key": _STR, "file": _STR, "value": _STR,
                                                               "why": _STR}}},
                                            "files": {"type": "object", "additionalProperties": _STR}}},
        "rollout": {"type": "object", "additionalProperties": False,
                    "required": ["layer_order", "canary", "waves", "waves_withheld", "wave_size", "gates",
                                 "rollback", "stages"],
                    "properties": {
                        "layer_order": _STRS, "waves": _INT, "waves_withheld": _INT, "wave_size": _INT,
                        "gates": _STRS, "stages": {"type": "array", "items": _STAGE},
                        "canary": {"type": "object", "additionalProperties": False, "required": ["hosts", "nodes"],
                                   "properties": {"hosts": _STR, "nodes": _INT}},
                        "max_unavailable_pct": _INT,
                        "schedule": {"type": "object"},  # the stages in the maintenance windows (plan/windows.py)
                        "estimate": {
                            "type": "object", "additionalProperties": False,
                            "required": ["minutes", "gpu_nodes", "lowest_nodes", "timing", "timeline"],
                            "properties": {
                                "minutes": _INT, "gpu_nodes": _INT, "lowest_nodes": {"type": "integer"},
                                "timing": {"type": "object", "additionalProperties": _INT},
                                "timeline": {"type": "array", "items": {
                                    "type": "object", "additionalProperties": False,
                                    "required": ["stage", "start", "minutes", "nodes_down"],
                                    "properties": {"stage": _STR, "start": _INT, "minutes": _INT,
                                                   "nodes_down": _INT}}}}},
                        "floors": {"type": "array", "items": {
                            "type": "object", "additionalProperties": False,
                            "required": ["kind", "name", "nodes", "gpus", "lowest_nodes", "lowest_gpus", "lowest_pct"],
                            "properties": {"kind": _STR, "name": _STR, "nodes": _INT, "gpus": _INT,
                                           "lowest_nodes": _INT, "lowest_gpus": _INT,
                                           "lowest_pct": {"type": "number", "minimum": 0, "maximum": 100}}}},
                        "kubernetes_canaries": {"type": "array", "items": {
                            "type": "object", "additionalProperties": False,
                            "required": ["by", "name", "hosts", "nodes"],
                            "properties": {"by": {"enum": ["driver-pool", "node-group"]}, "name": _STR,
                                           "hosts": _STR, "nodes": _INT}}},
                        "rollback": {"type": "object", "additionalProperties": False,
                                     "required": ["target", "exercised_on_canary", "point"],
                                     "properties": {"target": {"type": ["string", "null"]},
                                                    "exercised_on_canary": _BOOL,
                                                    "point": {"type": "object", "additionalProperties": False,
                                                              "required": ["file", "set", "definition_sha256",
                                                                           "tree_sha256"],
                                                              "properties": {"file": _STR, "set": _STR,
                                                                             "definition_sha256": _SHA,
                                                                             "tree_sha256": _SHA}}}}}},
    },
}
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_ .-]{0,40}")


def canonical(doc: dict) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def plan_hash(doc: dict) -> str:
    """sha256 of the canonical JSON of the whole document except the hash field itself and the approvals
    recorded after it was sealed (each bound to the hash by its own plan_sha256)."""
    return hashlib.sha256(canonical({k: v for k, v in doc.items() if k not in (HASH_FIELD, RECORDS)}).encode()
                          ).hexdigest()


def seal(doc: dict) -> dict:
    """The plan file's document: the plan (through JSON, as it will be read back) and its hash."""
    doc = json.loads(json.dumps(doc))
    return {**doc, HASH_FIELD: plan_hash(doc)}


def _show(value, limit: int = 80) -> str:
    """A hostile value for a message: JSON (control characters escaped), cut short."""
    text = json.dumps(value, ensure_ascii=True, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + "..."


def _key(path: str, key) -> str:
    part = key if isinstance(key, str) and _PLAIN_KEY.fullmatch(key) else _show(key, 40)
    return f"{path}.{part}" if path else part


def _field(path) -> str:
    out = ""
    for p in path:
        out = f"{out}[{p}]" if isinstance(p, int) else _key(out, p)
    return out or "(top level)"


def schema_problems(doc) -> list[str]:
    """One line per structural problem, naming the field; never echoes more than a short value."""
    out = []
    for e in sorted(jsonschema.Draft202012Validator(SCHEMA).iter_errors(doc), key=lambda e: list(map(str, e.path))):
        where, v, want = _field(e.absolute_path), e.validator, e.validator_value
        if v == "required":
            missing = [k for k in want if not isinstance(e.instance, dict) or k not in e.instance]
            out += [f"{_key(_field(e.absolute_path) if e.absolute_path else '', k)}: missing" for k in missing]
        elif v == "additionalProperties":
            extra = [k for k in e.instance if k not in e.schema.get("properties", {})]
            out += [f"{_key(_field(e.absolute_path) if e.absolute_path else '', k)}: unknown field" for k in extra]
        elif v == "type":
            out.append(f"{where}: must be {' or '.join(want) if isinstance(want, list) else want}, "
                       f"not {_show(e.instance, 40)}")
        elif v == "const" and where == "plan_format":
            out.append(f"plan_format: unknown version {_show(e.instance, 20)} (this clusterdef reads {want})")
        elif v in ("const", "enum"):
            out.append(f"{where}: must be one of {_show(want if v == 'enum' else [want])}, not "
                       f"{_show(e.instance, 40)}")
        elif v == "pattern":
            out.append(f"{where}: must be a sha256 (64 hex digits), not {_show(e.instance, 40)}")
        else:
            out.append(f"{where}: {v} {_show(want, 40)} not met by {_show(e.instance, 40)}")
    return list(dict.fromkeys(out))


def _named(items: list) -> bool:
    names = [x.get("name") for x in items if isinstance(x, dict)]
    return len(names) == len(items) and all(isinstance(n, str) for n in names) and len(set(names)) == len(names)


def differences(recorded, derived, path: str = "", limit: int = 20) -> list[str]:
    """Where the plan file (`recorded`) differs from the re-derived plan, one line each, e.g.
    `rollout.stages["canary"]: missing from the plan file`. Lists of named items (stages) are
    matched by name, so a deleted or pasted stage is named rather than shifting every index."""
    out: list[str] = []

    def walk(a, b, path: str) -> None:
        if len(out) >= limit:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for k in [*b, *(k for k in a if k not in b)]:
                p = _key(path, k)
                if k not in a:
                    out.append(f"{p}: missing from the plan file")
                elif k not in b:
                    out.append(f"{p}: in the plan file, not in the plan the definitions give")
                else:
                    walk(a[k], b[k], p)
        elif isinstance(a, list) and isinstance(b, list) and a and b and _named(a) and _named(b):
            by_a, by_b = {x["name"]: x for x in a}, {x["name"]: x for x in b}
            for name in by_b:
                if name not in by_a:
                    out.append(f"{path}[{_show(name, 40)}]: missing from the plan file")
            for name in by_a:
                if name not in by_b:
                    out.append(f"{path}[{_show(name, 40)}]: in the plan file, not in the plan the definitions give")
            for name in by_b:
                if name in by_a:
                    walk(by_a[name], by_b[name], f"{path}[{_show(name, 40)}]")
            if [n for n in by_a if n in by_b] != [n for n in by_b if n in by_a]:
                out.append(f"{path}: in a different order than the plan the definitions give")
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{path}[{i}]")
        elif a != b or type(a) is not type(b):  # type: true is not 1
            out.append(f"{path}: the plan file says {_show(a)}, the definitions give {_show(b)}")

    walk(recorded, json.loads(json.dumps(derived)), path)
    return out if len(out) < limit else [*out[:limit], "... and more differences"]


def forgeries(recorded: dict, derived: dict) -> list[str]:
    """Why a plan file is not the plan `clusterdef plan` writes for these definitions: every
    difference from the re-derived plan (the file's own hash and recorded approvals left aside, the
    approvals are checked by plan/approvals.py), then a hash that does not match the file's own document."""
    out = differences({k: v for k, v in recorded.items() if k not in (HASH_FIELD, RECORDS)}, derived)
    if recorded.get(HASH_FIELD) != plan_hash(recorded):
        out.append(f"{HASH_FIELD}: does not match the plan document (edited after `clusterdef plan` wrote it)")
    return out
