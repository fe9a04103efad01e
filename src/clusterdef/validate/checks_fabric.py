"""Fabric checks beyond placement: rail-optimised scalable units, Slurm block sizes, NVLink domains,
and a canary that must cross the fabric."""

from __future__ import annotations

from typing import Iterable

from .. import hostlist, tenancy
from ..errors import Finding, Path, error
from ..fabric.layout import leaves
from ..fabric.rails import rail_fabric, rail_problem
from ..knowledge.nvlink_domains import domain_for, table as nvlink_table
from .registry import Context, check


def compute_ports(d, group: str, kind: str) -> int:
    """Compute fabric ports of a group's hardware of the fabric's kind (InfiniBand or RoCE NICs)."""
    g = d.nodes[group]
    hw = d.hardware.get(g.hardware)
    if hw is None:
        return 0
    return sum(n.count for n in hw.nics if n.role == "compute" and n.kind == kind)


@check("rail-topology")
def rail_topology(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    hosts = ctx.all_nodes
    for fname, fabric in d.network.fabrics.items():
        topo = fabric.topology
        if topo.kind != "rail":
            continue
        base = ("network", "fabrics", fname, "topology")
        if len(topo.scalable_units) > 1 and not topo.spines:
            yield error("rail-no-spine", base + ("scalable_units",),
                        f"fabric `{fname}` has {len(topo.scalable_units)} scalable units and no spines: each unit "
                        "is an island, and no job can span two of them",
                        "list the spine switches every rail leaf is cabled to: `spines: \"spine[01-16]\"`")
        if topo.cores and not topo.spines:
            yield error("rail-no-spine", base + ("cores",),
                        f"fabric `{fname}` has cores and no spines: the cores are cabled to nothing",
                        "list the spines between the rail leaves and the cores")
        # switch names: rail leaves, spines and cores are switches of one fabric, never hosts
        spines = hostlist.names(topo.spines) if topo.spines else ()
        cores = hostlist.names(topo.cores) if topo.cores else ()
        taken: dict[str, tuple] = {}
        for su in topo.scalable_units:
            for r in range(1, topo.rails + 1):
                taken[topo.rail_leaf(su, r)] = base + ("scalable_units", su)
        for what, names, key in (("spine", spines, "spines"), ("core", cores, "cores")):
            for n in names:
                if n in taken:
                    yield error("rail-switch-name", base + (key,),
                                f"{what} `{n}` of fabric `{fname}` has the name of another switch of it "
                                "(rail leaves are `<unit>-rail<i>`)", "give each spine and core its own name")
                taken.setdefault(n, base + (key,))
        for n, path in taken.items():
            if len(n) > 63:
                yield error("rail-switch-name", path, f"switch name `{n[:70]}...` of fabric `{fname}` is longer "
                            "than 63 characters", "use a shorter scalable unit name")
                break
        clash = hostlist.parse(",".join(taken)).intersection(hosts) if taken else hostlist.parse("")
        if clash:
            yield error("rail-switch-name", base, f"switches of fabric `{fname}` have host names: {clash}",
                        "name switches and hosts apart (a switch is not a node)")
        # every node placed on the fabric has one compute port per rail
        for gname, g in d.nodes.items():
            if g.placement is None or g.placement.fabric != fname or fabric.kind not in ("infiniband", "roce"):
                continue
            ports = compute_ports(d, gname, fabric.kind)
            if ports != topo.rails:
                yield error("rail-ports", base + ("rails",),
                            f"fabric `{fname}` has {topo.rails} rails, but node group `{gname}` (hardware "
                            f"`{g.hardware}`) has {ports} compute {fabric.kind} port(s)",
                            "each node's compute port i is cabled to rail leaf i: set `rails` to the port "
                            "count (the `count` of the compute NICs), or fix the hardware's NICs")


@check("switch-ports")
def switch_ports(ctx: Context) -> Iterable[Finding]:
    """An InfiniBand switch has at most 254 external ports (port numbers are 8 bits, 0 is the
    switch's own management port, 255 reserved): a leaf or spine the cabling needs more of cannot
    be built, and no subnet manager (nor ibsim) can bring it up. Blocks are Slurm's grouping, not
    switches, so only tree and rail fabrics are counted."""
    from ..fabric.layout import MAX_SWITCH_PORTS, FabricError, layout, switch_ports as used_ports

    d = ctx.definition
    for fname, fabric in d.network.fabrics.items():
        topo = fabric.topology
        if fabric.kind != "infiniband" or topo.kind not in ("tree", "rail"):
            continue
        if any(g.hardware not in d.hardware for g in d.nodes.values()):
            return  # ref-hardware says so; without the hardware there is no port count
        try:
            lay = layout(d, fname)
        except FabricError:
            continue  # cabling that cannot be laid out is reported by the placement and rail checks
        base = ("network", "fabrics", fname, "topology")
        spines = set(hostlist.names(topo.spines)) if topo.kind == "rail" and topo.spines else set()
        for sname, n in used_ports(lay).items():
            if n <= MAX_SWITCH_PORTS:
                continue
            if topo.kind == "tree":
                path: Path = base + ("switches", sname)
            elif lay.rail_of and sname in lay.rail_of:
                path = base + ("scalable_units", lay.rail_of[sname][0])
            else:
                path = base + ("spines" if sname in spines else "cores",)
            members = lay.leaves.get(sname, ())
            down = sum(1 for h in members for q in range(1, lay.hosts[h].ports + 1) if lay.hosts[h].leaf_of(q) == sname)
            split = (f"{down} for the compute ports of {len(members)} hosts, {n - down} for cables to other "
                     "switches" if members else "all for cables to other switches")
            yield error("switch-ports", path,
                        f"switch `{sname}` of fabric `{fname}` needs {n} ports ({split}); an InfiniBand switch "
                        f"has at most {MAX_SWITCH_PORTS}",
                        "spread the hosts over more leaves (a node's 8 HCA ports fill 8 leaf ports each), or "
                        "cable each HCA to its own rail leaf with `kind: rail` (docs/fabric.md)")
            break  # one per fabric: the rest are the same mistake


def slurm_fabric(d):
    """(fabric name, fabric) Slurm's topology.conf describes: the first Slurm group's."""
    for g in d.groups_of("slurm").values():
        if g.placement and g.placement.slurm_fabric in d.network.fabrics:
            return g.placement.slurm_fabric, d.network.fabrics[g.placement.slurm_fabric]
    return None, None


@check("slurm-block-sizes")
def slurm_block_sizes(ctx: Context) -> Iterable[Finding]:
    """What slurmctld's topology/block does with the blocks it reads (block_record.c): the first
    BlockSizes value (else the first block's node count) is the base block size; a block with fewer
    nodes is fatal; every size must be base x 2^k (else fatal); a size needs that many base blocks."""
    d = ctx.definition
    if d.slurm is None:
        return
    fname, fabric = slurm_fabric(d)
    if fabric is None or fabric.topology.slurm_plugin != "block":
        return
    topo = fabric.topology
    base_path = ("network", "fabrics", fname, "topology")
    key = "blocks" if topo.kind == "block" else "scalable_units"
    ours = hostlist.union(g.hosts for g in d.groups_of("slurm").values())
    blocks = [(n, len(hostlist.parse(nodes).intersection(ours))) for n, nodes in topo.units()]
    blocks = [(n, c) for n, c in blocks if c]
    if not blocks:
        return
    sizes = topo.block_sizes
    base = sizes[0] if sizes else blocks[0][1]
    for i, size in enumerate(sizes[1:], 1):
        ratio = size // base
        if size % base or ratio & (ratio - 1) or size <= sizes[i - 1]:
            yield error("block-sizes-invalid", base_path + ("block_sizes", i),
                        f"BlockSizes {size} is not the base block size {base} times a power of two larger than "
                        f"{sizes[i - 1]}; slurmctld refuses to start", f"use {base * 2}, {base * 4}, ...: "
                        "successive sizes double the base block (Slurm topology.conf, BlockSizes)")
            return
    for n, count in blocks:
        if count < base:
            yield error("block-too-small", base_path + (key, n, "nodes"),
                        f"block `{n}` has {count} Slurm node(s), fewer than the base block size {base}"
                        + (" (the first BlockSizes value)" if sizes else " (the first block's node count)")
                        + "; slurmctld 24.11 refuses to start, newer ones keep a block too small for a base-size job",
                        "every block needs at least the base block size of Slurm nodes: lower the first "
                        "BlockSizes value, or order the blocks so the smallest comes first")
            return
    for i, size in enumerate(sizes):
        need = size // base
        if need > len(blocks):
            yield error("block-sizes-count", base_path + ("block_sizes", i),
                        f"BlockSizes {size} aggregates {need} blocks of {base} nodes, but fabric `{fname}` has "
                        f"{len(blocks)} block(s) with Slurm nodes", f"list sizes up to {base * _pow2(len(blocks))}"
                        f" ({_pow2(len(blocks))} of the {len(blocks)} blocks), or add blocks")
            return


def _pow2(n: int) -> int:
    """The largest power of two <= n (n >= 1)."""
    return 1 << (n.bit_length() - 1)


def canary_group(d) -> str | None:
    """The group the canary is taken from when the plan has every group to upgrade."""
    policy = d.upgrade.canary
    if policy.node_group in d.nodes:
        return policy.node_group
    slurm = [g for g, x in d.nodes.items() if x.control_plane == "slurm"]
    return (slurm or list(d.nodes) or [None])[0]


@check("canary-fabric")
def canary_fabric(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    group = canary_group(d)
    if group is None:
        return
    g = d.nodes[group]
    if g.placement is None or g.placement.fabric not in d.network.fabrics:
        return
    policy = d.upgrade.canary
    kind = d.network.fabrics[g.placement.fabric].topology.kind
    unit = {"tree": "leaf switch(es)", "block": "block(s)", "rail": "scalable unit(s)"}[kind]
    spans = [n for n, _ in leaves(d, group) if n != "-"]
    path = ("upgrade", "canary", "node_group") if policy.node_group else ("upgrade", "canary", "min_leaf_switches")
    if len(spans) == 1 and policy.min_leaf_switches >= 2:
        yield error("canary-single-leaf", path,
                    f"canary group `{group}` is on one {unit.removesuffix('(s)').removesuffix('(es)')} "
                    f"(`{spans[0]}`) of fabric `{g.placement.fabric}`: the canary's collective test never "
                    "crosses the fabric",
                    "take the canary from a group spread over at least two "
                    + ("scalable units" if kind == "rail" else "leaves")
                    + " (upgrade.canary.node_group), or set min_leaf_switches: 1 for a one-leaf cluster")
    elif 2 <= len(spans) < policy.min_leaf_switches:
        yield error("canary-leaf-count", ("upgrade", "canary", "min_leaf_switches"),
                    f"upgrade.canary.min_leaf_switches is {policy.min_leaf_switches}, but canary group `{group}` "
                    f"spans {len(spans)} {unit} of fabric `{g.placement.fabric}` ({', '.join(spans)})",
                    f"set min_leaf_switches to at most {len(spans)}"
                    + (" (on a rail-optimised fabric it counts scalable units)" if kind == "rail" else "")
                    + ", or take the canary from a wider group")


@check("nvlink-domains")
def nvlink_domains(ctx: Context) -> Iterable[Finding]:
    d = ctx.definition
    for fname, fabric in d.network.fabrics.items():
        if fabric.kind == "nvlink" and fabric.topology.kind != "block":
            yield error("nvlink-topology", ("network", "fabrics", fname, "topology", "kind"),
                        f"fabric `{fname}` is an NVLink fabric with a {fabric.topology.kind} topology",
                        "NVLink domains are blocks: `topology: {kind: block, blocks: {rack01: {nodes: ...}}}`, "
                        "one block per NVL72 rack")
    for gname, g in d.nodes.items():
        if g.placement is None or g.placement.nvlink is None:
            continue
        path = ("nodes", gname, "placement", "nvlink")
        f = d.network.fabrics.get(g.placement.nvlink)
        if f is None or f.kind != "nvlink":
            nv = sorted(n for n, x in d.network.fabrics.items() if x.kind == "nvlink")
            yield error("ref-nvlink", path,
                        f"`{g.placement.nvlink}` is not a fabric of kind nvlink"
                        + (f" (it is {f.kind})" if f is not None else ""),
                        f"NVLink fabrics: {', '.join(nv)}" if nv else
                        "define the NVLink domains under network.fabrics with `kind: nvlink`")
            continue
        hw = d.hardware.get(g.hardware)
        if hw is None:
            continue
        dom = domain_for(hw.platform)
        if dom is None:
            yield error("nvlink-platform", path,
                        f"node group `{gname}` is placed in NVLink domains, but platform `{hw.platform}` of "
                        f"hardware `{g.hardware}` has none known",
                        f"multi-node NVLink platforms: {', '.join(sorted(nvlink_table()))}")
            continue
        if hw.gpu is None or hw.gpu.count != dom.gpus_per_tray:
            yield error("nvlink-platform", ("hardware", g.hardware, "gpu", "count") if hw.gpu else
                        ("hardware", g.hardware), f"hardware `{g.hardware}` ({hw.platform}) has "
                        f"{hw.gpu.count if hw.gpu else 0} GPU(s) per node; a {hw.platform} compute tray has "
                        f"{dom.gpus_per_tray}", f"set gpu.count: {dom.gpus_per_tray}")
        img = d.images.get(g.image)
        if img is not None and dom.cpu_arch != img.architecture:
            yield error("image-arch", ("nodes", gname, "image"),
                        f"node group `{gname}` ({hw.platform}) has {dom.cpu_arch} CPUs, but image `{g.image}` is "
                        f"built for {img.architecture}: its kernel and packages cannot run there, and PXE would "
                        "hand the trays' firmware the wrong first stage",
                        f"set images.{g.image}.architecture: {dom.cpu_arch} (or give the group an image of that "
                        "architecture)")
        if f.topology.kind != "block":
            continue
        mine = ctx.group_nodes[gname]
        for bname, block in f.topology.blocks.items():
            count = len(hostlist.parse(block.nodes))
            if count > dom.trays and hostlist.parse(block.nodes).intersection(mine):
                yield error("nvlink-domain-size", ("network", "fabrics", g.placement.nvlink, "topology", "blocks",
                                                   bname, "nodes"),
                            f"NVLink domain `{bname}` lists {count} nodes; one {hw.platform} domain holds "
                            f"{dom.trays} compute trays ({dom.gpus} GPUs)",
                            "one block per NVL72 rack: split the block")
        missing = mine.difference(hostlist.union(b.nodes for b in f.topology.blocks.values()))
        if missing:
            yield error("nvlink-domain-missing", path,
                        f"{len(missing)} node(s) of `{gname}` ({missing}) are in no NVLink domain of "
                        f"`{g.placement.nvlink}`",
                        "list every node under the block of its rack")


def _attachment_subnet(d, role: str, network: str):
    """(subnet or None, problem or None) of an attachment's network."""
    if role == "provisioning":
        return (d.network.provisioning.subnet, None) if network == "provisioning" else \
            (None, "a provisioning attachment names `provisioning` (network.provisioning)")
    if role == "management":
        if network != "management":
            return None, "a management (BMC) attachment names `management` (network.management)"
        if d.network.management is None:
            return None, "define the BMC network under network.management: {subnet: ...}"
        return d.network.management.subnet, None
    f = d.network.fabrics.get(network)
    if f is None:
        known = ", ".join(sorted(d.network.fabrics)) or "none"
        return None, f"a {role} attachment names a fabric of network.fabrics (fabrics: {known})"
    if f.kind == "nvlink":
        return None, "NVLink domains are `placement.nvlink`, not an attachment"
    return f.subnet, None


@check("attachments")
def attachments(ctx: Context) -> Iterable[Finding]:
    """Each node group's networks by role: the network exists and suits the role, the NIC is the
    hardware's with that role, addresses fall in the network's subnet; the BMC network is a subnet of
    its own (the provisioning dnsmasq serves only the provisioning subnet)."""
    d = ctx.definition
    mgmt = d.network.management
    if mgmt is not None:
        others = [("network.provisioning.subnet", d.network.provisioning.subnet)]
        others += [(f"network.fabrics.{n}.subnet", f.subnet) for n, f in d.network.fabrics.items() if f.subnet]
        for where, net in others:
            if mgmt.subnet.overlaps(net):
                yield error("management-subnet", ("network", "management", "subnet"),
                            f"the BMC network {mgmt.subnet} overlaps {where} ({net})",
                            "give the out-of-band network a subnet of its own: the provisioning dnsmasq must "
                            "never lease or boot a BMC, and tenant traffic on the fabrics must not reach it")
    for gname, g in d.nodes.items():
        hw = d.hardware.get(g.hardware)
        count = len(ctx.group_nodes[gname])
        for role, a in g.attachments.items():
            path = ("nodes", gname, "attachments", role)
            subnet, problem = _attachment_subnet(d, role, a.network)
            if problem:
                yield error("attachment-network", path + ("network",),
                            f"node group `{gname}` attaches {role} to `{a.network}`", problem)
                continue
            if role == "compute" and g.placement and a.network != g.placement.fabric:
                yield error("attachment-network", path + ("network",),
                            f"node group `{gname}` attaches compute to `{a.network}` but is placed on fabric "
                            f"`{g.placement.fabric}`", "the compute attachment is the fabric of `placement`")
                continue
            nic = next((n for n in hw.nics if n.name == a.nic), None) if hw else None
            if hw is not None and (nic is None or nic.role != role):
                names = ", ".join(f"{n.name} ({n.role})" for n in hw.nics) or "none"
                yield error("attachment-nic", path + ("nic",),
                            f"node group `{gname}`: hardware `{g.hardware}` has no {role} NIC `{a.nic}`",
                            f"name a NIC of the hardware whose role is {role} (its NICs: {names})")
                continue
            if a.ipv4_start is not None:
                if subnet is None:
                    yield error("attachment-ip", path + ("ipv4_start",),
                                f"node group `{gname}` gives {role} addresses on `{a.network}`, which has no subnet",
                                f"set network.fabrics.{a.network}.subnet")
                    continue
                last = int(a.ipv4_start) + count - 1
                if a.ipv4_start not in subnet or last > int(subnet.broadcast_address) - 1 \
                        or a.ipv4_start == subnet.network_address:
                    yield error("attachment-ip", path + ("ipv4_start",),
                                f"node group `{gname}`: {count} {role} address(es) from {a.ipv4_start} do not fit "
                                f"in {subnet}", "start the range inside the subnet, with room for every host")
    if mgmt is not None and mgmt.gateway is not None:
        from .checks_nodes import gateway_collisions

        bmcs = [(int(a.ipv4_start), int(a.ipv4_start) + len(ctx.group_nodes[gname]) - 1, (),
                 f"node group `{gname}`'s BMCs") for gname, g in d.nodes.items()
                for role, a in g.attachments.items() if role == "management" and a.ipv4_start is not None]
        yield from gateway_collisions(int(mgmt.gateway), bmcs, ("network", "management", "gateway"))


# The largest IPoIB MTU in datagram mode: a 4K InfiniBand MTU less the 4-byte IPoIB header
# (systemd.network(5) [IPoIB] Mode=: "the interface MTU is equal to the IB L2 MTU minus ... 4 bytes").
IPOIB_DATAGRAM_MTU = 4092


def storage_fabrics(d) -> dict[str, list[str]]:
    """fabric -> node groups that attach storage to it."""
    out: dict[str, list[str]] = {}
    for gname, g in d.nodes.items():
        a = g.attachments.get("storage")
        if a is not None and a.network in d.network.fabrics:
            out.setdefault(a.network, []).append(gname)
    return out


@check("storage-fabric")
def storage_fabric(ctx: Context) -> Iterable[Finding]:
    """The interfaces networkd brings up on a storage fabric: IPoIB mode only on InfiniBand, an MTU
    the mode can carry, a subnet of its own (not the provisioning, BMC or another fabric's network: a
    node would route storage traffic out of the wrong port, or tenants reach the BMCs); filesystems
    reached over a storage fabric are mounted only by groups attached to it."""
    d = ctx.definition
    for fname, f in d.network.fabrics.items():
        base = ("network", "fabrics", fname)
        if f.ipoib_mode is not None and f.kind != "infiniband":
            yield error("fabric-interface", base + ("ipoib_mode",),
                        f"fabric `{fname}` is {f.kind}: IPoIB mode applies to InfiniBand fabrics only",
                        "remove ipoib_mode (MTU alone sets a RoCE/Ethernet interface)")
        if f.rail_addressing is not None and f.kind != "roce":
            yield error("fabric-interface", base + ("rail_addressing",),
                        f"fabric `{fname}` is {f.kind}: rail addressing is for RoCE rails only",
                        "remove rail_addressing, or set kind: roce")
        if f.lossless is not None and f.kind != "roce":
            yield error("fabric-interface", base + ("lossless",),
                        f"fabric `{fname}` is {f.kind}: lossless Ethernet (trust, PFC, ECN) is for RoCE only",
                        "remove lossless, or set kind: roce")
        # unset is the kernel's default, datagram: the MTU would be refused on the interface all the same
        if f.kind == "infiniband" and f.ipoib_mode != "connected" and f.mtu and f.mtu > IPOIB_DATAGRAM_MTU:
            mode = "datagram mode" if f.ipoib_mode else "datagram mode (ipoib_mode unset: the kernel's default)"
            yield error("fabric-interface", base + ("mtu",),
                        f"fabric `{fname}`: MTU {f.mtu} in IPoIB {mode}; datagram mode carries at most "
                        f"{IPOIB_DATAGRAM_MTU} (a 4K InfiniBand MTU less the IPoIB header)",
                        "set ipoib_mode: connected (MTU up to 65520) or an MTU of at most 4092")
    stor = storage_fabrics(d)
    for fname in stor:
        f = d.network.fabrics[fname]
        if f.subnet is None:
            continue
        others = [("network.provisioning.subnet", d.network.provisioning.subnet)]
        if d.network.management is not None:
            others.append(("network.management.subnet", d.network.management.subnet))
        others += [(f"network.fabrics.{n}.subnet", x.subnet) for n, x in d.network.fabrics.items()
                   if n != fname and x.subnet is not None]
        for where, net in others:
            if f.subnet.overlaps(net):
                yield error("storage-subnet", ("network", "fabrics", fname, "subnet"),
                            f"storage fabric `{fname}` ({f.subnet}, attached by {', '.join(stor[fname])}) overlaps "
                            f"{where} ({net})",
                            "give the storage network a subnet of its own: with overlapping subnets a node routes "
                            "storage traffic out of the wrong port, and tenant or provisioning traffic reaches it")
    for fs, x in d.filesystems.items():
        if x.network is None:
            continue
        path = ("filesystems", fs, "network")
        if x.network not in d.network.fabrics or x.network not in stor:
            yield error("filesystem-network", path,
                        f"filesystem `{fs}` is reached over `{x.network}`, which no node group attaches storage to",
                        f"name a storage fabric of the attachments ({', '.join(sorted(stor)) or 'none'})")
            continue
        if x.kind not in ("lustre", "gpfs", "nfs"):
            yield error("filesystem-network", path,
                        f"filesystem `{fs}` ({x.kind}) is a local block device: it is reached over no network",
                        "remove `network` (only lustre, gpfs and nfs are mounted over a storage fabric)")
            continue
        for g in x.node_groups:
            if g in d.nodes and g not in stor[x.network]:
                yield error("filesystem-network", path,
                            f"filesystem `{fs}` is mounted over storage fabric `{x.network}` by node group `{g}`, "
                            "which has no storage attachment on it",
                            f"add `attachments.storage: {{network: {x.network}, nic: ...}}` to nodes.{g}")
        yield from _storage_behind_partitions(d, fs, x)


def _storage_behind_partitions(d, fs: str, x) -> Iterable[Finding]:
    """A filesystem served over InfiniBand while tenants are isolated by partition key
    (tenancy.storage_cuts: its servers, in no partition, share no key with a node). clusterdef renders
    no partition for storage servers, so the promise cannot hold: refuse it."""
    for c in tenancy.storage_cuts(d):
        if c.kind != "partition-key" or c.filesystem != fs:
            continue
        owners = {g: t for t in c.tenants for g in tenancy.owned_groups(d, t)}
        cut = sorted({owners.get(g, "shared nodes") for g in c.groups})
        yield error("isolation-cuts-storage", ("filesystems", fs, "network"),
                    f"filesystem `{fs}` ({x.kind}) is served over InfiniBand fabric `{x.network}`, where the partition "
                    f"keys of {', '.join(f'`{t}`' for t in c.tenants)} leave its servers limited members "
                    f"of Default only: {', '.join(cut)} mounting it could not reach them",
                    "serve the filesystem over an Ethernet/RoCE storage fabric (a `network` of kind roce or ethernet), "
                    "or isolate these tenants by VLAN instead of partition key; clusterdef does not place storage "
                    "servers in the OpenSM partitions")


@check("vlan-storage")
def vlan_storage(ctx: Context) -> Iterable[Finding]:
    """A VLAN tenant's node group whose storage attachment is on an Ethernet/RoCE port: the tenant's VLAN
    takes that port (tenancy.storage_cuts), so the storage address is never set and the port carries only
    the tenant's VLAN. Refused rather than addressed on the VLAN interface: the storage servers are shared,
    on the fabric's one subnet, not on every tenant's VLAN."""
    d = ctx.definition
    for c in tenancy.storage_cuts(d):
        if c.kind != "vlan":
            continue
        [g], [t] = c.groups, c.tenants
        yield error("isolation-cuts-storage", ("nodes", g, "attachments", "storage", "nic"),
                    f"node group `{g}` attaches storage (`{c.fabric}`) to port {c.port}, which tenant `{t}`'s VLAN "
                    f"{tenancy.vlan(d, t)} takes: 10-clusterdef-{c.port}.network (the VLAN, no address) is the "
                    f"first .network systemd-networkd applies to {c.port}, so the storage address is never set, and "
                    "the switch port carries the tenant's VLAN, not the shared storage network",
                    f"attach storage over an InfiniBand fabric (IPoIB carries no VLAN), or isolate `{t}` by "
                    "partition key instead of VLAN; clusterdef does not place storage servers on tenant VLANs")


@check("roce-rails")
def roce_rails(ctx: Context) -> Iterable[Finding]:
    """A node group's addresses on a RoCE compute fabric: one per rail port, rail i on the i-th equal
    slice of the fabric's subnet, the same host offset on every rail (render/network/roce.py): the subnet
    must split into the rails, the group's range fit in rail 1's slice, its ports be no more than the
    rails (docs/network.md)."""
    d = ctx.definition
    for gname in d.nodes:
        if rail_fabric(d, gname) is None:
            continue
        problem = rail_problem(d, gname)
        if problem:
            yield error("roce-rails", ("nodes", gname, "attachments", "compute", "ipv4_start"), problem,
                        "give the fabric a subnet that splits into its rails (a /16 for 8 rails: a /19 each) and start "
                        "the group's addresses inside the first slice, with room for every host")
