"""Privileged workloads (the `privileged` approvals, docs/data.md): which tenant namespaces may run which
root-equivalent pod features, which directory groups get a Slurm AdminLevel, and who may submit to a
root-equivalent partition. The renderers (kubernetes/admission.py, slurm, identity) and validation read
these decisions; nothing here renders."""

from __future__ import annotations

from .model import Definition

LEVELS = ("None", "Operator", "Administrator")


def tenant_features(d: Definition) -> dict[str, tuple[str, ...]]:
    """tenant -> the pod features approved for its namespace (union over approvals, in FEATURES order)."""
    from .model.privileged import FEATURES

    got: dict[str, set[str]] = {}
    for a in d.privileged.values():
        if a.kubernetes:
            for t in a.kubernetes.tenants:
                got.setdefault(t, set()).update(a.kubernetes.features)
    return {t: tuple(f for f in FEATURES if f in fs) for t, fs in got.items()}


def approvals_of_tenant(d: Definition, tenant: str) -> list[str]:
    return [n for n, a in d.privileged.items() if a.kubernetes and tenant in a.kubernetes.tenants]


def partition_groups(d: Definition, partition: str) -> tuple[str, ...]:
    """Directory groups approved for a root-equivalent partition (its AllowGroups)."""
    return tuple(dict.fromkeys(g for a in d.privileged.values() if a.slurm and partition in a.slurm.partitions
                               for g in a.slurm.groups))


def admin_levels(d: Definition) -> dict[str, str]:
    """directory group -> the Slurm AdminLevel approved for its members (the highest over approvals)."""
    out: dict[str, str] = {}
    for a in d.privileged.values():
        if a.slurm and a.slurm.admin_level != "None":
            for g in a.slurm.groups:
                if LEVELS.index(a.slurm.admin_level) > LEVELS.index(out.get(g, "None")):
                    out[g] = a.slurm.admin_level
    return out


def approved_by(d: Definition, group: str) -> str:
    """The approvals granting a Slurm group something, as `name by approver, reference` (rendered comments)."""
    return "; ".join(f"{n} by {a.approver}, {a.reference}" for n, a in d.privileged.items()
                     if a.slurm and group in a.slurm.groups)


def partition_approvals(d: Definition, partition: str) -> str:
    return "; ".join(f"{n} by {a.approver}, {a.reference}" for n, a in d.privileged.items()
                     if a.slurm and partition in a.slurm.partitions)
