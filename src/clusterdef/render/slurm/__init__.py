"""Slurm target: everything a Slurm cluster reads, for the Slurm major of the cluster's
validated set.

    slurm/slurm.conf      cluster, controllers, plugins, node lines (one per node group,
                          hostlists folded), node sets, partitions, priority, preemption,
                          accounting, health check, passthrough keys
    slurm/gres.conf       GPUs per node group (type, device files)
    slurm/cgroup.conf     cores, memory and devices constrained (GPU isolation)
    slurm/topology.conf   switch tree or blocks of the fabric the Slurm nodes are on
    slurm/job_submit.lua  a job that names no QOS gets its partition's QOS (the tier bound to it); one that
                          names no constraint in partitions mixing GPU models stays on one model
    slurm/qos.sh          QOS definitions (sacctmgr), run before loading accounts
    slurm/accounts.cfg    `sacctmgr load` file: cluster, tenant accounts, GPU quotas, users
    slurm/nodecheck       health check: drains a node whose versions are off the set

Pure functions of the resolved definition: no disk (apart from the package's own
keyword lists and template), no network, no clock."""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files

import jinja2

from ... import capacity, generations, hostlist, memo, privilege
from ...errors import present
from ...model.nodes import NodeGroup
from ...model.slurm import Slurm
from ...model.tenants import Tenant, TenantSlurm
from ... import tenancy
from ...resolve import Resolved
from ...quoting import Quoted, guarded_env, lua, sacctmgr, shell, slurm
from ...knowledge import slurm as keywords

from . import configless
from .common import slurm_section
from .common import header as _header
from .slurmdbd import PRIVATE_DATA
from .slurmdbd import render as slurmdbd_files

# Global PreemptMode when QOS preempt each other: the strongest mode a QOS asks for.
_PREEMPT_ORDER = ("requeue", "cancel", "suspend")

# the program slurmd runs for `scontrol reboot` and how long a node's reboot may take (node_drain_reboot_timeout_s)
REBOOT_PROGRAM = "/usr/sbin/reboot"
REBOOT_TIMEOUT_S = 1800


def _yes(flag: bool) -> str:
    return "YES" if flag else "NO"


def _line(pairs) -> str:
    """`Key=value` pairs of one slurm.conf line, each value quoted for slurm.conf."""
    return " ".join(f"{k}={slurm(v)}" for k, v in pairs if v is not None and v != "")


def _passthrough_value(v) -> str:
    if isinstance(v, bool):
        return _yes(v)
    return str(v)


def slurm_groups(resolved: Resolved) -> dict[str, NodeGroup]:
    return resolved.definition.groups_of("slurm")


def slurm_hosts(resolved: Resolved) -> set[str]:
    """Every Slurm-owned host's name."""
    return {h for g in slurm_groups(resolved).values() for h in hostlist.names(g.hosts)}


def _ours(nodes: str, ours: set[str]) -> str:
    """The hosts of `nodes` that Slurm owns, folded ('' when none): one look-up per host, no NodeSet
    intersection per switch or block."""
    mine = [h for h in hostlist.names(nodes) if h in ours]
    return hostlist.fold(mine) if mine else ""


def real_memory_mb(memory_gib: int) -> int:
    """RealMemory: the nominal memory less 3% that firmware and the kernel keep, so a
    node is not drained for 'Low RealMemory' when it registers."""
    return memory_gib * 1024 * 97 // 100


def preempt_modes(s: Slurm) -> tuple[str | None, dict[str, str]]:
    """(global PreemptMode or None when no QOS preempts, QOS -> PreemptMode of its jobs).

    Slurm applies the PreemptMode of the *preempted* job's QOS, while the definition says
    how a QOS preempts others; so each preempted QOS takes the mode of its first preemptor."""
    per_qos: dict[str, str] = {}
    modes = set()
    for q in s.qos.values():
        if q.preempt and q.preempt_mode != "off":
            modes.add(q.preempt_mode)
            for victim in q.preempt:
                per_qos.setdefault(victim, q.preempt_mode)
    if not any(q.preempt for q in s.qos.values()):
        return None, {}
    top = next((m for m in _PREEMPT_ORDER if m in modes), "cancel")
    return ("SUSPEND,GANG" if top == "suspend" else top.upper()), per_qos


def binds_qos(s: Slurm) -> bool:
    """Some partition carries a QOS: job_submit.lua (JobSubmitPlugins=lua) makes it its jobs' QOS."""
    return any(p.qos for p in s.partitions.values())


def topology_of(resolved: Resolved):
    """(fabric name, fabric) carrying the Slurm node groups, or (None, None)."""
    d = resolved.definition
    for g in slurm_groups(resolved).values():
        if g.placement and g.placement.slurm_fabric in d.network.fabrics:
            return g.placement.slurm_fabric, d.network.fabrics[g.placement.slurm_fabric]
    return None, None


def slurm_conf(resolved: Resolved, kw: keywords.Keywords) -> str:
    d = resolved.definition
    s = slurm_section(resolved)
    groups = slurm_groups(resolved)
    has_gpus = any(d.hardware[g.hardware].gpu for g in groups.values())
    fabric_name, fabric = topology_of(resolved)

    out = [_header(resolved, "slurm.conf")]
    out.append(f"ClusterName={slurm(d.cluster.name)}\n")
    out.extend(f"SlurmctldHost={slurm(c)}\n" for c in s.controllers)
    params: dict[str, str] = {
        "AuthType": "auth/munge",
        "SlurmUser": "slurm",
        "SlurmctldPort": "6817",
        "SlurmdPort": "6818",
        "StateSaveLocation": "/var/lib/slurm/slurmctld",
        "SlurmdSpoolDir": "/var/lib/slurm/slurmd",
        "SlurmctldPidFile": "/run/slurmctld.pid",
        "SlurmdPidFile": "/run/slurmd.pid",
        "SlurmctldLogFile": "/var/log/slurm/slurmctld.log",
        "SlurmdLogFile": "/var/log/slurm/slurmd.log",
        "ReturnToService": "2",
        "MpiDefault": "none",
        "ProctrackType": "proctrack/cgroup",
        "TaskPlugin": "task/cgroup,task/affinity",
        "JobAcctGatherType": "jobacct_gather/cgroup",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_Core_Memory",
        "SchedulerType": "sched/backfill",
        # configless: slurmd fetch the files from slurmctld (configless.py); one copy, pushed by `scontrol reconfigure`
        "SlurmctldParameters": "enable_configless",
        # a job no partition it names may run (a tenant's partition it is not allowed on, a limit it exceeds) is
        # refused at submission with the reason, not left pending for ever (slurm.conf(5) EnforcePartLimits)
        "EnforcePartLimits": "ALL",
    }
    if has_gpus:
        params["GresTypes"] = "gpu"
    if fabric is not None:
        plugin = fabric.topology.slurm_plugin
        if kw.supports_topology(plugin):
            params["TopologyPlugin"] = f"topology/{plugin}"
    p = s.priority
    params.update({
        "PriorityType": "priority/multifactor",
        "PriorityDecayHalfLife": p.decay_half_life,
        "PriorityWeightFairshare": str(p.weight_fairshare),
        "PriorityWeightAge": str(p.weight_age),
        "PriorityWeightQOS": str(p.weight_qos),
        "PriorityWeightJobSize": str(p.weight_job_size),
        "PriorityWeightPartition": str(p.weight_partition),
    })
    if uses_job_submit(d):
        # job_submit.lua: a job without --qos gets its partition's QOS; one without --constraint in a partition
        # that mixes GPU models stays on one of them
        params["JobSubmitPlugins"] = "lua"
    mode, _ = preempt_modes(s)
    if mode:
        params["PreemptType"] = "preempt/qos"
        params["PreemptMode"] = mode
    a = s.accounting
    if a.storage == "slurmdbd":
        params.update({
            "AccountingStorageType": "accounting_storage/slurmdbd",
            "AccountingStorageHost": s.dbd_host(),
            "AccountingStoragePort": str(a.port),
            "AccountingStorageEnforce": ",".join(a.enforce),
            "AccountingStorageTRES": "gres/gpu" if has_gpus else "",
        })
    params.update(tenancy_params(resolved, kw))
    if configless.task_prolog(resolved):
        # RoCE: every task gets the NCCL/UCX settings of its node's rails (render/slurm/configless.py)
        params["TaskProlog"] = configless.TASK_PROLOG
    hc = s.health_check
    if hc.enabled:
        params.update({
            "HealthCheckProgram": hc.program,
            "HealthCheckInterval": str(hc.interval_s),
            "HealthCheckNodeState": hc.node_state,
        })
    # `scontrol reboot ASAP nextstate=RESUME` (roles/node_drain/tasks/reboot_slurm.yml: a stateless node's reimage)
    # has slurmd run RebootProgram once the node is idle; a node that does not register again within
    # ResumeTimeout is set DOWN (slurm.conf(5) RebootProgram, ResumeTimeout; default 60 s, shorter than a GPU
    # node's firmware and PXE boot). The pointer the stage wrote picks the build it boots.
    params.update({"RebootProgram": REBOOT_PROGRAM, "ResumeTimeout": str(REBOOT_TIMEOUT_S)})
    # Passthrough keys win over generated ones (the slurm.conf parser is case-insensitive).
    lowered = {k.lower(): k for k in params}
    for key, value in s.passthrough.items():
        params.pop(lowered.get(key.lower(), key), None)
        params[key] = _passthrough_value(value)
    out.extend(f"{k}={slurm(v)}\n" for k, v in params.items() if v != "")

    out.append("\n# Nodes: one line per node group\n")
    for gname, g in groups.items():
        hw = d.hardware[g.hardware]
        cpu = hw.cpu
        features = ",".join(dict.fromkeys([gname, g.hardware] + ([hw.gpu.type] if hw.gpu else [])))
        out.append(_line([
            ("NodeName", hostlist.canonical(g.hosts)),
            ("CPUs", cpu.cpus), ("Sockets", cpu.sockets), ("CoresPerSocket", cpu.cores_per_socket),
            ("ThreadsPerCore", cpu.threads_per_core), ("RealMemory", real_memory_mb(hw.memory_gib)),
            ("Gres", f"gpu:{hw.gpu.type}:{hw.gpu.count}" if hw.gpu else None),
            ("Features", features), ("State", "UNKNOWN"),
        ]) + "\n")
    out.append("\n# Node sets: one per node group, named after it\n")
    for gname, g in groups.items():
        out.append(_line([("NodeSet", gname), ("Nodes", hostlist.canonical(g.hosts))]) + "\n")

    out.append("\n# Partitions\n")
    for pname, part in s.partitions.items():
        cpu_per_gpu, mem_per_gpu = per_gpu_share(resolved, part.node_groups)
        if part.privileged:
            out.append(f"# {pname}: root-equivalent; approvals: {privilege.partition_approvals(d, pname) or 'none'}\n")
        out.append(_line([
            ("PartitionName", pname),
            ("Nodes", ",".join(part.node_groups)),
            ("Default", _yes(part.default)),
            ("MaxTime", part.max_time),
            ("MaxNodes", part.max_nodes),
            ("PriorityTier", part.priority_tier),
            ("QOS", part.qos),
            ("AllowQos", ",".join(s.allow_qos(pname)) or None),
            ("AllowAccounts", ",".join(part.allow_accounts) or None),
            # root-equivalent: the approved groups only (root alone without an approval), whole nodes per job
            # (slurm.conf(5) of every major 22.05..26.05: AllowGroups, OverSubscribe=EXCLUSIVE; not ExclusiveUser,
            # which 26.05's slurm.conf(5) no longer lists for partitions)
            ("AllowGroups", (",".join(privilege.partition_groups(d, pname)) or "root") if part.privileged else None),
            ("OverSubscribe", "EXCLUSIVE" if part.privileged else
             part.oversubscribe.upper() if part.oversubscribe else None),
            ("ExclusiveUser", "YES" if part.exclusive_user else None),
            ("DefCpuPerGPU", cpu_per_gpu or None),
            ("DefMemPerGPU", mem_per_gpu or None),
            ("State", "UP"),
        ]) + "\n")
    return "".join(out)


def slurm_gpu_share(resolved: Resolved, tenant: str) -> int:
    """A tenant's GPUs on Slurm (GrpTRES): the capacity ledger's Slurm limit, its quota less what
    Kubernetes can actually hold for it (docs/tenancy.md, "Capacity per control plane")."""
    plane = capacity.of(resolved.definition, tenant).slurm
    return plane.limit if plane else 0


def per_gpu_share(resolved: Resolved, groups) -> tuple[int, int]:
    """(cores, MiB of RealMemory) per GPU, the smallest share over the partition's GPU groups, so a job
    asking for GPUs gets the cores and memory that go with them (DefCpuPerGPU / DefMemPerGPU)."""
    d = resolved.definition
    shares = [(d.hardware[d.nodes[g].hardware].cpu.cpus // hw.gpu.count,
               real_memory_mb(hw.memory_gib) // hw.gpu.count)
              for g in groups if g in d.nodes and (hw := d.hardware[d.nodes[g].hardware]).gpu]
    return (min(c for c, _ in shares), min(m for _, m in shares)) if shares else (0, 0)


# Per-job private /tmp and /dev/shm: job_container/tmpfs up to 25.05, namespace/linux from 25.11
# (slurm/docs/job_container.conf.5 and namespace.yaml.5 in the reference; both need PrologFlags=Contain).
JOB_TMP_BASE = "/var/lib/slurm/job_tmp"  # local disk: unique per node, never a shared filesystem


def job_namespace_plugin(kw: keywords.Keywords) -> str:
    return "namespace/linux" if "namespacetype" in kw.parameters else "job_container/tmpfs"


def tenancy_params(resolved: Resolved, kw: keywords.Keywords) -> dict[str, str]:
    """slurm.conf keys that enforce tenants' isolation (docs/tenancy.md)."""
    d = resolved.definition
    out: dict[str, str] = {}
    if tenancy.private_data(d):
        # Nobody sees other tenants' jobs, usage, users, accounts or reservations.
        out["PrivateData"] = PRIVATE_DATA
    if tenancy.mcs_tenants(d):
        # Whole-node tenants without nodes of their own: a node never holds two accounts' jobs.
        out["MCSPlugin"] = "mcs/account"
        out["MCSParameters"] = "enforced,select,privatedata"
    if any(t.isolation.level == "dedicated" and t.slurm for t in d.tenants.values()):
        out["PrologFlags"] = "Contain"  # pam_slurm_adopt and the job namespace need the extern step
        plugin = job_namespace_plugin(kw)
        out["NamespaceType" if plugin == "namespace/linux" else "JobContainerType"] = plugin
    return out


def job_namespace_conf(resolved: Resolved, kw: keywords.Keywords) -> tuple[str, str]:
    """(file name, content) of the per-job /tmp and /dev/shm configuration for the set's Slurm."""
    if job_namespace_plugin(kw) == "namespace/linux":
        text = (_header(resolved, "namespace.yaml")
                + "# Per-job private /tmp and /dev/shm (namespace/linux); removed when the job ends.\n"
                + f"defaults:\n  auto_base_path: true\n  base_path: {JOB_TMP_BASE}\n  dirs: /tmp,/dev/shm\n")
        return "slurm/namespace.yaml", text
    text = (_header(resolved, "job_container.conf")
            + "# Per-job private /tmp and /dev/shm (job_container/tmpfs); removed when the job ends.\n"
            + f"AutoBasePath=true\nBasePath={JOB_TMP_BASE}\n")  # Dirs defaults to /tmp,/dev/shm
    return "slurm/job_container.conf", text


def gres_conf(resolved: Resolved) -> str:
    d = resolved.definition
    out = [_header(resolved, "gres.conf"),
           "# GPU device files per node group; core affinity and NVLink links are not in the definition.\n"]
    for gname, g in slurm_groups(resolved).items():
        gpu = d.hardware[g.hardware].gpu
        if gpu is None:
            continue
        files = "/dev/nvidia0" if gpu.count == 1 else f"/dev/nvidia[0-{gpu.count - 1}]"
        out.append(_line([("NodeName", hostlist.canonical(g.hosts)), ("Name", "gpu"),
                          ("Type", gpu.type), ("File", files)]) + "\n")
    return "".join(out)


def cgroup_conf(resolved: Resolved, kw: keywords.Keywords) -> str:
    lines = [("CgroupPlugin", "autodetect"), ("ConstrainCores", "yes"), ("ConstrainRAMSpace", "yes"),
             ("ConstrainDevices", "yes")]
    return (_header(resolved, "cgroup.conf")
            + "# Jobs get only the cores, memory and GPUs they were allocated (tenant device isolation).\n"
            + "".join(f"{k}={v}\n" for k, v in lines if k.lower() in kw.cgroup))


def topology_conf(resolved: Resolved, kw: keywords.Keywords) -> str | None:
    fabric_name, fabric = topology_of(resolved)
    if fabric is None or not kw.supports_topology(fabric.topology.slurm_plugin):
        return None
    ours = slurm_hosts(resolved)
    topo = fabric.topology
    out = [_header(resolved, "topology.conf"), f"# fabric {fabric_name} ({fabric.kind}), Slurm nodes only\n"]
    if topo.kind == "tree":
        emitted: set[str] = set()
        settled: set[str] = set()  # written, or left out for having no Slurm node below it
        for name, sw in topo.switches.items():
            if sw.nodes:
                mine = _ours(sw.nodes, ours)
                if mine:
                    out.append(_line([("SwitchName", name), ("Nodes", mine)]) + "\n")
                    emitted.add(name)
            if not sw.switches:
                settled.add(name)
        # Spines in definition order; a spine appears once all of its children are settled (a leaf with
        # only Kubernetes nodes is settled without a line, and must not hold back the spine above it).
        pending = [(n, sw) for n, sw in topo.switches.items() if sw.switches]
        while pending:
            progressed = False
            for n, sw in list(pending):
                children = hostlist.names(sw.switches)
                if all(c in settled or c not in topo.switches for c in children):
                    kids = [c for c in children if c in emitted]
                    if kids:
                        out.append(_line([("SwitchName", n), ("Switches", hostlist.fold(kids))]) + "\n")
                        emitted.add(n)
                    settled.add(n)
                    pending.remove((n, sw))
                    progressed = True
            if not progressed:
                # switch-cycle / switch-self refuse such a definition before rendering; never drop silently
                raise ValueError(f"switches {', '.join(n for n, _ in pending)} of fabric {fabric_name} "
                                 "form a cycle; validate the definition first")
    elif topo.kind == "rail" and topo.slurm == "tree":
        # A scalable unit is Slurm's leaf switch: its R rail leaves hold the same nodes, and Slurm's
        # tree wants each node under one leaf (docs/fabric.md). Spines and cores above, each listing
        # only the switches below it that lead to Slurm nodes.
        units = []
        for name, nodes in topo.units():
            mine = _ours(nodes, ours)
            if mine:
                out.append(_line([("SwitchName", name), ("Nodes", mine)]) + "\n")
                units.append(name)
        spines = hostlist.names(topo.spines) if topo.spines and units else []
        for spine in spines:
            out.append(_line([("SwitchName", spine), ("Switches", hostlist.fold(units))]) + "\n")
        for core in (hostlist.names(topo.cores) if topo.cores and spines else []):
            out.append(_line([("SwitchName", core), ("Switches", hostlist.fold(spines))]) + "\n")
    else:  # block, or rail units as blocks
        for name, nodes in topo.units():
            mine = _ours(nodes, ours)
            if mine:
                out.append(_line([("BlockName", name), ("Nodes", mine)]) + "\n")
        if topo.block_sizes:
            out.append(f"BlockSizes={','.join(str(b) for b in topo.block_sizes)}\n")
    return "".join(out)


def qos_script(resolved: Resolved) -> str:
    s = slurm_section(resolved)
    _, victim_mode = preempt_modes(s)
    out = ["#!/bin/sh\n", _header(resolved, "qos.sh"),
           "# Creates and sets the QOS; run before `sacctmgr -i load file=accounts.cfg`. Idempotent.\n",
           "# Day 0 in two steps: `qos.sh names` creates the QOS names only (slurmdbd alone is needed), before\n",
           "# slurmctld first starts: it refuses a partition QOS= the database lacks (\"Partition X has an invalid\n",
           "# qos\"). The limits name TRES such as gres/gpu, which exist once slurmctld registered them\n",
           "# (AccountingStorageTRES): `qos.sh` without argument, after slurmctld started.\n",
           "set -eu\n", 'SACCTMGR=${SACCTMGR:-sacctmgr}\n',
           'have() { "$SACCTMGR" -n -P show qos format=name | grep -qxF -- "$1"; }\n']
    for name in s.qos:
        out.append(f'have {shell(name)} || "$SACCTMGR" -i add qos {shell(name)}\n')
    out.append('[ "${1:-}" != names ] || exit 0\n')
    # sacctmgr clears a TRES limit per TRES (`gres/gpu=-1`; a bare -1 is refused), so every
    # TRES some QOS limits is set on each QOS: its value there, or -1.
    tres_keys = dict.fromkeys(k for q in s.qos.values() for k in q.max_tres_per_user)
    job_keys = dict.fromkeys(k for q in s.qos.values() for k in q.max_tres_per_job)
    for name, q in s.qos.items():
        tres = ",".join(f"{k}={q.max_tres_per_user.get(k, -1)}" for k in tres_keys)
        per_job = ",".join(f"{k}={q.max_tres_per_job.get(k, -1)}" for k in job_keys)
        # A QOS that preempts nothing drops the definition's other QOS (`Preempt-=`): an
        # emptied list (`Preempt=''`) makes slurmdbd 22.05 see preemption loops that are not there.
        others = ",".join(n for n in s.qos if n != name)
        sets = [("Priority", q.priority), ("MaxTRESPerUser", tres or None), ("MaxTRESPerJob", per_job or None),
                ("MaxWall", q.max_wall or "-1"),
                ("Preempt", ",".join(q.preempt)) if q.preempt else ("Preempt-", others or None),
                ("PreemptMode", victim_mode.get(name, "cluster"))]
        args = " ".join(shell(f"{k}={v}") for k, v in sets if v is not None and v != "")
        out.append(f'"$SACCTMGR" -i modify qos where {shell("name=" + name)} set {args}\n')
    return "".join(out)


def uses_job_submit(d) -> bool:
    """job_submit.lua has work: a partition binds a QOS, or a partition mixes GPU models."""
    return d.slurm is not None and (binds_qos(d.slurm) or bool(generations.mixed_partitions(d)))


def gpu_models_lua(d) -> str:
    """The Lua table job_submit.lua reads: partition -> its GPU types (node Features), for every
    partition with GPU nodes, in the order the partition lists its node groups."""
    rows = [f"   [{lua(p)}] = {{{', '.join(lua(m) for m in models)}}},\n"
            for p, models in generations.gpu_partitions(d).items()]
    return ("-- Partition -> the GPU models (node Features) of its node groups, from the definition.\n"
            "local GPU_MODELS = {\n" + "".join(rows) + "}\n\n")


def job_submit_lua(resolved: Resolved) -> str:
    """slurmctld's job_submit/lua script (read from slurm.conf's folder): a job that names no QOS gets
    the QOS of its partition (read from slurmctld's partition records), and a job that names no
    constraint in partitions that mix GPU models gets a matching-OR constraint over them (GPU_MODELS,
    rendered from the definition)."""
    text = files(__package__).joinpath("templates", "job_submit.lua").read_text(encoding="utf-8")
    return "-- " + _header(resolved, "job_submit.lua")[2:] + gpu_models_lua(resolved.definition) + text


def accounts_cfg(resolved: Resolved) -> str:
    d = resolved.definition
    s = slurm_section(resolved)
    out = [_header(resolved, "accounts.cfg"),
           "# Load with `sacctmgr -i load file=accounts.cfg` after qos.sh. Per tenant: GrpTRES caps its GPUs\n"
           "# at reserved + burst less what Kubernetes can hold for it; FairShare is its reserved GPUs on Slurm.\n"]
    all_qos = ",".join(s.qos)
    default_qos = next((p.qos for p in s.partitions.values() if p.default and p.qos), None)
    # QOS+= (not QOS=): on a cluster that already exists, `sacctmgr load` sends only the QOS
    # the root association lacks, and a bare list would replace its QOS with those.
    out.append(f"Cluster - {sacctmgr(d.cluster.name)}" + (f":QOS+={sacctmgr(all_qos)}" if all_qos else "")
               + (f":DefaultQOS={sacctmgr(default_qos)}" if default_qos else "") + "\n")
    # tenant -> (tenant, its Slurm mapping), for the tenants that have one
    tenants: dict[str, tuple[Tenant, TenantSlurm]] = {n: (t, t.slurm) for n, t in d.tenants.items() if t.slurm}
    accounts = {ts.account: (t, ts) for t, ts in tenants.values()}
    tenant_of = {ts.account: n for n, (_, ts) in tenants.items()}
    ledger = capacity.ledger(d)
    if len(accounts) != len(tenants):  # tenant-account-shared refuses this before rendering
        raise ValueError("two tenants map to one Slurm account; validate the definition first")
    # Parents first: a parent that is not itself a tenant account is created under root.
    by_parent: dict[str, list[str]] = {}
    for acct, (_, ts) in accounts.items():
        parent = ts.parent
        if parent != "root" and parent not in accounts and parent not in by_parent.get("root", []):
            by_parent.setdefault("root", []).append(parent)
        by_parent.setdefault(parent, []).append(acct)
    done: set[str] = set()
    queue = ["root"]
    while queue:
        parent = queue.pop(0)
        kids = [k for k in by_parent.get(parent, []) if k not in done]
        if not kids:
            continue
        out.append(f"Parent - {sacctmgr(parent)}\n")
        for acct in kids:
            done.add(acct)
            queue.append(acct)
            mapped = accounts.get(acct)
            fields = [f"Account - {sacctmgr(acct)}", f"Description={sacctmgr(acct)}", f"Organization={sacctmgr(acct)}"]
            if mapped is not None:
                t, ts = mapped
                plane = present(ledger[tenant_of[acct]].slurm, f"tenants.{tenant_of[acct]}.slurm")
                # Fairshare: shares of Slurm's usage, so the reservation held on Slurm; GrpTRES: the ledger's limit
                fields.append(f"Fairshare={max(plane.reserved, 1)}")
                if t.quota.reserved_gpus or t.quota.burst_gpus:
                    fields.append(f"GrpTRES=gres/gpu={plane.limit}")
                if ts.qos:
                    fields.append(f"QOS={sacctmgr(','.join(ts.qos))}")
                    fields.append(f"DefaultQOS={sacctmgr(ts.qos[0])}")
            out.append(":".join(fields) + "\n")
    lost = [a for a in accounts if a not in done]
    if lost:  # account-parent-cycle / account-parent-self refuse this before rendering; never drop silently
        raise ValueError(f"Slurm accounts {', '.join(lost)} are not under root (a parent cycle); "
                         "validate the definition first")
    for acct, (_, ts) in accounts.items():
        if ts.users:
            out.append(f"Parent - {sacctmgr(acct)}\n")
            for user in ts.users:
                out.append(f"User - {sacctmgr(user)}:DefaultAccount={sacctmgr(acct)}\n")
    return "".join(out)


@lru_cache(maxsize=1)
def _templates() -> jinja2.Environment:
    # bash's ${#array[@]} would open a Jinja comment: use other comment markers
    return guarded_env(__package__, comment_start_string="<#!", comment_end_string="!#>")


NODECHECK_COMPONENTS = ("kernel", "driver", "gpu_vbios", "cuda", "nccl", "slurm")
NODECHECK_TAG = "clusterdef-nodecheck"
NODECHECK_STATE = "/var/lib/clusterdef/nodecheck"  # the Xid cursor, on the node
REASON_MAX = 400


def nodecheck_expectations(resolved: Resolved) -> dict[str, dict]:
    """Per Slurm node group: the versions (probe argument, version) and health lines nodecheck checks."""
    from ...knowledge.gpu_limits import limits_for
    from ...knowledge.platforms import has_nvswitch
    from ...probe import READ_TOOLS
    from ...tenancy import nic_ports

    d, vs = resolved.definition, resolved.set
    c = vs.components
    out = {}
    for gname, g in slurm_groups(resolved).items():
        hw = d.hardware[g.hardware]
        versions = [("kernel", d.images[g.image].kernel)]
        health = []
        if hw.gpu:
            versions.append(("driver", c.driver))
            vbios_probe = f"gpu_vbios={READ_TOOLS['gpu_vbios']}"
            vbios = vs.firmware.get(hw.platform, {}).get("gpu_vbios") if "gpu_vbios" in hw.firmware else None
            if vbios:
                versions.append((vbios_probe, vbios))
            versions += [("cuda", c.cuda), ("nccl", c.nccl)]
            health.append(f"gpus {hw.gpu.count}")
            if not vbios:  # no pinned version to hold it to: every GPU reads one VBIOS, the same on all
                health.append(f"vbios {hw.gpu.count} {vbios_probe}")
            limits = limits_for(hw.gpu.model)
            if has_nvswitch(hw) and limits is not None and limits.nvlink_links is not None:  # what the hardware is
                health.append(f"nvlink {limits.nvlink_links}")
        versions.append(("slurm", c.slurm))
        ib = [n for n in hw.nics if n.kind == "infiniband"]
        if ib:
            rate = min(n.speed_gbps for n in ib)
            health.append(f"ib {sum(n.count for n in ib if n.speed_gbps >= rate)} {rate}")
        for nic in hw.nics:  # every RoCE port by its interface name, at its NIC's rated speed
            if nic.kind == "roce":
                health.append(f"roce {nic.speed_gbps} {' '.join(nic_ports(nic))}")
        out[gname] = {"fn": gname.replace("-", "_"), "hosts": hostlist.canonical(g.hosts),
                      "versions": versions, "health": health}
    return out


def nodecheck(resolved: Resolved) -> str:
    """The health check script (one text for the tree, every Slurm image and the Ansible variables: memo.py)."""
    return memo.once(resolved, "slurm.nodecheck", lambda: _nodecheck(resolved))


def _nodecheck(resolved: Resolved) -> str:
    from ...knowledge.xid import catalogue
    from ...probe import INSTALLED

    d, vs = resolved.definition, resolved.set
    c = vs.components
    by_action: dict[str, list[str]] = {}
    harmless = []
    for code, x in sorted(catalogue().items()):
        if x.drains:
            by_action.setdefault(x.action, []).append(str(code))
        else:
            harmless.append(str(code))
    hc = slurm_section(resolved).health_check
    return _templates().get_template("nodecheck.sh.j2").render(
        cluster=d.cluster.name, set_name=vs.name, slurm=c.slurm, program=hc.program, interval=hc.interval_s,
        groups=list(nodecheck_expectations(resolved).values()), probe_path=INSTALLED, tag=NODECHECK_TAG,
        state_dir=NODECHECK_STATE,
        # case patterns of Xid numbers (digits and `|` only: built here from the catalogue's integers)
        xid_actions=[(a, Quoted("|".join(codes))) for a, codes in sorted(by_action.items())],
        xid_harmless=Quoted("|".join(harmless)), reason_max=REASON_MAX)


def daemon_files(resolved: Resolved, kw: keywords.Keywords) -> dict[str, str]:
    """The files slurmctld and slurmd read (slurm.conf and the files beside it), for the Slurm that
    `kw` describes: the set's major, or what every major of a rolling upgrade accepts (transition.py)."""
    d = resolved.definition
    tree = {
        "slurm/slurm.conf": slurm_conf(resolved, kw),
        "slurm/cgroup.conf": cgroup_conf(resolved, kw),
    }
    if any(d.hardware[g.hardware].gpu for g in slurm_groups(resolved).values()):
        tree["slurm/gres.conf"] = gres_conf(resolved)
    topo = topology_conf(resolved, kw)
    if topo is not None:
        tree["slurm/topology.conf"] = topo
    if {"JobContainerType", "NamespaceType"} & set(tenancy_params(resolved, kw)):
        name, text = job_namespace_conf(resolved, kw)
        tree[name] = text
    return tree


def set_keywords(resolved: Resolved) -> keywords.Keywords:
    kw = keywords.for_major(resolved.set.slurm_major)
    if kw is None:
        raise ValueError(f"no Slurm keyword list for Slurm {resolved.set.slurm_major}")
    return kw


def render(resolved: Resolved) -> dict[str, str]:
    d = resolved.definition
    if d.slurm is None or not slurm_groups(resolved):
        return {}
    tree = daemon_files(resolved, set_keywords(resolved))
    tree["slurm/qos.sh"] = qos_script(resolved)
    if uses_job_submit(d):
        tree["slurm/job_submit.lua"] = job_submit_lua(resolved)
    tree["slurm/accounts.cfg"] = accounts_cfg(resolved)
    if d.slurm.health_check.enabled:
        tree["slurm/nodecheck"] = nodecheck(resolved)
    tree.update(slurmdbd_files(resolved))
    return dict(sorted(tree.items()))
