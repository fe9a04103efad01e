"""Storage target: tenants' quotas and scratch expiry, per filesystem.

    storage/<fs>/quota.sh                     idempotent: each tenant's directory `<mount>/<tenant>`
                                              with its project quota, in the filesystem's own tool
    storage/<fs>/scratch-cleanup.sh           (scratch filesystems) removes files in tenants'
                                              directories not accessed for their expiry; nothing else
    storage/<fs>/clusterdef-scratch-<fs>.service/.timer   runs the cleanup daily

Quota commands per kind, as each tool documents them:
    btrfs   `btrfs quota enable`, a subvolume per tenant, `btrfs qgroup limit BYTES DIR` (btrfs-qgroup(8))
    xfs     `xfs_quota -x -c 'project -s -p DIR ID'` and `-c 'limit -p bhard=Nk ID'` (xfs_quota(8))
    lustre  `lfs project -p ID -s -r DIR` and `lfs setquota -p ID -B Nk MOUNT` (lfs-setquota(1))
    gpfs    a fileset per tenant (`mmcrfileset`, `mmlinkfileset`) and `mmsetquota DEV:FILESET --block N:N`
Pure: no disk, no network. The scripts take CLUSTERDEF_MOUNT to run against another mount (tests)."""

from __future__ import annotations

from ... import tenancy
from ...quoting import shell
from ...resolve import Resolved

TIB = 2**40


def _head(resolved: Resolved, fs: str, what: str) -> list[str]:
    d = resolved.definition
    f = d.filesystems[fs]
    return ["#!/bin/sh\n",
            f"# {what} of filesystem {fs} ({f.kind}, {f.mount}) of cluster {d.cluster.name}; rendered by clusterdef.\n",
            "set -eu\n",
            f"MOUNT=${{CLUSTERDEF_MOUNT:-{f.mount}}}\n",
            '[ -d "$MOUNT" ] || { echo "clusterdef: $MOUNT is not a directory" >&2; exit 1; }\n']


def quota_script(resolved: Resolved, fs: str) -> str:
    d = resolved.definition
    f = d.filesystems[fs]
    out = _head(resolved, fs, "Project quotas")
    if f.kind == "btrfs":
        out.append('btrfs quota enable "$MOUNT"\n')
    for tenant in tenancy.quota_tenants(d, fs):
        s = d.tenants[tenant].storage
        limit = max(1, int(s.quota_tib * TIB))
        kib = max(1, limit // 1024)
        pid = tenancy.project_id(d, tenant)
        q = shell(tenant)
        out.append(f"# tenant {tenant}: {s.quota_tib:g} TiB, project {pid}\n")
        out.append(f'dir="$MOUNT"/{q}\n')
        if f.kind == "btrfs":
            out.append('[ -d "$dir" ] || btrfs subvolume create "$dir" >/dev/null\n')
            out.append(f'btrfs qgroup limit {limit} "$dir"\n')
        elif f.kind == "xfs":
            out.append('mkdir -p "$dir"\n')
            out.append(f'xfs_quota -x -c "project -s -p $dir {pid}" "$MOUNT"\n')
            out.append(f'xfs_quota -x -c "limit -p bhard={kib}k {pid}" "$MOUNT"\n')
        elif f.kind == "lustre":
            out.append('mkdir -p "$dir"\n')
            out.append(f'lfs project -p {pid} -s -r "$dir"\n')
            out.append(f'lfs setquota -p {pid} -B {kib}k "$MOUNT"\n')
        elif f.kind == "gpfs":
            dev = shell(f.source or fs)
            out.append(f"mmlsfileset {dev} {q} >/dev/null 2>&1 || mmcrfileset {dev} {q} --inode-space new\n")
            out.append(f'[ -d "$dir" ] || mmlinkfileset {dev} {q} -J "$dir"\n')
            out.append(f"mmsetquota {dev}:{q} --block {kib}K:{kib}K\n")
    return "".join(out)


def cleanup_script(resolved: Resolved, fs: str) -> str:
    """Removes files not accessed for each tenant's expiry, inside tenants' directories only: -xdev
    keeps find on this filesystem, and find never follows symbolic links."""
    d = resolved.definition
    out = _head(resolved, fs, "Scratch expiry")
    for tenant, t in d.tenants.items():
        if not t.storage or t.storage.filesystem != fs:
            continue
        minutes = t.storage.scratch_expiry_days * 1440
        out.append(f"# tenant {tenant}: files not accessed for {t.storage.scratch_expiry_days} days\n")
        out.append(f'dir="$MOUNT"/{shell(tenant)}\n')
        out.append(f'if [ -d "$dir" ] && [ ! -L "$dir" ]; then\n'
                   f'  find "$dir" -xdev -mindepth 1 -type f -amin +{minutes} -delete\n'
                   f'  find "$dir" -xdev -mindepth 1 -type d -empty -amin +{minutes} -delete\n'
                   f"fi\n")
    return "".join(out)


def units(resolved: Resolved, fs: str) -> dict[str, str]:
    name = f"clusterdef-scratch-{fs}"
    return {
        f"{name}.service": (f"# Rendered by clusterdef: scratch expiry of filesystem {fs}.\n[Unit]\n"
                            f"Description=clusterdef scratch expiry on {fs}\n\n[Service]\nType=oneshot\n"
                            f"ExecStart=/bin/sh /usr/lib/clusterdef/storage/{fs}/scratch-cleanup.sh\n"),
        f"{name}.timer": (f"# Rendered by clusterdef: runs {name}.service daily.\n[Unit]\n"
                          f"Description=Daily scratch expiry on {fs}\n\n[Timer]\nOnCalendar=daily\n"
                          "RandomizedDelaySec=1h\nPersistent=true\n\n[Install]\nWantedBy=timers.target\n"),
    }


def render(resolved: Resolved) -> dict[str, str]:
    d = resolved.definition
    tree: dict[str, str] = {}
    for fs, f in d.filesystems.items():
        if tenancy.quota_tenants(d, fs):
            tree[f"storage/{fs}/quota.sh"] = quota_script(resolved, fs)
        if f.scratch and any(t.storage and t.storage.filesystem == fs for t in d.tenants.values()):
            tree[f"storage/{fs}/scratch-cleanup.sh"] = cleanup_script(resolved, fs)
            for unit, text in units(resolved, fs).items():
                tree[f"storage/{fs}/{unit}"] = text
    return tree
