"""Images carry the set: every component the set pins for an image's nodes has an apt source that
provides that version on the image's distribution and release (matrices/compat/package-sources.yaml),
the definition does not list set packages itself, site repositories name known sources, and each
Kubernetes GPU layer (driver, container toolkit) has one owner: the image or the GPU Operator."""

from __future__ import annotations

from typing import Iterable

from ..errors import Finding, error
from .registry import Context, check


def _set_package_names(ctx: Context) -> dict[str, str]:
    """Package name -> the set component it belongs to (every source's names, and NVIDIA's)."""
    from ..knowledge.images import bases, nvidia

    out: dict[str, str] = {}
    for src in ctx.matrix.compat.package_sources:
        for comp, c in src.components.items():
            for p in c.packages:
                out.setdefault(p, comp)
    nv = nvidia()
    for p in [*nv["driver_components_r580"], *nv["nvswitch_r580"]]:
        out.setdefault(p, "driver")
    for base in bases().values():
        for p in base.get("driver", ()):
            out.setdefault(p, "driver")
    for p in nv["container_toolkit"]:
        out.setdefault(p, "container_toolkit")
    out.setdefault(nv["nccl_package"], "nccl")
    out.update({"slurmctld": "slurm", "slurmdbd": "slurm", "slurm-wlm": "slurm"})
    return out


@check("images")
def images(ctx: Context) -> Iterable[Finding]:
    from ..matrix import sources
    from ..knowledge.images import bases, carried_by

    d, vs = ctx.definition, ctx.chosen_set
    if vs is None:
        return
    compat = ctx.matrix.compat
    site_ids = {s.id for s in compat.package_sources if s.kind == "site"}
    owned = _set_package_names(ctx)
    for name, img in d.images.items():
        if img.release not in bases().get(img.distribution, {}).get("releases", {}):
            continue  # image-release-unknown (checks_provisioning.py)
        for rid in img.repositories:
            if rid not in site_ids:
                yield error("image-repository-unknown", ("images", name, "repositories", rid),
                            f"image `{name}`: `{rid}` is not a site source of matrices/compat/package-sources.yaml",
                            f"site sources: {', '.join(sorted(site_ids)) or 'none'}")
        for i, pkg in enumerate(img.packages):
            if pkg in owned:
                yield error("image-package-from-set", ("images", name, "packages", i),
                            f"image `{name}`: package `{pkg}` is part of the set's {owned[pkg]}, which the image "
                            f"installs from the set at {vs.name}'s version",
                            f"remove `{pkg}` from images.{name}.packages: the image target adds the set's "
                            f"{owned[pkg]} packages with their pins")
        carries = carried_by(d, name)
        for comp, why in carries.items():
            version = sources.set_version(vs, comp)
            if version is None:
                yield error("image-source-missing", ("images", name, "release"),
                            f"image `{name}`: {why}, but set {vs.name} pins no {comp} version",
                            f"use a set that pins {comp}, or boot this image on nodes that do not need it")
                continue
            if sources.choose(compat, vs, comp, img.distribution, img.release, dict(img.repositories),
                              img.architecture) is None:
                yield error("image-source-missing", ("images", name, "release"),
                            f"image `{name}`: no package source provides {comp} {version} (set {vs.name}) "
                            f"for {img.distribution} {img.release} ({img.architecture}); {why}",
                            sources.explain(compat, comp, img.distribution, img.release, dict(img.repositories),
                                            img.architecture))


@check("gpu-layer-owner")
def gpu_layer_owner(ctx: Context) -> Iterable[Finding]:
    """One owner per layer on Kubernetes GPU nodes: what the image target puts into each image
    (knowledge.images.carried_by) against what the GPU Operator values deploy (render.kubernetes.gpu_operator)."""
    from ..knowledge.images import carried_by, operator_owns_driver

    d = ctx.definition
    k = d.kubernetes
    if k is None:
        return
    no = k.network_operator
    if no.enabled and no.ofed_driver is not None:
        shared = sorted({g.image for g in d.groups_of("kubernetes").values() if g.image in d.images
                         and "doca" in carried_by(d, g.image)})  # workers: a control-plane node has no RDMA pods
        if shared:
            yield error("gpu-layer-two-owners", ("kubernetes", "network_operator", "ofed_driver"),
                        f"the Network Operator deploys its DOCA driver container (ofed_driver), and image(s) "
                        f"{', '.join(f'`{i}`' for i in shared)} of Kubernetes groups install the set's DOCA-OFED "
                        "too (Slurm groups boot them as well)",
                        "remove ofed_driver (the Kubernetes nodes use the image's DOCA-OFED: host MOFED), or give "
                        "the Kubernetes groups an image of their own")
    op = k.gpu_operator
    k8s_gpu = [n for n, g in d.groups_of("kubernetes").items()
               if g.hardware in d.hardware and d.hardware[g.hardware].gpu]
    if op.driver_owner == "image":
        for pool in op.driver_pools:
            yield error("gpu-layer-two-owners", ("kubernetes", "gpu_operator", "driver_pools", pool),
                        f"driver pool `{pool}` makes the GPU Operator deploy a driver, but driver_owner is `image`: "
                        "the nodes' image already installs the set's driver",
                        "remove the driver pool (a canary boots a new image instead), or set "
                        "kubernetes.gpu_operator.driver_owner: operator")
        return
    for gname in k8s_gpu:
        image = d.nodes[gname].image
        if image in d.images and not operator_owns_driver(d, image):
            others = sorted(n for n, g in d.nodes.items() if g.image == image and n not in k8s_gpu)
            yield error("gpu-layer-two-owners", ("nodes", gname, "image"),
                        f"node group `{gname}`: the GPU Operator deploys driver and container toolkit "
                        f"(driver_owner: operator), and image `{image}` installs them too, because "
                        f"{', '.join(f'`{o}`' for o in others)} boot{'s' if len(others) == 1 else ''} it",
                        "give the Kubernetes GPU groups an image of their own, or set "
                        "kubernetes.gpu_operator.driver_owner: image")


def _group_files(d, group: str) -> tuple:
    """What the group's nodes get from roles/tenant_isolation (the mount units of filesystems with a
    source it mounts, its VLAN tenant's files, its RoCE sysctls and lossless unit, which follow from its
    RoCE ports, their fabrics' settings and whether it has rails): as a comparable signature."""
    from .. import tenancy
    from ..fabric.rails import qos_ports, rail_ports

    from .. import datasets

    mounts = tuple(sorted(fs for fs, f in d.filesystems.items() if f.source is not None and group in f.node_groups))
    mounts += tuple(sorted(f"dataset {n}" for n in d.datasets if group in datasets.node_groups(d, n)))
    vlans = tuple(sorted(t for t in tenancy.vlan_tenants(d) if group in tenancy.owned_groups(d, t)
                         and tenancy.vlan_interfaces(d, group)))
    qos = tuple((port, f.qos) for port, f in qos_ports(d, group))
    roce = qos + ((bool(rail_ports(d, group)),) if qos else ())
    return mounts, vlans, roce


@check("image-group-files")
def image_group_files(ctx: Context) -> Iterable[Finding]:
    """A stateless node keeps nothing a role installs past its next boot, so its group's mount units
    and VLAN files must be in the image it boots. The image carries them only when every group booting
    it has the same ones (one group's filesystem must not be mounted on another's nodes)."""
    from ..errors import warning

    d = ctx.definition
    by_image: dict[str, dict[str, tuple]] = {}
    for gname, g in d.nodes.items():
        by_image.setdefault(g.image, {})[gname] = _group_files(d, gname)
    for image, groups in by_image.items():
        if len(set(groups.values())) < 2:
            continue
        for gname, files in groups.items():
            if d.nodes[gname].provisioning != "stateless" or files == ((), (), ()):
                continue
            others = sorted(o for o, f in groups.items() if f != files)
            mounts, vlans, roce = files
            what = ", ".join([*(m if m.startswith("dataset ") else f"filesystem {m}"
                                for m in mounts), *(f"tenant {v}'s VLAN" for v in vlans),
                              *(["RoCE sysctls and lossless Ethernet unit"] if roce else [])])
            yield warning("image-group-files", ("nodes", gname, "image"),
                          f"node group `{gname}` boots stateless from image `{image}`, which it shares with "
                          f"{', '.join(f'`{o}`' for o in others)}: its {what} cannot be in the image, and what "
                          "roles/tenant_isolation installs is gone at the next boot",
                          f"give `{gname}` an image of its own (images.<name>, then nodes.{gname}.image), or "
                          "make it `provisioning: stateful`")
