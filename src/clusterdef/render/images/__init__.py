"""Image target: one mkosi configuration per image of the definition, with the NVIDIA
stack pinned from the validated set and a first-boot baseline step.

Layout (all under `images/<image>/`):

    mkosi.conf                       distribution, release, output, kernel, packages (mkosi's default mirror)
    mkosi.conf.d/50-nvidia.conf      driver, CUDA, NCCL and container toolkit packages
    mkosi.skeleton/etc/apt/...       NVIDIA apt sources and the version pins from the set
    mkosi.extra/usr/lib/clusterdef/  the first-boot baseline script and the versions it expects
    mkosi.extra/etc/systemd/system/  its unit, pulled in by multi-user.target
    build.sh                         mkosi build, then the PXE artefacts <artefact>.vmlinuz/.initrd
    identity                         name, version, set, digest and artefact name of this build

    mkosi.conf.d/60-slurm-node-access.conf   (an image of Slurm nodes, a dedicated tenant) libpam-slurm-adopt
    mkosi.extra/etc/pam.d/sshd       ... and sshd's PAM stack with pam_slurm_adopt last in account, no
                                     pam_systemd; administrators in etc/security/clusterdef-admins.conf
                                     (pam/ here; the slurm_node_access role installs the same files)

The artefact name is `<image>-<version>-<set>-<digest>` (ImageIdentity): the digest is the
sha256 of the recipe, so no build overwrites another on the boot server.

mkosi 14 syntax (Debian bookworm); the keys used are also valid for current mkosi. Versions
come from `resolved.set.components` and `resolved.set.firmware`, never from the definition.
Pure: the base recipes (bases.yaml) and NVIDIA package names (nvidia.yaml) are package data.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

from ruamel.yaml import YAML

from ...resolve import Resolved
from ...quoting import guarded_env

_env = guarded_env("clusterdef.render.images")

EXTRA = "mkosi.extra"
BASELINE_DIR = "usr/lib/clusterdef/baseline"
SCRIPT = "usr/lib/clusterdef/firstboot-baseline"
UNIT = "clusterdef-baseline.service"
# Set components the first-boot step compares on the node (the others run in the control planes).
NODE_COMPONENTS = ("driver", "cuda", "nccl", "container_toolkit")


# Stands in for the artefact name while the recipe is hashed (the name carries the hash).
_STEM = "CLUSTERDEF_ARTEFACT_STEM"


@dataclass(frozen=True)
class ImageIdentity:
    """What an image build is: name, version, the validated set it was built for and the hash of
    its recipe. The artefact name carries all four, so no build overwrites another on the boot
    server (a recipe changed under the same version still gets a new name)."""
    name: str
    version: str
    set: str
    digest: str

    @property
    def artefact(self) -> str:
        return f"{self.name}-{self.version}-{self.set}-{self.digest}"

    def to_json(self) -> dict:
        return {"image": self.name, "version": self.version, "set": self.set, "digest": self.digest,
                "artefact": self.artefact}


def published_identity(name: str, version: str, entry) -> ImageIdentity:
    """The identity of an earlier build listed in `images.<name>.published`."""
    return ImageIdentity(name, version, entry.set, entry.digest)


def identities(resolved: Resolved, recipes: dict[str, str] | None = None) -> dict[str, ImageIdentity]:
    """image name -> identity of its current build (digest: sha256 of the rendered recipe, with
    the artefact name left out, over sorted paths and contents)."""
    out = {}
    recipes = _recipes(resolved) if recipes is None else recipes
    for name, img in resolved.definition.images.items():
        root = f"images/{name}/"
        h = hashlib.sha256()
        for rel in sorted(r for r in recipes if r.startswith(root)):
            h.update(rel[len(root):].encode() + b"\0" + recipes[rel].encode() + b"\0")
        out[name] = ImageIdentity(name, img.version, resolved.set.name, h.hexdigest()[:12])
    return out


def artefact(resolved: Resolved, name: str) -> str:
    """Artefact base name of image `name`'s current build: `<image>-<version>-<set>-<digest>`."""
    return identities(resolved)[name].artefact


def package_pins(resolved: Resolved, name: str) -> dict[str, str]:
    """package -> apt version glob the image pins (the image diff `plan` shows)."""
    return {p: glob for pkgs, glob in nvidia_packages(resolved, name).values() for p in pkgs}


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
    """The recipes with their artefact names, and `images/<image>/identity` per image."""
    recipes = _recipes(resolved)
    ids = identities(resolved, recipes)
    tree = {}
    for rel, text in recipes.items():
        name = rel.split("/")[1]
        tree[rel] = text.replace(_STEM, ids[name].artefact)
    for name, ident in ids.items():
        tree[f"images/{name}/identity"] = (
            f"# Identity of image {name}'s build (rendered by clusterdef): the artefact name carries all of it.\n"
            + _kv(ident.to_json().items()))
    return tree


def _recipes(resolved: Resolved) -> dict[str, str]:
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
            "cluster": d.cluster.name, "set": vs.name, "name": name, "img": img, "art": _STEM,
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
        tree[bdir + "meta"] = _kv([("set", vs.name), ("image", _STEM),
                                   ("cuda_package", ctx["cuda_package"])])
        tree[bdir + "components"] = _kv((c, getattr(vs.components, c)) for c in NODE_COMPONENTS)
        tree[bdir + "groups"] = _kv(sorted(groups.items()))
        for hw in sorted(set(groups.values())):
            htype = d.hardware[hw]
            pinned = vs.firmware.get(htype.platform, {})
            tree[bdir + f"hardware/{hw}"] = _kv((c, pinned.get(c, "unpinned")) for c in htype.firmware)
    return tree
