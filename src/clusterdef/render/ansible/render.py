"""Inventory and group_vars for the roles (see the package docstring)."""

from __future__ import annotations

import re
from dataclasses import replace


from ... import hostlist, probe
from ...model.upgrade import SMOKE_LAYERS
from ...resolve import Resolved
from .. import backup, identity, storage, yamlout
from ..inventory import switch_of
from ...knowledge.floors import group_limit
from ...knowledge.services import gpu_groups, group_of_host, is_service_group, service_hosts, service_waves
from ...knowledge.services import service_groups as service_groups_of
from ...knowledge.services import table as service_table
from ..slurm import slurmdbd
from ...knowledge.images import fabric_components, nvlink5_components

ROOT = "ansible"

# Which vendor tool reads and flashes each firmware component by default (compat/firmware-tools.yaml:
# nvfwupd for BMC/SBIOS/CPLD/PSU/GPU tray over Redfish, MFT's mlxfwmanager for ConnectX/BlueField in-band).
DEFAULT_TOOLS = {"cx7": "mlxfwmanager", "bf3": "mlxfwmanager"}
DEFAULT_TOOL = "nvfwupd"

# Container runtimes the container_toolkit role configures for NVIDIA per control plane: Kubernetes nodes
# run containerd (a drop-in adds the `nvidia` runtime); Slurm nodes start containers with enroot/pyxis,
# whose hook calls nvidia-container-cli directly, so they only need the toolkit's own config.toml.
RUNTIMES = {"kubernetes": ("containerd",), "slurm": ()}


def ident(name: str) -> str:
    """An Ansible-safe group name part (letters, digits, underscores)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def patterns(hosts) -> list[str]:
    """Hosts folded into Ansible range patterns: gpu[0001-0128] -> gpu[0001:0128]."""
    return hostlist.contiguous(hosts, ":")


def _hosts(hosts) -> dict:
    return {"hosts": {p: None for p in patterns(hosts)}}


def waves(resolved: Resolved) -> list[list[str]]:
    """Upgrade waves: wave 0 is the canary (`upgrade.canary.nodes` taken round-robin over the
    first `min_leaf_switches` leaves of the canary group, never a service group), then waves of at most
    `wave_size` GPU nodes filled with whole leaf switches (a leaf larger than a wave is split), in definition
    order, then the service hosts in waves of their own (knowledge/services.service_waves: one Slurm
    controller at a time, slurmdbd apart from them, an etcd quorum kept)."""
    d = resolved.definition
    up = d.upgrade
    places = switch_of(resolved)
    units: list[tuple[str, list[str]]] = []  # (group, hosts of one leaf)
    workers = gpu_groups(d)
    for gname, g in workers.items():
        where = places.get(g.placement.fabric if g.placement else "", {})
        by_leaf: dict[str, list[str]] = {}
        for host in hostlist.names(g.hosts):
            by_leaf.setdefault(where.get(host, ""), []).append(host)
        units.extend((gname, hosts) for hosts in by_leaf.values())

    canary_group = up.canary.node_group if up.canary.node_group in workers else next(
        (n for n, g in workers.items() if g.control_plane == "slurm"), next(iter(workers), None))
    leaves = [hosts for gname, hosts in units if gname == canary_group][:max(up.canary.min_leaf_switches, 1)]
    canary: list[str] = []
    for i in range(max((len(h) for h in leaves), default=0)):
        for hosts in leaves:
            if i < len(hosts) and len(canary) < up.canary.nodes:
                canary.append(hosts[i])
    taken = set(canary)

    out: list[list[str]] = [canary] if canary else []
    current: list[str] = []
    last = None
    limits: dict[str, int] = {}  # per group, not per leaf unit: group_limit walks every capacity domain
    for gname, hosts in units:
        hosts = [h for h in hosts if h not in taken]
        if gname not in limits:  # max_unavailable_pct of its partitions, tenant and pool (knowledge/floors)
            limits[gname] = group_limit(d, gname)[0]
        size = limits[gname]
        if current and gname != last:  # groups never share a wave (as the plan's, plan/rollout.waves)
            out.append(current)
            current = []
        last = gname
        for start in range(0, len(hosts), size):
            piece = hosts[start:start + size]
            if current and len(current) + len(piece) > size:
                out.append(current)
                current = []
            current.extend(piece)
    if current:
        out.append(current)
    # service hosts last, in waves of their own that keep one controller and an etcd quorum up
    return out + service_waves(d, [h for g in service_groups_of(d).values() for h in hostlist.names(g.hosts)],
                               up.wave_size)


def inventory(resolved: Resolved, group_vars: dict[str, dict]) -> dict:
    """The inventory; `group_vars` (variables()) names the backup and filesystem admin hosts."""
    d = resolved.definition
    places = switch_of(resolved)
    groups: dict[str, dict] = {}
    cps: dict[str, list[str]] = {}
    hws: dict[str, list[str]] = {}
    racks: dict[str, list[str]] = {}
    switches: dict[str, list[str]] = {}
    services: dict[str, dict] = {}
    for gname, g in d.nodes.items():
        hosts = hostlist.names(g.hosts)
        if is_service_group(g):  # service hosts: no GPU roles, no node admission (docs/services.md)
            services[f"group_{ident(gname)}"] = _hosts(hosts)
        else:
            groups[f"group_{ident(gname)}"] = _hosts(hosts)
            cps.setdefault(g.control_plane, []).append(f"group_{ident(gname)}")
        hws.setdefault(g.hardware, []).append(f"group_{ident(gname)}")
        if g.placement and g.placement.rack:
            racks.setdefault(g.placement.rack, []).append(f"group_{ident(gname)}")
        where = places.get(g.placement.fabric if g.placement else "", {})
        for host in hosts:
            if host in where:
                switches.setdefault(where[host], []).append(host)

    def children(names) -> dict:
        return {"children": {n: None for n in names}}

    tree: dict[str, dict] = {"nodes": {"children": groups}}
    if services:
        tree["service_hosts"] = {"children": services}
    for cp in sorted(cps):
        tree[f"cp_{cp}"] = children(cps[cp])
    # provisioning mode: the playbooks install packages (driver, CUDA, toolkit roles) only on prov_stateful;
    # prov_stateless nodes change by a new image and a reboot (reimage.yml)
    for mode in ("stateful", "stateless"):
        members = [f"group_{ident(g)}" for g, n in d.nodes.items() if n.provisioning == mode]
        if members:
            tree[f"prov_{mode}"] = children(members)
    for hw in sorted(hws):
        tree[f"hw_{ident(hw)}"] = children(hws[hw])
    if d.slurm:
        for pname, p in d.slurm.partitions.items():
            tree[f"partition_{ident(pname)}"] = children(f"group_{ident(g)}" for g in p.node_groups)
    for rack in sorted(racks):
        tree[f"rack_{ident(rack)}"] = children(racks[rack])
    for sw in sorted(switches):
        tree[f"switch_{ident(sw)}"] = _hosts(switches[sw])
    tree["upgrade_waves"] = {"children": {f"wave_{i:03d}": _hosts(w) for i, w in enumerate(waves(resolved))}}
    controllers = control_plane_hosts(resolved)
    if controllers:
        tree["slurm_control_plane"] = {"children": {g: _hosts(h) for g, h in controllers.items()}}
    tree.update(service_groups(resolved))
    # the hosts of the jobs group_vars carries (variables): one computation of the scripts, not two
    filesystems = group_vars.get("tenant_storage_admin", {}).get("tenant_isolation_filesystems", {})
    if filesystems:  # playbooks/tenant-isolation.yml: the hosts that apply a filesystem's quotas
        tree["tenant_storage_admin"] = _hosts(sorted({f["host"] for f in filesystems.values()}))
    jobs = group_vars.get("backup", {}).get("backup_jobs", {})
    if jobs:  # playbooks/backup.yml: the hosts that run a backup job (roles/backup)
        tree["backup"] = _hosts(sorted({j["host"] for j in jobs.values()}))
    return {"all": {"children": tree}}


def control_plane_hosts(resolved: Resolved) -> dict[str, list[str]]:
    """Slurm daemon hosts for playbooks/control-plane.yml: `slurmdbd` (slurm.accounting.host when the
    storage is slurmdbd and the host is set) and `slurm_controllers` (slurm.controllers, primary first).
    Both sit under `slurm_control_plane`, whose group_vars carry the role's pins."""
    s = resolved.definition.slurm
    if not s:
        return {}
    out: dict[str, list[str]] = {}
    if s.accounting.storage == "slurmdbd" and s.accounting.host:
        out["slurmdbd"] = [s.accounting.host]
    out["slurm_controllers"] = list(dict.fromkeys(s.controllers))
    return out


def service_groups(resolved: Resolved) -> dict[str, dict]:
    """One inventory group per service the definition's service hosts run (knowledge/services.yaml), besides
    slurm_controllers and slurmdbd, which slurm_control_plane holds (from slurm.controllers and
    slurm.accounting.host, which the checks hold to the groups that declare those services)."""
    t = service_table()
    return {t[svc]["group"]: _hosts(hosts) for svc, hosts in service_hosts(resolved.definition).items()
            if svc not in ("slurmctld", "slurmdbd")}


def _rollback_set(resolved: Resolved):
    """The set `rollback.yml` returns to: the named target, or the newest other validated set."""
    target = resolved.definition.upgrade.rollback.target
    sets = resolved.matrix.sets
    if target != "previous":
        return sets.get(target)
    older = sorted((n for n, s in sets.items() if s.status == "validated" and n < resolved.set.name), reverse=True)
    return sets[older[0]] if older else None


def _expected(c) -> dict[str, str]:
    """The versions node_admission compares with a node's facts (gpu_facts keys)."""
    return {"driver": c.driver, "cuda": c.cuda, "nccl": c.nccl, "container_toolkit": c.container_toolkit,
            "slurm": c.slurm, "kubelet": c.kubernetes.lstrip("v")}


def variables(resolved: Resolved) -> dict[str, dict]:
    """group_vars: group name -> variables (every name carries its role's prefix)."""
    d, vs = resolved.definition, resolved.set
    c = vs.components
    back = _rollback_set(resolved) or vs
    bc = back.components
    out: dict[str, dict] = {"all": {
        "nvidia_driver_version": c.driver,
        "nvidia_driver_rollback_version": bc.driver,
        "node_drain_timeout_s": d.upgrade.drain.timeout_minutes * 60,
        "node_drain_grace_s": d.upgrade.drain.grace_seconds,
        "node_drain_requeue": d.upgrade.drain.running_jobs == "requeue",
        "node_admission_set": vs.name,
        "cuda_userspace_cuda_version": c.cuda,
        "cuda_userspace_nccl_version": c.nccl,
        "cuda_userspace_driver_version": c.driver,
        "cuda_userspace_rollback_cuda_version": bc.cuda,
        "cuda_userspace_rollback_nccl_version": bc.nccl,
        "cuda_userspace_rollback_driver_version": bc.driver,
        "container_toolkit_version": c.container_toolkit,
        "container_toolkit_rollback_version": bc.container_toolkit,
        "node_admission_expected": _expected(c),
        "node_admission_rollback_set": back.name,
        "node_admission_rollback_expected": _expected(bc),
    }}
    # playbooks/smoke.yml runs these after every gate, layer by layer; argv only (no shell), and the
    # model keeps '{' and '}' out of every argument so Ansible never templates one.
    out["all"]["clusterdef_smoke_tests"] = [
        {"name": name, "layer": t.layer, "argv": list(t.argv), "timeout_seconds": t.timeout_seconds,
         "groups": [f"group_{ident(g)}" for g in t.node_groups]}
        for name, t in sorted(d.upgrade.smoke_tests.items(), key=lambda kv: SMOKE_LAYERS.index(kv[1].layer))]
    if control_plane_hosts(resolved):
        # The set's Slurm release; a stepped path (plan: transition.slurm_path) is walked by running
        # control-plane.yml once per hop with -e slurm_control_plane_version=<hop>. The compatibility
        # window comes from matrices/compat/slurm-releases.yaml for every major, so a hop's target major
        # finds its own compatible_prior.
        out["slurm_control_plane"] = {
            "slurm_control_plane_version": c.slurm,
            "slurm_control_plane_compatible_prior": {
                r.major: list(r.compatible_prior) for r in resolved.matrix.compat.slurm},
        }
        if "slurmdbd" in control_plane_hosts(resolved) and slurmdbd.wanted(resolved):
            # The text of slurm/slurmdbd.conf.j2: StoragePass is `{{ <vault variable> }}`, which Ansible resolves
            # on the slurmdbd host when the role writes the file (no_log, 0600, owner slurm).
            out["slurmdbd"] = {"slurm_control_plane_slurmdbd_conf": slurmdbd.slurmdbd_conf(resolved)}
            a = d.slurm.accounting if d.slurm else None
            ref = d.secrets.refs.get("slurmdbd_storage_pass", "")
            if a is not None and a.storage_host == "localhost" and ref:
                # the accounting database on the accounting host itself: the role creates it and its user
                # and MariaDB's settings for slurmdbd, sized from the accounting host's hardware
                group = group_of_host(d).get(a.host.split(".")[0])
                hw = d.hardware.get(d.nodes[group].hardware) if group else None
                out["slurmdbd"]["slurm_control_plane_database"] = {
                    "name": a.storage_loc, "user": a.storage_user, "password_var": ref,
                    "settings": slurmdbd.database_settings(hw.memory_gib if hw else None)}
    if d.backup:  # the jobs of every backup host; each host installs its own (roles/backup)
        out["backup"] = {"backup_jobs": backup.install(resolved)}
    # roles/tenant_isolation: each group's mount units and VLAN files, each filesystem's quota and expiry
    node_files, filesystems = storage.install(resolved)
    for gname, files in node_files.items():
        out.setdefault(f"group_{ident(gname)}", {})["tenant_isolation_node_files"] = files
    if filesystems:
        out["tenant_storage_admin"] = {"tenant_isolation_filesystems": filesystems}
    # roles/identity: each group's sssd.conf, nsswitch.conf and sudoers (on a stateless group only what its
    # image cannot carry); packages only where nothing is lost at the next boot
    for gname, files in identity.install(resolved).items():
        gv = out.setdefault(f"group_{ident(gname)}", {})
        gv["identity_files"] = files
        if d.nodes[gname].provisioning == "stateful":
            gv["identity_packages"] = list(identity.packages(d))
    dirc = d.identity.directory if d.identity else None
    if dirc is not None and dirc.bind_dn and dirc.bind_password_ref:
        out["all"]["identity_bind_password_var"] = d.secrets.refs.get(dirc.bind_password_ref, "")
    for cp in sorted({g.control_plane for g in gpu_groups(d).values()}):
        out[f"cp_{cp}"] = {"node_drain_control_plane": cp, "node_admission_control_plane": cp,
                           "nvidia_driver_control_plane": cp, "firmware_control_plane": cp,
                           "container_toolkit_runtimes": list(RUNTIMES.get(cp, ()))}
    if "cp_slurm" in out and d.slurm is not None and d.slurm.health_check.enabled:
        out["cp_slurm"].update(nodecheck_vars(resolved, d.slurm.health_check.program, back))
    if "cp_slurm" in out and d.slurm is not None:  # roles/slurm_node: configless slurmd on stateful nodes
        from ..slurm import configless

        out["cp_slurm"]["slurm_node_files"] = [{"dest": dest, "mode": "0755" if dest.endswith(".sh") else "0644",
                                                "content": yamlout.Unsafe(text)}
                                               for dest, text in configless.node_files(resolved).items()]
    for gname, g in d.nodes.items():
        if g.roles:  # playbooks/group-roles.yml applies them (never one that installs packages on a stateless group)
            out.setdefault(f"group_{ident(gname)}", {})["clusterdef_group_roles"] = list(g.roles)
    running = service_hosts(d)  # playbooks/service-gates.yml: each service's own check after a wave of its hosts
    if running:
        t = service_table()
        out["service_hosts"] = {"clusterdef_service_gates": {
            svc: {"argv": list(t[svc]["gate_argv"]), "expect": t[svc].get("gate_expect", "")} for svc in running}}
        for gname, g in service_groups_of(d).items():
            out.setdefault(f"group_{ident(gname)}", {})["clusterdef_services"] = list(g.services)
    for gname in service_groups_of(d):
        # playbooks/snapshot.yml runs gpu_facts on every host of the waves (its tools are a required argument):
        # a service host has no GPU firmware to read; its stack versions are still recorded
        out.setdefault(f"group_{ident(gname)}", {})["gpu_facts_firmware_tools"] = {}
    used = {g.hardware for g in gpu_groups(d).values()}  # service hosts carry no GPU firmware pins
    for hname, hw in d.hardware.items():
        if hname not in used:
            continue
        pins = vs.firmware.get(hw.platform, {})
        baseline = {comp: pins[comp] for comp in hw.firmware if comp in pins}
        tools = {comp: DEFAULT_TOOLS.get(comp, DEFAULT_TOOL) for comp in hw.firmware}
        out[f"hw_{ident(hname)}"] = {
            # how clusterdef-probe reads each component (the image's first boot reads them the same way)
            "gpu_facts_firmware_tools": probe.read_tools(hw.firmware),
            "node_admission_firmware": baseline,
            "firmware_baseline": baseline,
            "firmware_tools": tools,
            # roles/nvidia_driver: Fabric Manager and NSCQ move with the driver on NVSwitch node types, none elsewhere
            "nvidia_driver_fabric_components": fabric_components(hw),
            # and NVLSM (unpinned) on fourth-generation NVSwitch node types (NVLink 5: HGX/DGX B200, B300)
            "nvidia_driver_nvlink5_components": nvlink5_components(hw),
        }
    return out


def nodecheck_vars(resolved: Resolved, program: str, back) -> dict:
    """roles/slurm_nodecheck: the health check at slurm.conf's HealthCheckProgram on stateful Slurm nodes
    (stateless ones boot it in their image), for the set and for the rollback set. Script text is
    `!unsafe`: bash's `${#a[@]}` would open a Jinja comment."""
    from ..slurm import nodecheck

    return {"slurm_nodecheck_program": program,
            "slurm_nodecheck_script": yamlout.Unsafe(nodecheck(resolved)),
            "slurm_nodecheck_rollback_script": yamlout.Unsafe(nodecheck(replace(resolved, set=back)))}


def _yaml(header: str, data) -> str:
    # Host patterns map to nothing: `gpu[0001:0128]:` rather than `... : null`.
    return header + yamlout.dump(data).replace(": null\n", ":\n")


def render(resolved: Resolved) -> dict[str, str]:
    d, vs = resolved.definition, resolved.set
    banner = (f"# Cluster {d.cluster.name}, validated set {vs.name} ({vs.status}).\n"
              "# Rendered by clusterdef from the definition; edit the definition, not this file.\n")
    group_vars = variables(resolved)
    tree = {f"{ROOT}/inventory/hosts.yml": _yaml(banner, inventory(resolved, group_vars))}
    for group, values in group_vars.items():
        tree[f"{ROOT}/group_vars/{group}.yml"] = _yaml(banner + "---\n", values)
    return tree
