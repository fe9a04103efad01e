#!/usr/bin/env python3
"""Generate the estate example: a DGX SuperPOD-like H100 cluster definition plus its MAC inventory.

    python scripts/gen_estate.py                       # clusters/estate.yaml + clusters/estate-macs.csv
    python scripts/gen_estate.py --nodes 1024 --tenants 40 --out-dir /tmp/x --name small

Layout (all numbers scale with --nodes, a multiple of 128):

* Scalable units (SU) of 128 GPU nodes (8 x H100 each, 1024 GPUs per SU), one node group per SU.
* The first half of the SUs are DGX H100 (platform dgx-h100), the rest HGX H100 (platform hgx-h100).
* The first 3/4 of the SUs are Slurm-owned (training), the rest Kubernetes-owned (inference).
* Fabric `ib-compute` (tree): 8 leaf switches of 16 nodes per SU, 2 spines per SU above its 8 leaves,
  and a core layer above every spine. Fabric `ib-su` (block): one block per SU (Slurm topology/block).
* Provisioning: 10.64.0.0/16; SU i uses 10.64.(8+i).1-128; MACs are deterministic (02:cd:ef:00:hi:lo).
* Tenants: quotas in whole nodes (8 GPUs); reserved ~70 % and reserved+burst <= 100 % of the GPUs,
  so the definition validates with no warnings. About 1/2 of the tenants are dedicated; two of
  them own a whole Slurm SU each (partition, InfiniBand partition key, port GUIDs in the MAC CSV).

Everything is deterministic: the same arguments always give byte-identical files.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

SU_NODES = 128          # nodes per scalable unit
LEAF_NODES = 16         # nodes per leaf switch (8 leaves per SU): 128 ports for their HCAs, an IB switch has 254
SPINES_PER_SU = 2
CORE_SWITCHES = 16
MAX_SWITCH_PORTS = 254  # ports of the largest InfiniBand switch (validate: switch-ports)
GPUS_PER_NODE = 8
OWNING_TENANTS = 2      # dedicated tenants that own a whole Slurm SU each
MATRIX = "2026.07-r580"
SUBNET_PREFIX = "10.64"  # provisioning /16
FIRST_SU_OCTET = 8       # SU i uses 10.64.(8+i).1-128

# Firmware components the set 2026.07-r580 pins per platform (matrices/sets/2026.07-r580.yaml).
FIRMWARE = {
    "dgx-h100": ["bmc", "sbios", "gpu_vbios", "nvswitch", "cx7", "bf3"],
    "hgx-h100": ["bmc", "sbios", "gpu_vbios", "nvswitch", "cx7"],
}

TEAMS = ["vision", "nlp", "speech", "robotics", "genomics", "climate", "search", "ads", "recsys", "fraud",
         "chem", "materials", "video", "audio", "code", "math", "safety", "agents", "maps", "health",
         "finance", "retail", "games", "translate"]

_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./-]*$")
_NUMBERISH = re.compile(r"^[-+]?[0-9_.]+([eE][-+]?[0-9]+)?$")  # 10.64.0.1, 2026.07.1, 1e3: quote them
_RESERVED = {"yes", "no", "y", "n", "true", "false", "on", "off", "null"}



def training_qos(row: dict) -> bool:
    """A tenant sold QOS training (and so the partition `train`): the larger ones."""
    return row["weight"] >= 2

def scalar(v) -> str:
    """A YAML scalar usable in flow and block context: plain when unambiguous, else double-quoted."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    s = str(v)
    plain = _PLAIN.match(s) and not _NUMBERISH.match(s) and s.lower() not in _RESERVED
    return s if plain else json.dumps(s)


def flow(v) -> str:
    """A short mapping or list in YAML flow style."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{scalar(k)}: {flow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(flow(x) for x in v) + "]"
    return scalar(v)


def hostrange(prefix: str, first: int, last: int, width: int) -> str:
    """`gpu[0001-0128]` (1-based inclusive indices)."""
    if first == last:
        return f"{prefix}{first:0{width}d}"
    return f"{prefix}[{first:0{width}d}-{last:0{width}d}]"


def mac_of(index: int) -> str:
    """Deterministic locally administered MAC for node number `index` (1-based)."""
    return f"02:cd:ef:00:{index >> 8 & 0xff:02x}:{index & 0xff:02x}"


def port_guids_of(k: int) -> str:
    """The 8 HCA port GUIDs of node k (what `ibstat` shows on it), `;` between ports."""
    return ";".join(f"0x0002c903{k:06x}{p:02x}" for p in range(1, 9))


def tenant_names(count: int) -> list[str]:
    return [TEAMS[i % len(TEAMS)] + ("" if i < len(TEAMS) else f"-{i // len(TEAMS) + 1}") for i in range(count)]


def build(nodes: int, tenants: int, name: str) -> tuple[str, str]:
    """Return (definition YAML text, MAC inventory CSV text)."""
    if nodes <= 0 or nodes % SU_NODES:
        raise ValueError(f"--nodes must be a positive multiple of {SU_NODES}")
    if nodes > 0xFFFF:
        raise ValueError("--nodes above 65535 does not fit the MAC scheme")
    n_su = nodes // SU_NODES
    if n_su < 4:
        raise ValueError(f"need at least 4 SUs ({4 * SU_NODES} nodes) for both control planes")
    if FIRST_SU_OCTET + n_su > 255:
        raise ValueError("too many SUs for the /16 provisioning plan")
    if tenants < 4:
        raise ValueError("--tenants must be at least 4")
    hw_width = max(4, len(str(nodes)))
    su_width = max(2, len(str(n_su)))
    n_leaves = nodes // LEAF_NODES
    leaf_width = max(3, len(str(n_leaves)))
    spine_width = max(3, len(str(n_su * SPINES_PER_SU)))
    n_slurm_su = n_su * 3 // 4
    n_dgx_su = n_su // 2

    # --- scalable units -------------------------------------------------------------------------
    sus = []
    for i in range(n_su):
        first = i * SU_NODES + 1
        sus.append({
            "name": f"su{i + 1:0{su_width}d}",
            "first": first,
            "hosts": hostrange("gpu", first, first + SU_NODES - 1, hw_width),
            "hardware": "dgx-h100" if i < n_dgx_su else "hgx-h100",
            "plane": "slurm" if i < n_slurm_su else "kubernetes",
            "ip": f"{SUBNET_PREFIX}.{FIRST_SU_OCTET + i}.1",
            "rack": f"row{i // 4 + 1:02d}",
        })
    slurm_sus = [s for s in sus if s["plane"] == "slurm"]
    k8s_sus = [s for s in sus if s["plane"] == "kubernetes"]
    capacity = nodes * GPUS_PER_NODE
    k8s_capacity = len(k8s_sus) * SU_NODES * GPUS_PER_NODE

    out: list[str] = []
    w = out.append
    w("# yaml-language-server: $schema=../schema/clusterdef.schema.json")
    w(f"# Generated by scripts/gen_estate.py (--nodes {nodes} --tenants {tenants} --name {name}); do not edit by hand.")
    w(f"# Regenerate: python scripts/gen_estate.py --nodes {nodes} --tenants {tenants} --name {name} --out-dir clusters/")
    w(f"# {nodes} H100 nodes x {GPUS_PER_NODE} GPUs = {capacity} GPUs in {n_su} scalable units of {SU_NODES} nodes:")
    w(f"# {len(slurm_sus)} SUs Slurm (training), {len(k8s_sus)} SUs Kubernetes (inference); "
      f"{n_dgx_su} SUs DGX H100, {n_su - n_dgx_su} SUs HGX H100.")
    w("version: 1")
    w("cluster:")
    w(f"  name: {scalar(name)}")
    w(f"  matrix: {scalar(MATRIX)}")
    w("  site: dc-1")
    w(f"  description: {scalar(f'H100 estate: {n_su} SUs, {nodes} nodes, {capacity} GPUs, Slurm training and Kubernetes inference.')}")
    w("")

    # --- hardware -------------------------------------------------------------------------------
    gpu = {"model": "H100-SXM5-80GB", "type": "h100", "count": GPUS_PER_NODE, "memory_gib": 80,
           "mig_profiles": ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]}
    w("hardware:")
    for platform, cpu, mem in (("dgx-h100", {"sockets": 2, "cores_per_socket": 56, "threads_per_core": 2}, 2048),
                               ("hgx-h100", {"sockets": 2, "cores_per_socket": 48, "threads_per_core": 2}, 2048)):
        w(f"  {platform}:")
        w(f"    platform: {platform}")
        w(f"    gpu: {flow(gpu)}")
        w(f"    cpu: {flow(cpu)}")
        w(f"    memory_gib: {mem}")
        w("    nics:")
        w("      - " + flow({"name": "eno1", "kind": "ethernet", "speed_gbps": 25, "role": "provisioning"}))
        w("      - " + flow({"name": "ibp", "kind": "infiniband", "speed_gbps": 400, "count": 8, "role": "compute"}))
        w("      - " + flow({"name": "stor", "kind": "ethernet", "speed_gbps": 200, "count": 2, "role": "storage"}))
        w(f"    firmware: {flow(FIRMWARE[platform])}")
    w("")

    # --- images ---------------------------------------------------------------------------------
    w("images:")
    # the image target adds the set's pinned packages (slurmd, kubelet, diagnostics); the Slurm
    # image gets slurmd of the set's version from a site repository (noble's own is 23.11)
    for img, extra in (("gpu-slurm", ["enroot", "pyxis"]), ("gpu-k8s", ["containerd"])):
        w(f"  {img}:")
        w(f"    version: {scalar('2026.07.1')}")
        w("    distribution: ubuntu")
        w("    release: noble")
        w("    kernel: 6.8.0-60-generic")
        w(f"    packages: {flow(['openssh-server', 'chrony', 'rdma-core'] + extra)}")
        if img == "gpu-slurm":
            w(f"    repositories: {flow({'slurm-site': f'http://{SUBNET_PREFIX}.0.2/repos/slurm-25.11/'})}")
        w(f"    kernel_cmdline: {flow(['console=ttyS0,115200n8', 'iommu=pt'])}")
    w("")

    # --- nodes: one group per SU ----------------------------------------------------------------
    w("nodes:")
    for s in sus:
        w(f"  {s['name']}:")
        w(f"    hosts: {scalar(s['hosts'])}")
        w(f"    hardware: {s['hardware']}")
        w(f"    image: {'gpu-slurm' if s['plane'] == 'slurm' else 'gpu-k8s'}")
        w(f"    control_plane: {s['plane']}")
        w(f"    addressing: {flow({'ipv4_start': s['ip'], 'mac': {'source': 'inventory', 'file': f'{name}-macs.csv'}})}")
        w(f"    placement: {flow({'fabric': 'ib-compute', 'rack': s['rack']})}")
        if s["plane"] == "kubernetes":
            w(f"    labels: {flow({'clusterdef.dev/pool': 'inference', 'clusterdef.dev/su': s['name']})}")
    w("")

    # --- network --------------------------------------------------------------------------------
    w("network:")
    w("  provisioning:")
    w(f"    subnet: {SUBNET_PREFIX}.0.0/16")
    w(f"    server: {SUBNET_PREFIX}.0.2")
    w(f"    gateway: {SUBNET_PREFIX}.0.1")
    w(f"    dynamic_range: {flow({'start': f'{SUBNET_PREFIX}.1.1', 'end': f'{SUBNET_PREFIX}.1.250'})}")
    w(f"    domain: {name}.example")
    w("  fabrics:")
    w("    ib-compute:")
    w("      kind: infiniband")
    w("      topology:")
    w("        kind: tree")
    w("        switches:")
    for s in sus:
        w(f"          # {s['name']}: {SU_NODES // LEAF_NODES} leaves of {LEAF_NODES} nodes "
          f"({LEAF_NODES * GPUS_PER_NODE} of a leaf's ports for their HCAs) and {SPINES_PER_SU} spines")
        su_index = int(s["name"][2:]) - 1
        first_leaf = su_index * (SU_NODES // LEAF_NODES) + 1
        for k in range(SU_NODES // LEAF_NODES):
            lf = s["first"] + k * LEAF_NODES
            w(f"          leaf{first_leaf + k:0{leaf_width}d}: "
              f"{flow({'nodes': hostrange('gpu', lf, lf + LEAF_NODES - 1, hw_width)})}")
        leaves = hostrange("leaf", first_leaf, first_leaf + SU_NODES // LEAF_NODES - 1, leaf_width)
        for k in range(SPINES_PER_SU):
            w(f"          spine{su_index * SPINES_PER_SU + k + 1:0{spine_width}d}: {flow({'switches': leaves})}")
    n_spines = n_su * SPINES_PER_SU
    if n_spines <= MAX_SWITCH_PORTS:
        w("          # core layer above every spine")
        for c in range(CORE_SWITCHES):
            w(f"          core{c + 1:02d}: {flow({'switches': hostrange('spine', 1, n_spines, spine_width)})}")
    else:  # a core cabled to every spine would need more ports than a switch has: core c takes
        # spine k of every SU (k = c mod spines per SU), so each core still reaches every node
        w(f"          # core layer: core c above spine (c mod {SPINES_PER_SU}) of every SU")
        for c in range(CORE_SWITCHES):
            k = c % SPINES_PER_SU + 1
            spines = f"spine[{k:0{spine_width}d}-{n_spines - SPINES_PER_SU + k:0{spine_width}d}/{SPINES_PER_SU}]"
            w(f"          core{c + 1:02d}: {flow({'switches': spines})}")
    w("    ib-su:")
    w("      kind: infiniband")
    w("      topology:")
    w("        kind: block")
    sizes = [SU_NODES]
    while sizes[-1] * 2 <= nodes and len(sizes) < 4:
        sizes.append(sizes[-1] * 2)
    w(f"        block_sizes: {flow(sizes)}")
    w("        blocks:")
    for s in sus:
        w(f"          {s['name']}: {flow({'nodes': s['hosts']})}")
    w("")

    # --- tenants: quotas in whole nodes ---------------------------------------------------------
    names = tenant_names(tenants)
    weights = [(4, 2, 1, 1, 2, 1)[i % 6] for i in range(tenants)]
    total_w = sum(weights)
    node_budget_reserved = nodes * 70 // 100
    node_budget_burst = nodes * 25 // 100
    # Each tenant: kind (who schedules it) and isolation.
    tenant_rows = []
    for i, t in enumerate(names):
        kind = ("slurm", "both", "slurm", "kubernetes")[i % 4]
        reserved = max(1, node_budget_reserved * weights[i] // total_w) * GPUS_PER_NODE
        burst = node_budget_burst * weights[i] // total_w * GPUS_PER_NODE
        tenant_rows.append({"name": t, "kind": kind, "dedicated": i % 4 == 1 or i % 8 in (0, 3),
                            "reserved": reserved, "burst": burst, "weight": weights[i]})
    reserved_total = sum(r["reserved"] for r in tenant_rows)
    ceiling_total = sum(r["reserved"] + r["burst"] for r in tenant_rows)
    if not reserved_total < capacity or ceiling_total > capacity:
        raise ValueError(f"too many tenants for {nodes} nodes: reserved {reserved_total}, "
                         f"reserved+burst {ceiling_total}, capacity {capacity}")

    # Dedicated tenants that own whole Slurm SUs (the last Slurm SUs, one each): the first Slurm-only
    # tenants whose quota fits one SU. Their SUs are in their own partition only; their HCA ports are
    # in the MAC inventory (third column) for their InfiniBand partition.
    fits = [r for r in tenant_rows if r["kind"] == "slurm" and r["reserved"] + r["burst"] <= SU_NODES * GPUS_PER_NODE]
    owners = fits[:OWNING_TENANTS]
    headroom = capacity - ceiling_total
    for r, s in zip(owners, reversed(slurm_sus)):
        r["owns"], r["dedicated"] = s["name"], True
        # Nobody else may use its SU: its burst reaches the whole SU where the capacity sold allows, or
        # the rest stays idle (validate: capacity-unusable, a warning)
        extra = min(SU_NODES * GPUS_PER_NODE - r["reserved"] - r["burst"], headroom)
        r["burst"] += extra
        headroom -= extra
    owned = {r["owns"]: r["name"] for r in owners}

    # Kueue queues: every Kubernetes tenant gets an inference queue, "both" tenants also a gang training
    # queue. Nominal GPUs: the tenant's share of the Kubernetes capacity, capped by its reserved+burst quota
    # and by the free capacity of the flavor (one flavor per Kubernetes SU, filled greedily).
    k8s_rows = [r for r in tenant_rows if r["kind"] in ("kubernetes", "both")]
    k8s_w = sum(r["weight"] for r in k8s_rows)
    flavor_free = {f"h100-{s['name']}": SU_NODES * GPUS_PER_NODE for s in k8s_sus}
    queues: dict[str, dict] = {}
    for r in k8s_rows:
        share = min(k8s_capacity * r["weight"] // k8s_w, r["reserved"] + r["burst"]) // GPUS_PER_NODE * GPUS_PER_NODE
        parts = [("serve", "inference", share)] if r["kind"] == "kubernetes" else \
                [("serve", "inference", share // 2 // 8 * 8), ("train", "training", share - share // 2 // 8 * 8)]
        r["queues"] = []
        for suffix, wclass, gpus in parts:
            flavor = max(flavor_free, key=lambda f: (flavor_free[f], f))
            gpus = min(gpus, flavor_free[flavor])
            flavor_free[flavor] -= gpus
            q = {"flavor": flavor, "nominal_gpus": gpus, "cohort": wclass, "workload_class": wclass}
            if wclass == "training":
                q["gang"] = True
            if r["dedicated"]:
                q["borrowing_limit_gpus"] = 0
            else:
                q["borrowing_limit_gpus"] = r["burst"] // 2 // 8 * 8
            queues[f"{r['name']}-{suffix}"] = q
            r["queues"].append(f"{r['name']}-{suffix}")
        if r["kind"] == "kubernetes":
            # Kubernetes is all it has: it is sold what its queues hold (a full flavor lends nothing, so
            # more could never be given: validate's tenant-reserved-unreachable / tenant-burst-unreachable)
            nominal = sum(queues[q]["nominal_gpus"] for q in r["queues"])
            r["reserved"] = min(r["reserved"], nominal)
            r["burst"] = min(r["burst"], nominal - r["reserved"])
            for qname in r["queues"]:
                if not r["dedicated"]:
                    queues[qname]["borrowing_limit_gpus"] = r["burst"] // 2 // 8 * 8
    reserved_total = sum(r["reserved"] for r in tenant_rows)
    ceiling_total = sum(r["reserved"] + r["burst"] for r in tenant_rows)

    # --- slurm ----------------------------------------------------------------------------------
    slurm_groups = [s["name"] for s in slurm_sus if s["name"] not in owned]  # the shared pool
    # `train` runs its jobs under QOS training (the partition's QOS, job_submit.lua): only the tenants sold
    # that QOS (weight >= 2, below) may use it, else Slurm refuses their jobs (partition-qos-not-granted)
    training_accounts = [r["name"] for r in tenant_rows if r["kind"] in ("slurm", "both") and training_qos(r)]
    w("slurm:")
    w(f"  controllers: {flow(['slurmctl01', 'slurmctl02'])}")
    w(f"  accounting: {flow({'storage': 'slurmdbd', 'host': 'slurmdbd01'})}")
    w("  partitions:")
    w("    batch:")
    w(f"      node_groups: {flow(slurm_groups)}")
    w("      default: true")
    w("      max_time: 2-00:00:00")
    w("      qos: normal")
    w("    train:")
    w(f"      node_groups: {flow(slurm_groups)}")
    w("      max_time: 14-00:00:00")
    w("      priority_tier: 100")
    w("      qos: training")
    w(f"      max_nodes: {len(slurm_groups) * SU_NODES}")
    w(f"      allow_accounts: {flow(training_accounts)}")
    w("    scavenger:")
    w(f"      node_groups: {flow(slurm_groups)}")
    w("      max_time: 1-00:00:00")
    w("      priority_tier: 0")
    w("      qos: scavenger")
    for su, t in owned.items():
        w(f"    {t}:")
        w(f"      node_groups: {flow([su])}")
        w("      max_time: 14-00:00:00")
        w("      priority_tier: 100")
        w("      qos: normal")
        w(f"      allow_accounts: {flow([t])}")
    w("    debug:")
    w(f"      node_groups: {flow(slurm_groups[:1])}")
    w(f"      max_time: {scalar('30:00')}")
    w("      max_nodes: 1")
    w("      priority_tier: 10")
    w("      qos: debug")
    w("  qos:")
    w(f"    normal: {flow({'priority': 10, 'max_tres_per_user': {'gres/gpu': 256}})}")
    w(f"    training: {flow({'priority': 1000, 'preempt': ['scavenger'], 'preempt_mode': 'requeue'})}")
    w(f"    scavenger: {flow({'priority': 0, 'max_wall': '1-00:00:00'})}")
    w(f"    debug: {flow({'priority': 500, 'max_wall': '30:00', 'max_tres_per_user': {'gres/gpu': 8}})}")
    w(f"  health_check: {flow({'interval_s': 300, 'node_state': 'IDLE'})}")
    w("")

    # --- kubernetes -----------------------------------------------------------------------------
    w("kubernetes:")
    w(f"  gpu_operator: {flow({'mig_strategy': 'none', 'driver_owner': 'operator'})}"
      "   # gpu-k8s carries no driver/toolkit")
    w(f"  network_operator: {flow({'enabled': True, 'ofed_driver': {'version': '3.2.1-044413'}})}")
    w("  kueue:")
    w("    flavors:")
    for s in k8s_sus:
        w(f"      h100-{s['name']}: {flow({'node_groups': [s['name']]})}")
    w("    cohorts:")
    w("      estate: {}")
    w(f"      training: {flow({'parent': 'estate'})}")
    w(f"      inference: {flow({'parent': 'estate'})}")
    w("    queues:")
    for qname, q in queues.items():
        w(f"      {qname}: {flow(q)}")
    w("")

    # --- filesystems ----------------------------------------------------------------------------
    w("filesystems:")
    w("  scratch:")
    w("    kind: lustre")
    w("    mount: /scratch")
    w("    scratch: true")
    w("    size_tib: 20000")
    w(f"    node_groups: {flow([s['name'] for s in sus])}")
    w("")

    # --- tenants --------------------------------------------------------------------------------
    w(f"# {tenants} tenants: reserved {reserved_total} GPUs, reserved+burst {ceiling_total} GPUs, capacity {capacity}.")
    w("tenants:")
    for i, r in enumerate(tenant_rows):
        t = r["name"]
        w(f"  {t}:")
        w(f"    quota: {flow({'reserved_gpus': r['reserved'], 'burst_gpus': r['burst']})}")
        if r.get("owns"):
            # Dedicated: its own SU (whole nodes, in its partition only), its own InfiniBand partition
            # (its HCA ports full members), a project quota on scratch, PrivateData and pam_slurm_adopt.
            iso = {"level": "dedicated", "device": "whole-node", "network": "partition-key",
                   "storage": "project-quota", "node_groups": [r["owns"]]}
        elif r["dedicated"]:
            # Sold as isolated where clusterdef can enforce it without nodes of their own: whole nodes
            # through Slurm MCS, default-deny network policy for pods, a project quota on scratch.
            # (A tenant `level: dedicated` also needs an InfiniBand partition, which is set per port
            # and so needs nodes it owns: see the lab's `secure` tenant and docs/tenancy.md.)
            iso = {"level": "shared", "device": "whole-node" if r["kind"] == "slurm" else "cgroup",
                   "network": "network-policy" if r["kind"] == "kubernetes" else "none",
                   "storage": "project-quota"}
        else:
            iso = {"level": "shared"}
        w(f"    isolation: {flow(iso)}")
        if r["kind"] in ("slurm", "both"):
            qos = ["normal", "training", "scavenger", "debug"] if training_qos(r) else ["normal", "scavenger", "debug"]
            w(f"    slurm: {flow({'account': t, 'qos': qos})}")
        if r["kind"] in ("kubernetes", "both"):
            kube = {"namespace": t, "queues": r["queues"], "groups": [f"{t}-eng"]}
            if r["dedicated"]:
                kube["allow_from_namespaces"] = ["monitoring"]
            w(f"    kubernetes: {flow(kube)}")
        storage = {"filesystem": "scratch", "quota_tib": 25 * r["weight"] * (2 if r["dedicated"] else 1),
                   "scratch_expiry_days": 30 if r["dedicated"] else 14}
        w(f"    storage: {flow(storage)}")
    w("")

    # --- upgrade --------------------------------------------------------------------------------
    w("upgrade:")
    w(f"  canary: {flow({'nodes': 8, 'min_leaf_switches': 2, 'node_group': sus[0]['name']})}")
    w(f"  wave_size: {SU_NODES}")
    w("  max_parallel_waves: 2")
    w("  baseline_tolerance: {busbw_drop_pct: 5}")
    w(f"  rollback: {flow({'target': '2025.10-r580'})}")

    # every host's HCA port GUIDs: the tenants' partitions and the shared one list their ports by GUID
    macs = ["host,mac,port_guids"] + [f"gpu{k:0{hw_width}d},{mac_of(k)},{port_guids_of(k)}"
                                      for k in range(1, nodes + 1)]
    return "\n".join(out) + "\n", "\n".join(macs) + "\n"


def generate(nodes: int = 4096, tenants: int = 48, out_dir: str | Path = "clusters", name: str = "estate") -> Path:
    """Write <out_dir>/<name>.yaml and <out_dir>/<name>-macs.csv; return the YAML path."""
    yaml_text, csv_text = build(nodes, tenants, name)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}-macs.csv").write_text(csv_text, encoding="utf-8")
    path = out / f"{name}.yaml"
    path.write_text(yaml_text, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=4096, help=f"GPU nodes, a multiple of {SU_NODES} (default 4096)")
    p.add_argument("--tenants", type=int, default=48, help="number of tenants (default 48)")
    p.add_argument("--out-dir", default="clusters/", help="output folder (default clusters/)")
    p.add_argument("--name", default="estate", help="cluster name and file stem (default estate)")
    a = p.parse_args(argv)
    try:
        path = generate(a.nodes, a.tenants, a.out_dir, a.name)
    except ValueError as exc:
        p.error(str(exc))
    print(f"wrote {path} and {path.with_name(a.name + '-macs.csv')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
