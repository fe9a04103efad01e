"""Image target: one mkosi configuration per image of the definition, with the NVIDIA
stack pinned from the validated set and a first-boot baseline step.

Layout (all under `images/<image>/`):

    mkosi.conf                       distribution, release, output, kernel, packages (mkosi's default mirror)
    mkosi.conf.d/50-nvidia.conf      driver, CUDA, NCCL and container toolkit packages
    mkosi.skeleton/etc/apt/...       NVIDIA apt sources and the version pins from the set
    mkosi.extra/usr/lib/clusterdef/  the first-boot baseline script and the versions it expects
    mkosi.extra/etc/systemd/system/  its unit, pulled in by multi-user.target
    build.sh                         mkosi build, then the PXE artefacts <image>-<version>.vmlinuz/.initrd
    mkosi.conf.d/60-slurm-node-access.conf   (an image of Slurm nodes, a dedicated tenant) libpam-slurm-adopt
    mkosi.extra/etc/pam.d/sshd       ... and sshd's PAM stack with pam_slurm_adopt last in account, no
                                     pam_systemd; administrators in etc/security/clusterdef-admins.conf
                                     (pam/ here; the slurm_node_access role installs the same files)

mkosi 14 syntax (Debian bookworm); the keys used are also valid for current mkosi. Versions
come from `resolved.set.components` and `resolved.set.firmware`, never from the definition.
Pure: the base recipes (bases.yaml) and NVIDIA package names (nvidia.yaml) are package data.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from ruamel.yaml import YAML

from ...model.images import Image
from ...resolve import Resolved
from ...quoting import guarded_env

_env = guarded_env("clusterdef.render.images")

EXTRA = "mkosi.extra"
BASELINE_DIR = "usr/lib/clusterdef/baseline"
SCRIPT = "usr/lib/clusterdef/firstboot-baseline"
UNIT = "clusterdef-baseline.service"
# Set components the first-boot step compares on the node (the others run in the control planes).
NODE_COMPONENTS = ("driver", "cuda", "nccl", "container_toolkit")


def artefact(name: str, image: Image) -> str:
    """Artefact base name: the image version is part of it, so a change is a new image."""
    return f"{name}-{image.version}"


@cache
def _data(name: str) -> dict:
    return YAML(typ="safe").load(files(__package__).joinpath(name).read_text(encoding="utf-8"))


def bases() -> dict:
    """distribution -> base recipe (repositories, kernel package, releases)."""
    return _data("bases.yaml")


def nvidia_packages(resolved: Resolved, image_name: str) -> dict[str, tuple[list[str], str]]:
    """component -> (packages, apt version glob) for one image, from the validated set."""
    d, c = resolved.definition, resolved.set.components
    img = d.images[image_name]
    nv = _data("nvidia.yaml")
    branch = int(c.driver.split(".")[0])
    base = bases()[img.distribution]
    driver = list(base["driver"])
    if any("nvswitch" in d.hardware[g.hardware].firmware for g in d.nodes.values()
           if g.image == image_name and g.hardware in d.hardware):
        driver += nv["nvswitch_r580"]
    if branch < 580:  # branch-suffixed names before R580
        driver = [f"{p}-{branch}" for p in driver]
    major, minor = c.cuda.split(".")[:2]
    return {
        "driver": (driver, f"{c.driver}-*"),
        "cuda": ([nv["cuda_package"].format(major=major, minor=minor)], f"{c.cuda}-*"),
        "nccl": ([nv["nccl_package"]], f"{c.nccl}-*+cuda{major}.{minor}"),
        "container_toolkit": (list(nv["container_toolkit"]), f"{c.container_toolkit}-*"),
    }


def _pins_held(resolved: Resolved, image_name: str) -> list[str]:
    """Every driver-branch package name the pin file holds (installed ones and their dependencies)."""
    nv = _data("nvidia.yaml")
    branch = int(resolved.set.components.driver.split(".")[0])
    names = list(nv["driver_components_r580"]) + list(nv["nvswitch_r580"])
    if branch < 580:
        names = [f"{p}-{branch}" for p in names]
    return sorted(set(names) | set(nvidia_packages(resolved, image_name)["driver"][0]))


def node_access(resolved: Resolved, image_name: str) -> dict[str, str]:
    """pam_slurm_adopt for an image of Slurm nodes when a tenant is dedicated (docs/tenancy.md):
    nobody reaches such a node over ssh without a job there. Paths relative to images/<image>/."""
    d = resolved.definition
    slurm_nodes = any(g.image == image_name and g.control_plane == "slurm" for g in d.nodes.values())
    dedicated = any(t.isolation.level == "dedicated" and t.slurm for t in d.tenants.values())
    if not (slurm_nodes and dedicated):
        return {}
    pam = files(__package__).joinpath("pam")
    return {
        "mkosi.conf.d/60-slurm-node-access.conf": "# Rendered by clusterdef: pam_slurm_adopt (a tenant is dedicated).\n"
                                                  "[Content]\nPackages=libpam-slurm-adopt\n",
        f"{EXTRA}/etc/pam.d/sshd": pam.joinpath("sshd").read_text(encoding="utf-8"),
        f"{EXTRA}/etc/security/clusterdef-admins.conf": pam.joinpath("clusterdef-admins.conf").read_text(encoding="utf-8"),
    }


def _kv(pairs) -> str:
    return "".join(f"{k}={v}\n" for k, v in pairs)


def render(resolved: Resolved) -> dict[str, str]:
    d, vs = resolved.definition, resolved.set
    tree: dict[str, str] = {}
    for name, img in d.images.items():
        base = bases()[img.distribution]
        release = base["releases"].get(img.release)
        if release is None:  # validate's image-release-unknown reports this before rendering
            raise ValueError(f"image {name}: no base recipe for {img.distribution} {img.release}")
        nv = _data("nvidia.yaml")
        pkgs = nvidia_packages(resolved, name)
        groups = {g: grp.hardware for g, grp in d.nodes.items() if grp.image == name}
        major, minor = vs.components.cuda.split(".")[:2]
        ctx = {
            "cluster": d.cluster.name, "set": vs.name, "name": name, "img": img, "art": artefact(name, img),
            "base": base, "cuda_distro": release["cuda_repo"], "nv": nv, "pkgs": pkgs,
            "kernel_package": base["kernel_package"].format(kernel=img.kernel),
            "packages": [*base["base_packages"], *img.packages],
            "driver_hold": _pins_held(resolved, name), "components": vs.components,
            "branch": vs.driver_branch, "groups": groups,
            "cuda_repo": nv["cuda_repo_url"].format(distro=release["cuda_repo"]),
            "cuda_package": nv["cuda_package"].format(major=major, minor=minor),
        }
        root = f"images/{name}/"
        tree[root + "mkosi.conf"] = _env.get_template("mkosi.conf.j2").render(ctx)
        tree[root + "mkosi.conf.d/50-nvidia.conf"] = _env.get_template("50-nvidia.conf.j2").render(ctx)
        tree[root + "mkosi.skeleton/etc/apt/sources.list.d/clusterdef-nvidia.list"] = \
            _env.get_template("nvidia.list.j2").render(ctx)
        tree[root + "mkosi.skeleton/etc/apt/preferences.d/clusterdef-nvidia.pref"] = \
            _env.get_template("nvidia.pref.j2").render(ctx)
        tree[root + "build.sh"] = _env.get_template("build.sh.j2").render(ctx)
        extra = root + EXTRA + "/"
        tree[extra + SCRIPT] = _env.get_template("firstboot/firstboot-baseline.sh").render(ctx)
        tree[extra + f"etc/systemd/system/{UNIT}"] = _env.get_template("firstboot/unit.j2").render(ctx)
        tree[extra + "etc/systemd/system/multi-user.target.d/clusterdef-baseline.conf"] = \
            f"# Rendered by clusterdef: run the first-boot baseline on every boot of image {name}.\n" \
            f"[Unit]\nWants={UNIT}\n"
        for rel, text in node_access(resolved, name).items():
            tree[root + rel] = text
        bdir = extra + BASELINE_DIR + "/"
        tree[bdir + "meta"] = _kv([("set", vs.name), ("image", artefact(name, img)),
                                   ("cuda_package", ctx["cuda_package"])])
        tree[bdir + "components"] = _kv((c, getattr(vs.components, c)) for c in NODE_COMPONENTS)
        tree[bdir + "groups"] = _kv(sorted(groups.items()))
        for hw in sorted(set(groups.values())):
            htype = d.hardware[hw]
            pinned = vs.firmware.get(htype.platform, {})
            tree[bdir + f"hardware/{hw}"] = _kv((c, pinned.get(c, "unpinned")) for c in htype.firmware)
    return tree
