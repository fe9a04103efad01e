"""Changes that need an approver (issue 31, item 5; docs/data.md "Audit"): between two definitions,
every change of a dataset's classification or authorisations (readers, tenants, destinations, retention)
and of a privileged-workload approval, each naming the directory group that must approve it.

A dataset's change is approved by its own `approver`, else by `service.approvers` (the groups of the
most disruptive class listed there, the operating model's owners), else by the admin groups; a
privileged approval's change by the approver it names (the new one, and the old one when it changes).
Pure: `plan` puts the list into the plan file and `apply` refuses a plan whose changes lack a recorded
approval (apply/, not here)."""

from __future__ import annotations

from .model import Definition

# The fields of a dataset whose change is a change of who may have it or how it is held.
DATASET_FIELDS = ("classification", "tenants", "groups", "destinations", "retention_days", "filesystem", "path",
                  "kind", "backup", "mount")
_CLASS_ORDER = ("reflash", "reboot", "driver-reload", "restart", "live")


def _fallback_groups(d: Definition) -> tuple[str, ...]:
    if d.service is not None:
        for key in _CLASS_ORDER:
            groups = d.service.approvers.get(key)  # type: ignore[call-overload]
            if groups:
                return tuple(groups)
    return tuple(d.identity.admin_groups) if d.identity else ()


def dataset_approvers(d: Definition, name: str) -> tuple[str, ...]:
    ds = d.datasets.get(name)
    if ds is not None and ds.approver:
        return (ds.approver,)
    return _fallback_groups(d)


def _dump(model) -> dict:
    return model.model_dump(mode="json") if model is not None else {}


def _changed_fields(a, b) -> list[str]:
    da, db = _dump(a), _dump(b)
    return [f for f in DATASET_FIELDS if da.get(f) != db.get(f)]


def _change(kind: str, subject: str, groups: tuple[str, ...], why: str) -> list[dict]:
    if not groups:
        return [{"kind": kind, "subject": subject, "group": "",
                 "why": why + " (no approver group is defined: name one in the dataset, service.approvers or "
                        "identity.admin_groups)"}]
    return [{"kind": kind, "subject": subject, "group": g, "why": why} for g in groups]


def changes_needing_approval(old: Definition, new: Definition) -> list[dict]:
    """[{kind, subject, group, why}] for every dataset and privileged-approval change from `old` to `new`,
    one entry per approver group (any one of a dataset's groups approves it: they are listed so the plan
    names them all). Sorted by kind, then subject."""
    out: list[dict] = []
    for name in sorted(set(old.datasets) | set(new.datasets)):
        a, b = old.datasets.get(name), new.datasets.get(name)
        subject = f"datasets.{name}"
        groups = dataset_approvers(new if b is not None else old, name)
        if a is None and b is not None:
            out += _change("dataset-added", subject, groups,
                           f"new {b.kind} `{name}` ({b.classification}) readable by "
                           f"{', '.join(b.tenants + b.groups) or 'nobody'}")
        elif b is None and a is not None:
            out += _change("dataset-removed", subject, groups,
                           f"{a.kind} `{name}` ({a.classification}) leaves the definition: its ACL, mounts and "
                           "retention are no longer managed")
        elif a is not None and b is not None:
            if a.classification != b.classification:
                out += _change("dataset-classification", subject + ".classification", groups,
                               f"classification {a.classification} -> {b.classification}")
            fields = [f for f in _changed_fields(a, b) if f != "classification"]
            if fields:
                why = "; ".join(f"{f}: {_dump_field(a, f)} -> {_dump_field(b, f)}" for f in fields)
                out += _change("dataset-authorisation", subject, groups, why)
            if a.approver != b.approver and a.approver and a.approver not in groups:
                out += _change("dataset-approver", subject + ".approver", (a.approver,),
                               f"approver {a.approver} -> {b.approver or 'service.approvers'}")
    for name in sorted(set(old.privileged) | set(new.privileged)):
        a2, b2 = old.privileged.get(name), new.privileged.get(name)
        subject = f"privileged.{name}"
        if a2 == b2:
            continue
        groups2 = tuple(dict.fromkeys(x.approver for x in (b2, a2) if x is not None))
        if a2 is None and b2 is not None:
            why = f"new privileged approval `{name}` ({b2.reference}): {_grant_text(b2)}"
        elif b2 is None and a2 is not None:
            why = f"privileged approval `{name}` ({a2.reference}) withdrawn: {_grant_text(a2)}"
        else:
            why = f"privileged approval `{name}` changed: {_grant_text(a2)} -> {_grant_text(b2)}"
        out += _change("privileged-approval", subject, groups2, why)
    return sorted(out, key=lambda c: (c["kind"], c["subject"], c["group"] or ""))


def _dump_field(ds, field: str) -> str:
    v = _dump(ds)[field]
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_short(x)}" for k, x in v.items() if x) + "}"
    return _short(v)


def _short(v) -> str:
    return "[" + ", ".join(str(x) for x in v) + "]" if isinstance(v, list) else str(v)


def _grant_text(a) -> str:
    parts = []
    if a.kubernetes:
        parts.append(f"pods with {', '.join(a.kubernetes.features)} in {', '.join(a.kubernetes.tenants)}")
    if a.slurm:
        parts.append(f"Slurm {', '.join(a.slurm.groups)}: AdminLevel {a.slurm.admin_level}"
                     + (f", partitions {', '.join(a.slurm.partitions)}" if a.slurm.partitions else ""))
    return "; ".join(parts) or "nothing"
