"""Storage target: tenants' quotas and scratch expiry, per filesystem.

    storage/<fs>/quota.sh                     idempotent: each tenant's directory `<mount>/<tenant>`
                                              with its project quota, in the filesystem's own tool
    storage/<fs>/scratch-cleanup.sh           (scratch filesystems) removes files in tenants'
                                              directories not accessed for their expiry; nothing else
    storage/<fs>/clusterdef-scratch-<fs>.service/.timer   runs the cleanup daily
    storage/mounts/<group>/<unit>.mount       (filesystems with a `source`) a systemd mount unit per
                                              node group in the filesystem's node_groups, and for no
                                              other group: a dedicated filesystem exists only on its
                                              owner's nodes (install into /etc/systemd/system/)

Mount types and options per kind (systemd.mount(5); each tool's mount documentation):
    lustre  Type=lustre, What=<MGS NIDs>:/<fsname>, Options=_netdev,flock   (Lustre manual, mount.lustre(8))
    gpfs    Type=gpfs, What=<device>, Options=_netdev                       (GPFS's own fstab entries)
    nfs     Type=nfs, What=<server>:/<export>, Options=_netdev,hard          (nfs(5))
    xfs     Type=xfs, What=/dev/..., Options=prjquota when it holds project quotas, else defaults
            (xfs_quota(8): project quotas need the prjquota mount option)
    btrfs   Type=btrfs, What=/dev/..., Options=defaults (qgroups are enabled by quota.sh, not by mount)

Quota commands per kind, as each tool documents them:
    btrfs   `btrfs quota enable`, a subvolume per tenant, `btrfs qgroup limit BYTES DIR` (btrfs-qgroup(8))
    xfs     `xfs_quota -x -c 'project -s -p DIR ID'` and `-c 'limit -p bhard=Nk ID'` (xfs_quota(8))
    lustre  `lfs project -p ID -s -r DIR` and `lfs setquota -p ID -B Nk MOUNT` (lfs-setquota(1))
    gpfs    a fileset per tenant (`mmcrfileset`, `mmlinkfileset`) and `mmsetquota DEV:FILESET --block N:N`
Pure: no disk, no network. The scripts take CLUSTERDEF_MOUNT to run against another mount (tests)."""

from __future__ import annotations

from ... import datasets, hostlist, tenancy
from ...errors import present
from ...model.storage import QUOTA_KINDS
from ...quoting import shell, systemd, unit_name
from ...resolve import Resolved
from ..yamlout import Unsafe

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
        s = present(d.tenants[tenant].storage, f"tenants.{tenant}.storage")  # quota_tenants have one
        limit = max(1, int(s.quota_tib * TIB))
        pid = tenancy.project_id(d, tenant)
        q = shell(tenant)
        out.append(f"# tenant {tenant}: {s.quota_tib:g} TiB, project {pid}\n")
        out.append(f'dir="$MOUNT"/{q}\n')
        out += _quota_lines(f, fs, q, pid, limit)
    return "".join(out)


def _quota_lines(f, fs: str, name_q: str, pid: int, limit: int) -> list[str]:
    """The project quota of `"$dir"` (a tenant's or a dataset's folder) in the filesystem's own tool."""
    kib = max(1, limit // 1024)
    if f.kind == "btrfs":
        return ['[ -d "$dir" ] || btrfs subvolume create "$dir" >/dev/null\n', f'btrfs qgroup limit {limit} "$dir"\n']
    if f.kind == "xfs":
        return ['mkdir -p "$dir"\n', f'xfs_quota -x -c "project -s -p $dir {pid}" "$MOUNT"\n',
                f'xfs_quota -x -c "limit -p bhard={kib}k {pid}" "$MOUNT"\n']
    if f.kind == "lustre":
        return ['mkdir -p "$dir"\n', f'lfs project -p {pid} -s -r "$dir"\n', f'lfs setquota -p {pid} -B {kib}k "$MOUNT"\n']
    if f.kind == "gpfs":
        dev = shell(f.source or fs)
        return [f"mmlsfileset {dev} {name_q} >/dev/null 2>&1 || mmcrfileset {dev} {name_q} --inode-space new\n",
                f'[ -d "$dir" ] || mmlinkfileset {dev} {name_q} -J "$dir"\n',
                f"mmsetquota {dev}:{name_q} --block {kib}K:{kib}K\n"]
    return ['mkdir -p "$dir"\n']


def dataset_script(resolved: Resolved, name: str) -> str:
    """Read access to a dataset for its reader groups and nobody else (POSIX ACLs, acl(5), setfacl(1)), and
    its project quota. Every ACL entry is replaced (`setfacl -b`), the owning group and others get nothing
    (`g::---`, `o::---`; the owner, the data steward who fills it, keeps rwX), each reader group gets r-X,
    and the same as default ACL on every directory so new files inherit it. Every value from the definition
    is shell-quoted (quoting.shell, shlex). CLUSTERDEF_MOUNT runs it against another mount (tests)."""
    d = resolved.definition
    ds = d.datasets[name]
    f = d.filesystems[ds.filesystem]
    rel = present(datasets.relative(d, name), f"datasets.{name}.path")
    readers = datasets.reader_groups(d, name)
    out = _head(resolved, ds.filesystem, f"Access to {ds.kind} {name} ({ds.classification})")
    out.append(f"# readers: {', '.join(readers) or 'nobody'}; mounted on node groups "
               f"{', '.join(datasets.node_groups(d, name)) or 'none'}\n")
    out.append(f"# a change of its readers or classification is approved by: "
               f"{', '.join(datasets.approvers(d, name)) or 'nobody named'}\n")
    out.append(f'dir="$MOUNT"/{shell(rel)}\n')
    parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
    if parent:
        out.append(f'mkdir -p "$MOUNT"/{shell(parent)}\n')
    if ds.quota_tib is not None and f.kind in QUOTA_KINDS:
        pid = datasets.project_id(d, name)
        out.append(f"# project quota: {ds.quota_tib:g} TiB, project {pid}\n")
        if f.kind == "btrfs":
            out.append('btrfs quota enable "$MOUNT"\n')
        out += _quota_lines(f, ds.filesystem, shell(f"dataset-{name}"), pid, max(1, int(ds.quota_tib * TIB)))
    else:
        out.append('mkdir -p "$dir"\n')
    base = ["u::rwX", "g::---", "o::---"]
    named = [f"g:{g}:rX" for g in readers]
    access = ",".join(base + named)
    default = ",".join(f"d:{e}" for e in base + named)
    out += ['setfacl -R -b "$dir"\n',
            f'setfacl -R -m {shell(access)} "$dir"\n',
            f'find "$dir" -type d -exec setfacl -m {shell(default)} {{}} +\n']
    return "".join(out)


def dataset_units(resolved: Resolved) -> dict[str, str]:
    """storage/mounts/<group>/<unit>: each dataset bind-mounted read-only at its mount point, on its authorised
    node groups only (systemd.mount(5): Options=bind,ro; RequiresMountsFor= orders it after the filesystem)."""
    d = resolved.definition
    out: dict[str, str] = {}
    for name, ds in d.datasets.items():
        rel = datasets.relative(d, name)
        groups = datasets.node_groups(d, name)
        if rel is None:
            continue
        where = ds.mount_point(name)
        text = (f"# Rendered by clusterdef: {ds.kind} {name} ({ds.classification}) of cluster {d.cluster.name}, "
                f"read-only, on node groups {', '.join(groups)} only.\n"
                f"[Unit]\nDescription=clusterdef {ds.kind} {name}\n"
                f"RequiresMountsFor={systemd(ds.path)}\n"
                f"\n[Mount]\nWhat={systemd(ds.path)}\nWhere={systemd(where)}\nType=none\nOptions=bind,ro\n"
                "\n[Install]\nWantedBy=multi-user.target\n")
        for g in groups:
            out[f"storage/mounts/{g}/{unit_name(where)}"] = text
    return out


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


NETWORK_KINDS = ("lustre", "gpfs", "nfs")
_MOUNT_OPTIONS = {"lustre": "_netdev,flock", "gpfs": "_netdev", "nfs": "_netdev,hard", "btrfs": "defaults"}
def mount_options(d, fs: str) -> str:
    f = d.filesystems[fs]
    if f.kind == "xfs":
        return "prjquota" if tenancy.quota_tenants(d, fs) else "defaults"
    return _MOUNT_OPTIONS[f.kind]


def _wait_online(d, fs: str, group: str) -> str:
    """A network filesystem waits for the network: for its storage fabric's interface on the group's
    nodes when it names one (`filesystems.<fs>.network`), else for network-online.target."""
    from ..network import storage_port

    f = d.filesystems[fs]
    sp = storage_port(d, group) if f.network else None
    if sp is None or d.nodes[group].attachments["storage"].network != f.network:
        return "Wants=network-online.target\nAfter=network-online.target\n"
    unit = f"systemd-networkd-wait-online@{sp[1]}.service"
    return f"# over storage fabric {f.network} ({sp[1]})\nWants={unit}\nAfter={unit}\n"


def mount_units(resolved: Resolved) -> dict[str, str]:
    """storage/mounts/<group>/<unit>: every filesystem with a source, on its node groups only."""
    d = resolved.definition
    out: dict[str, str] = {}
    for fs, f in d.filesystems.items():
        if f.source is None:
            continue
        network = f.kind in NETWORK_KINDS
        owner = f" (owned by tenant {f.owner}: on its node groups only)" if f.owner else ""
        for g in f.node_groups:
            if g not in d.nodes:
                continue
            # the same text for every group that mounts it, so an image its groups share can carry it
            text = (f"# Rendered by clusterdef: filesystem {fs} ({f.kind}) of cluster {d.cluster.name}, mounted on "
                    f"node groups {', '.join(x for x in f.node_groups if x in d.nodes)} only{owner}.\n"
                    f"[Unit]\nDescription=clusterdef filesystem {fs}\n"
                    + (_wait_online(d, fs, g) if network else "")
                    + f"\n[Mount]\nWhat={systemd(f.source)}\nWhere={systemd(f.mount)}\nType={f.kind}\n"
                    f"Options={mount_options(d, fs)}\n\n[Install]\n"
                    f"WantedBy={'remote-fs.target' if network else 'local-fs.target'}\n")
            out[f"storage/mounts/{g}/{unit_name(f.mount)}"] = text
    out.update(dataset_units(resolved))
    return out


LIB = "/usr/lib/clusterdef/storage"
UNITS = "/etc/systemd/system"
NETWORKD = "/etc/systemd/network"


def admin_host(d, fs: str) -> str | None:
    """The host that applies a filesystem's quotas and runs its scratch expiry: the first host of
    its first node group (every kind's quota tool works from a client that mounts it)."""
    groups = [g for g in d.filesystems[fs].node_groups if g in d.nodes]
    return hostlist.names(d.nodes[groups[0]].hosts)[0] if groups else None


def node_files(resolved: Resolved) -> dict[str, list[dict]]:
    """Per node group: its mount units (into /etc/systemd/system), VLAN networkd files and storage
    interface files (into /etc/systemd/network), its RoCE rail files, sysctls and lossless Ethernet unit
    (network/roce.py), as [{dest, mode, content}]; a storage interface or rail file is one host's
    (`host`: roles/tenant_isolation installs it on that host only)."""
    from ..network import storage_files, vlan_files

    groups: dict[str, list[dict]] = {}
    for rel, text in {**mount_units(resolved), **vlan_files(resolved)}.items():
        _, kind, g, name = rel.split("/", 3)
        dest = f"{UNITS}/{name}" if kind == "mounts" else f"{NETWORKD}/{name}"
        groups.setdefault(g, []).append({"dest": dest, "mode": "0644", "content": Unsafe(text)})
    for rel, text in storage_files(resolved).items():
        g, name = rel.split("/")[2:]
        host = name.removeprefix("20-clusterdef-storage-").removesuffix(".network")
        entry = {"dest": f"{NETWORKD}/{name}", "mode": "0644", "content": Unsafe(text)}
        # one host's file names it in [Match] Host=; the IPoIB interface's files are the group's
        groups.setdefault(g, []).append({**entry, "host": host} if f"\nHost={host}\n" in text else entry)
    from ..network.roce import node_files as roce_files

    for g, entries in roce_files(resolved).items():
        groups.setdefault(g, []).extend({**e, "content": Unsafe(e["content"])} for e in entries)
    return groups


def install(resolved: Resolved) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """What roles/tenant_isolation installs: per node group the mount units and VLAN networkd files
    rendered for it; per filesystem with quotas or a scratch expiry its admin host, the scripts and
    units, the script to run (quota.sh) and the timer to enable. Contents are `Unsafe`: copied as
    rendered, never templated."""
    d = resolved.definition
    groups = node_files(resolved)
    tree = render(resolved)
    filesystems: dict[str, dict] = {}
    for fs in d.filesystems:
        scripts = ["quota.sh", "scratch-cleanup.sh"] + [f"dataset-{n}.sh" for n, x in d.datasets.items()
                                                        if x.filesystem == fs]
        files = [{"dest": f"{LIB}/{fs}/{n}", "mode": "0750", "content": Unsafe(tree[f"storage/{fs}/{n}"])}
                 for n in scripts if f"storage/{fs}/{n}" in tree]
        host = admin_host(d, fs)
        if not files or host is None:
            continue
        units_ = {u: t for u, t in units(resolved, fs).items() if f"storage/{fs}/{u}" in tree}
        files += [{"dest": f"{UNITS}/{u}", "mode": "0644", "content": Unsafe(t)} for u, t in units_.items()]
        filesystems[fs] = {"host": host, "mount": d.filesystems[fs].mount, "files": files,
                           "run": [f"{LIB}/{fs}/{n}" for n in scripts
                                   if n != "scratch-cleanup.sh" and f"storage/{fs}/{n}" in tree],
                           "timers": [u for u in units_ if u.endswith(".timer")]}
    return groups, filesystems


def render(resolved: Resolved) -> dict[str, str]:
    d = resolved.definition
    tree: dict[str, str] = mount_units(resolved)
    for fs, f in d.filesystems.items():
        if tenancy.quota_tenants(d, fs):
            tree[f"storage/{fs}/quota.sh"] = quota_script(resolved, fs)
        if f.scratch and any(t.storage and t.storage.filesystem == fs for t in d.tenants.values()):
            tree[f"storage/{fs}/scratch-cleanup.sh"] = cleanup_script(resolved, fs)
            for unit, text in units(resolved, fs).items():
                tree[f"storage/{fs}/{unit}"] = text
    for name, ds in d.datasets.items():
        if ds.filesystem in d.filesystems and datasets.relative(d, name) is not None:
            tree[datasets.acl_file(d, name)] = dataset_script(resolved, name)
    return tree
