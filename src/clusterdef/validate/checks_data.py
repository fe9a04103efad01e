"""Regulated data and privileged workloads (the `datasets` and `privileged` sections, docs/data.md): every
dataset lies inside a defined filesystem, names real tenants, node groups and filesystems, reaches each
tenant it authorises, and keeps no copy longer than its retention; every root-equivalent grant (a
privileged partition, a namespace at Pod Security `privileged`) has an approval, and every approval
names what exists."""

from __future__ import annotations

from typing import Iterable

from .. import datasets
from ..errors import Finding, error, warning
from ..model.storage import QUOTA_KINDS
from .registry import Context, check


def _covers(parent: str, path: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


@check("dataset-references")
def dataset_references(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    for name, ds in d.datasets.items():
        at = ("datasets", name)
        fs = d.filesystems.get(ds.filesystem)
        if fs is None:
            yield error("dataset-filesystem-unknown", at + ("filesystem",),
                        f"dataset `{name}` lies on filesystem `{ds.filesystem}`, which `filesystems` does not define",
                        f"name one of: {', '.join(d.filesystems) or '(none: add a filesystems entry)'}")
        elif datasets.relative(d, name) is None:
            yield error("dataset-path-outside-filesystem", at + ("path",),
                        f"dataset `{name}`'s path {ds.path} is not inside filesystem `{ds.filesystem}` "
                        f"(mounted at {fs.mount})",
                        f"give a path below {fs.mount.rstrip('/')}/ (not the mount itself, no '.' or '..')")
        for i, t in enumerate(ds.tenants):
            if t not in d.tenants:
                yield error("dataset-tenant-unknown", at + ("tenants", i),
                            f"dataset `{name}` authorises tenant `{t}`, which `tenants` does not define",
                            f"name one of: {', '.join(d.tenants) or '(none)'}")
        for i, g in enumerate(ds.destinations.node_groups):
            if g not in d.nodes:
                yield error("dataset-node-group-unknown", at + ("destinations", "node_groups", i),
                            f"dataset `{name}` may go to node group `{g}`, which `nodes` does not define",
                            f"name one of: {', '.join(d.nodes)}")
            elif fs is not None and g not in fs.node_groups:
                yield error("dataset-destination-unmounted", at + ("destinations", "node_groups", i),
                            f"dataset `{name}` may go to node group `{g}`, but its filesystem `{ds.filesystem}` "
                            f"is not mounted there (only on {', '.join(fs.node_groups)})",
                            f"add `{g}` to filesystems.{ds.filesystem}.node_groups, or remove it here")
        for i, f in enumerate(ds.destinations.filesystems):
            if f not in d.filesystems:
                yield error("dataset-filesystem-unknown", at + ("destinations", "filesystems", i),
                            f"dataset `{name}` may be copied to filesystem `{f}`, which `filesystems` does not define",
                            f"name one of: {', '.join(d.filesystems) or '(none)'}")
        if ds.quota_tib is not None and fs is not None and fs.kind not in QUOTA_KINDS:
            yield error("dataset-quota-unsupported", at + ("quota_tib",),
                        f"dataset `{name}` asks for a {ds.quota_tib:g} TiB quota on `{ds.filesystem}` ({fs.kind}), "
                        "which has no project quota clusterdef can set",
                        f"put it on a {', '.join(QUOTA_KINDS)} filesystem, or remove quota_tib and enforce "
                        "the limit on the server")
        if (ds.tenants or ds.groups) and (d.identity is None or d.identity.directory is None):
            yield error("dataset-group-unresolved", at + ("tenants" if ds.tenants else "groups",),
                        f"dataset `{name}` is granted to directory groups, but no `identity.directory` makes "
                        "them known on the nodes: its ACL entries could not resolve",
                        "declare identity.directory (SSSD), so the groups exist on every node")
        if not datasets.reader_groups(d, name) and fs is not None:
            yield warning("dataset-reader-missing", at,
                          f"dataset `{name}` grants no group: only its owner can read it",
                          "name tenants (with identity.tenant_groups) or groups")


@check("dataset-reach")
def dataset_reach(ctx: Context) -> Iterable[Finding]:
    """Each authorised tenant can read it somewhere; it goes nowhere it is not authorised to without a warning."""
    d = ctx.definition
    for name, ds in d.datasets.items():
        at = ("datasets", name)
        fs = d.filesystems.get(ds.filesystem)
        if fs is None or datasets.relative(d, name) is None:
            continue
        mounted = datasets.node_groups(d, name)
        for i, t in enumerate(ds.tenants):
            if t in d.tenants and not datasets.tenant_reach(d, name, t):
                runs = datasets.tenant_groups_run(d, t)
                yield error("dataset-tenant-unreachable", at + ("tenants", i),
                            f"dataset `{name}` is authorised for tenant `{t}`, whose work runs on "
                            f"{', '.join(runs) or 'no node group'}, where it is not mounted "
                            f"(filesystem `{ds.filesystem}` on {', '.join(fs.node_groups)}; destinations "
                            f"{', '.join(ds.destinations.node_groups) or 'none'})",
                            "add a node group the tenant runs on to destinations.node_groups (and to the "
                            "filesystem's node_groups), or remove the tenant")
        wider = [g for g in fs.node_groups if g in d.nodes and g not in mounted]
        if wider and ds.classification in ("restricted", "export-controlled"):
            yield warning("dataset-filesystem-wider", at + ("destinations", "node_groups"),
                          f"{ds.classification} dataset `{name}` is not authorised for node groups {', '.join(wider)}, "
                          f"yet they mount its filesystem `{ds.filesystem}`: only its ACL keeps it from readers there",
                          "put it on a filesystem mounted only where it may go, or authorise those groups")
        others = sorted(f for f, x in d.filesystems.items() if f != ds.filesystem
                        and f not in ds.destinations.filesystems and any(g in x.node_groups for g in mounted))
        if others:
            yield warning("dataset-copy-unguarded", at + ("destinations", "filesystems"),
                          f"dataset `{name}` is mounted where filesystem(s) {', '.join(others)} are too: "
                          "nothing on a node keeps a reader from copying it there",
                          "name them in destinations.filesystems if copies there are allowed, or keep the "
                          "dataset off those node groups")


@check("dataset-retention")
def dataset_retention(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    for name, ds in d.datasets.items():
        at = ("datasets", name)
        if ds.backup and d.backup is None:
            yield warning("dataset-backup-missing", at + ("backup",),
                          f"dataset `{name}` is to be backed up, but the definition has no `backup` section",
                          "add the backup section, or set backup: false")
        if d.backup is None:
            continue
        kept_days = d.backup.retention.window_hours / 24
        for sname, s in d.backup.authoritative.sets.items():
            for i, p in enumerate(s.paths):
                if _covers(p, ds.path) and kept_days > ds.retention_days:
                    yield error("dataset-retention-exceeded", ("backup", "authoritative", "sets", sname, "paths", i),
                                f"backup set `{sname}` holds dataset `{name}` ({p}) and keeps snapshots "
                                f"{kept_days:g} days (backup.retention), longer than its retention of "
                                f"{ds.retention_days} days",
                                f"leave {ds.path} out of the set: the dataset's own backup "
                                f"({datasets.backup_role(name)}) keeps it exactly its retention")


@check("privileged-approvals")
def privileged_approvals(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    parts = d.slurm.partitions if d.slurm else {}
    approved_parts = {p for a in d.privileged.values() if a.slurm for p in a.slurm.partitions}
    for pname, p in parts.items():
        if p.privileged and pname not in approved_parts:
            yield error("privileged-without-approval", ("slurm", "partitions", pname, "privileged"),
                        f"partition `{pname}` is root-equivalent, and no `privileged` approval names it: "
                        "it is rendered AllowGroups=root (nobody may submit)",
                        "add a privileged approval with slurm.partitions: [" + pname + "] and the groups approved")
    # a namespace at Pod Security `privileged` without an approval: tenant-privileged-pods (checks_identity.py)
    for aname, a in d.privileged.items():
        at = ("privileged", aname)
        if a.kubernetes:
            for i, tn in enumerate(a.kubernetes.tenants):
                tk = d.tenants[tn].kubernetes if tn in d.tenants else None
                if tk is None:
                    yield error("privileged-approval-unknown", at + ("kubernetes", "tenants", i),
                                f"approval `{aname}` names tenant `{tn}`, which "
                                + ("`tenants` does not define" if tn not in d.tenants
                                   else "has no Kubernetes namespace"),
                                "name a tenant with a kubernetes namespace: "
                                + (", ".join(n for n, x in d.tenants.items() if x.kubernetes) or "(none)"))
                elif tk.pod_security not in (None, "privileged"):
                    yield error("privileged-approval-refused", at + ("kubernetes", "tenants", i),
                                f"approval `{aname}` opens {', '.join(a.kubernetes.features)} for tenant `{tn}`, whose "
                                f"namespace enforces Pod Security `{tk.pod_security}` "
                                "and refuses them before the admission policy is asked",
                                f"remove tenants.{tn}.kubernetes.pod_security (an approval makes it privileged)")
        if a.slurm:
            for i, pn in enumerate(a.slurm.partitions):
                if pn not in parts:
                    yield error("privileged-approval-unknown", at + ("slurm", "partitions", i),
                                f"approval `{aname}` names partition `{pn}`, which `slurm.partitions` does not define",
                                f"name one of: {', '.join(parts) or '(none)'}")
                elif not parts[pn].privileged:
                    yield error("privileged-approval-unknown", at + ("slurm", "partitions", i),
                                f"approval `{aname}` names partition `{pn}`, which is not root-equivalent "
                                "(`privileged: true`): the approval would grant nothing there",
                                f"mark slurm.partitions.{pn}.privileged, or remove it from the approval")
            if a.slurm.admin_level == "None" and not a.slurm.partitions:
                yield warning("privileged-approval-empty", at + ("slurm",),
                              f"approval `{aname}` grants its Slurm groups neither an AdminLevel nor a partition",
                              "give admin_level or partitions, or remove the slurm grant")
