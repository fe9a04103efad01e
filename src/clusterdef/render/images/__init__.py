"""Image target: one mkosi configuration per image of the definition, with the NVIDIA
stack pinned from the validated set and a first-boot baseline step.

Layout (all under `images/<image>/`):

    mkosi.conf                       distribution, release, output, kernel, packages (mkosi's default mirror)
    mkosi.conf.d/50-nvidia.conf      driver (+ kernel headers for DKMS), CUDA, NCCL and container toolkit packages
    mkosi.conf.d/60-set.conf         the rest of the set: slurmd or kubelet/kubeadm, DOCA-OFED, MFT, ipmitool
    mkosi.skeleton/etc/apt/...       apt sources and the version pins from the set (NVIDIA's and the others')
    mkosi.extra/usr/lib/clusterdef/  the probe, the first-boot baseline script and the versions it expects
    mkosi.extra/<health check path>  nodecheck, where slurm.conf's HealthCheckProgram points (Slurm images)
    mkosi.extra/etc/systemd/system/  its unit, pulled in by multi-user.target
    mkosi.extra/etc/default/slurmd   (Slurm images) configless slurmd: --conf-server the controllers, and the
                                     unit's drop-in (render/slurm/configless.py)
    build.sh                         mkosi build, then the PXE artefacts <artefact>.vmlinuz/.initrd
    sign.sh, verify/init, verify/minisign.pub   (images.<name>.signing) <artefact>.SHA256SUMS, its minisign
                                     signature and <artefact>.verify.initrd, the initrd that checks both at boot
    identity                         name, version, set, digest and artefact name of this build

    mkosi.conf.d/60-slurm-node-access.conf   (an image of Slurm nodes, a dedicated tenant) libpam-slurm-adopt
    mkosi.conf.d/65-identity.conf    (an identity section) sssd, libnss-sss, libpam-sss, sudo; in mkosi.extra/
                                     etc/nsswitch.conf, etc/sudoers.d/clusterdef-admins (0440) and, when every
                                     group booting the image shares it and it holds no secret, etc/sssd/sssd.conf (0600)
    mkosi.extra/etc/pam.d/sshd       ... and sshd's PAM stack with pam_slurm_adopt last in account, no
                                     pam_systemd; administrators in etc/security/clusterdef-admins.conf
                                     (pam/ here; the slurm_node_access role installs the same files)

The artefact name is `<image>-<version>-<set>-<digest>` (ImageIdentity): the digest is the
sha256 of the recipe, so no build overwrites another on the boot server.

mkosi 14 syntax (Debian bookworm); the keys used are also valid for current mkosi. Versions
come from `resolved.set.components` and `resolved.set.firmware`, never from the definition.
Pure: the base recipes and NVIDIA package names are package data (knowledge/images.py).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from functools import cache
from importlib.resources import files

from ...source import safe_yaml

from ... import memo, probe
from ...errors import present
from ...knowledge.images import (bases, branch_names, carried_by, fabric_components, nvidia, nvlink5_components,
                                 operator_owns_driver)
from ...knowledge.services import checked_components, component_packages, image_packages, image_services
from ...matrix import sources
from ...model.images import Image
from ...resolve import Resolved
from ...quoting import guarded_env

_env = guarded_env("clusterdef.render.images")

EXTRA = "mkosi.extra"
BASELINE_DIR = "usr/lib/clusterdef/baseline"
SCRIPT = "usr/lib/clusterdef/firstboot-baseline"
UNIT = "clusterdef-baseline.service"
# Set components the first-boot step compares on the node (the others run in the control planes),
# plus slurm (slurmd) or kubelet by the control plane of the image's groups.
NODE_COMPONENTS = ("driver", "cuda", "nccl", "container_toolkit")
# Set components installed from mkosi.conf.d/60-set.conf (the NVIDIA stack is in 50-nvidia.conf).
SET_COMPONENTS = ("slurm", "kubernetes", "doca", "mft")


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
    return {p: glob for pkgs, glob in nvidia_packages(resolved, name).values() if glob for p in pkgs}


@cache
def _data(name: str) -> dict:
    return safe_yaml().load(files(__package__).joinpath(name).read_text(encoding="utf-8"))


def architectures() -> dict:
    """Debian architecture -> how mkosi and the PXE first stage name it (architectures.yaml)."""
    return _data("architectures.yaml")


def cuda_arch(resolved: Resolved, img: Image) -> str:
    """The CUDA repository's path for the image's architecture (x86_64, sbsa: package-sources.yaml)."""
    path = sources.arch_path(resolved.matrix.compat, "cuda", img.architecture)
    if path is None:  # validate's image-source-missing reports this before rendering
        raise ValueError(f"the CUDA repository has no {img.architecture} build")
    return path


def carried(resolved: Resolved, image_name: str) -> dict[str, str]:
    """Set component -> why the image carries it (the operator's layers left out where it owns them)."""
    return carried_by(resolved.definition, image_name)


def set_packages(resolved: Resolved, image_name: str) -> dict[str, sources.Choice]:
    """The set's components beyond the NVIDIA stack, each with the source that provides it (the
    image-source-missing check refuses an image for which one has none)."""
    d = resolved.definition
    img = d.images[image_name]
    out = {}
    for comp in carried(resolved, image_name):
        if comp not in SET_COMPONENTS:
            continue
        choice = sources.choose(resolved.matrix.compat, resolved.set, comp, img.distribution, img.release,
                                dict(img.repositories), img.architecture)
        if choice is None:  # validate's image-source-missing reports this before rendering
            raise ValueError(f"image {image_name}: no source provides {comp} for {img.distribution} {img.release}")
        out[comp] = choice
    services = image_services(d, image_name)
    if services is not None:  # a service image: its daemons' packages, at the same pin (docs/services.md)
        for comp in component_packages(services):
            if comp in out:  # the source's own package names (slurm-smd-slurmctld from a site build)
                named = out[comp].source.components[comp].services
                out[comp] = replace(out[comp], packages=tuple(component_packages(services, named)[comp]))
    return out


def repo_line(choice: sources.Choice, img: Image, components) -> str | None:
    """The apt source of a choice (None for the distribution's own archive). A vendor URL pattern
    takes {minor} (of the component's version), {distro} (the repository's id of the release) and
    any set component by name, release part only ({doca}: 3.2.1 of 3.2.1-044413)."""
    src = choice.source
    if src.kind == "distribution":
        return None
    keyring = f"/usr/share/keyrings/clusterdef-{src.id}.gpg"
    if src.kind == "site":
        return f"deb [signed-by={keyring}] {img.repositories[src.id]} ./"
    named = {k: str(v).lstrip("v").split("-")[0] for k, v in components.model_dump().items() if v}
    pattern = present(src.url, f"package source {src.id}'s url (a {src.kind} source)")
    url = pattern.format(**named, minor=".".join(choice.version.split(".")[:2]), distro=choice.distro,
                         arch=choice.arch)
    return f"deb [signed-by={keyring}] {url} /"


def nvidia_packages(resolved: Resolved, image_name: str) -> dict[str, tuple[list[str], str]]:
    """component -> (packages, apt version glob) for one image, from the validated set; without
    driver and toolkit where the GPU Operator owns them."""
    d, c = resolved.definition, resolved.set.components
    if image_services(d, image_name) is not None:  # a service image carries no NVIDIA stack
        return {}
    img = d.images[image_name]
    nv = nvidia()
    branch = int(c.driver.split(".")[0])
    base = bases()[img.distribution]
    driver = list(base["driver"])
    if nvswitch_image(d, image_name):  # Fabric Manager and NSCQ at exactly the driver's version
        driver += nv["nvswitch_r580"]
    driver = branch_names(driver, branch)
    major, minor = c.cuda.split(".")[:2]
    out = {
        "driver": (driver, f"{c.driver}-*"),
        "cuda": ([nv["cuda_package"].format(major=major, minor=minor)], f"{c.cuda}-*"),
        "nccl": ([nv["nccl_package"]], f"{c.nccl}-*+cuda{major}.{minor}"),
        "container_toolkit": (list(nv["container_toolkit"]), f"{c.container_toolkit}-*"),
    }
    if operator_owns_driver(d, image_name):
        del out["driver"], out["container_toolkit"]
    elif nvlsm_image(d, image_name):  # NVLSM beside Fabric Manager, unpinned (nvidia_packages.yaml nvlink5_packages)
        out["nvlink5"] = (list(nv["nvlink5_packages"]), "")
    return out


def nvlsm_image(d, image_name: str) -> bool:
    """A node group with fourth-generation NVSwitches (NVLink 5: HGX/DGX B200, B300; knowledge/platforms.py
    needs_nvlsm) boots this image: it carries NVLSM and loads the modules NVLSM needs before Fabric Manager."""
    return any(nvlink5_components(d.hardware[g.hardware]) for g in d.nodes.values()
               if g.image == image_name and g.hardware in d.hardware)


def nvswitch_image(d, image_name: str) -> bool:
    """A node group with NVSwitches boots this image (what its hardware is: gpu.nvswitch or the platform,
    knowledge/platforms.yaml; not the firmware the set pins): it carries Fabric Manager and NSCQ and starts
    Fabric Manager at boot (knowledge/nvidia_packages.yaml)."""
    return any(fabric_components(d.hardware[g.hardware]) for g in d.nodes.values()
               if g.image == image_name and g.hardware in d.hardware)


def nvlsm_files(image_name: str) -> dict[str, str]:
    """Boot files of an NVLink 5 image: the modules NVLSM needs, and Fabric Manager's unit (whose start script
    starts NVLSM first) ordered after they are loaded (knowledge/nvidia_packages.yaml nvlink5_modules)."""
    nv = nvidia()
    why = ("# NVLink Subnet Manager (nvlsm) reaches the fourth-generation NVSwitches through a ConnectX bridge:\n"
           "# NVIDIA's driver container waits for these modules before it starts NVLSM and Fabric Manager\n"
           "# (NVIDIA/gpu-driver-container@06a208ca ubuntu22.04/nvidia-driver _ensure_nvlink5_prerequisites).\n")
    fm = nv["nvswitch_units"][0]
    return {
        "etc/modules-load.d/clusterdef-nvlsm.conf":
            f"# Rendered by clusterdef for image {image_name} (NVLink 5 nodes with NVSwitches).\n{why}"
            + "".join(f"{m}\n" for m in nv["nvlink5_modules"]),
        f"etc/systemd/system/{fm}.d/clusterdef-nvlsm.conf":
            f"# Rendered by clusterdef for image {image_name}: {fm} starts NVLSM, then Fabric Manager\n"
            "# (nvidia-fabricmanager-start.sh on an NVLink 5 system); both need the modules above loaded first.\n"
            "[Unit]\nWants=systemd-modules-load.service\nAfter=systemd-modules-load.service\n",
    }


def _pins_held(resolved: Resolved, image_name: str) -> list[str]:
    """Every driver-branch package name the pin file holds (installed ones and their dependencies)."""
    nv = nvidia()
    branch = int(resolved.set.components.driver.split(".")[0])
    names = branch_names(list(nv["driver_components_r580"]) + list(nv["nvswitch_r580"]), branch)
    return sorted(set(names) | set(nvidia_packages(resolved, image_name).get("driver", ([], ""))[0]))


def group_files(resolved: Resolved, image: str) -> dict[str, str]:
    """The mount units, VLAN files and storage interface files of the node groups booting `image`
    (storage.install), carried in the image so a stateless node has them from boot on
    (roles/tenant_isolation installs the same files on running nodes; on a stateless one they would be
    gone at the next boot). Mount units and VLAN files only when every group booting the image has the
    same ones: otherwise none go in (`image-group-files` warns), since one group's filesystem must not
    be mounted on another's nodes. The storage interface files of every host go in: each matches its
    own host only (`Host=`; a stateless node's hostname comes from DHCP, see pxe). Mount units are
    pulled in by local-fs.target / remote-fs.target drop-ins (no enable symlinks in a text tree)."""
    from ..storage import node_files

    d = resolved.definition
    per_group = node_files(resolved)
    mine = [g for g, n in d.nodes.items() if n.image == image]
    # one host's storage interface file matches that host only ([Match] Host=): every one goes in
    out: dict[str, str] = {f["dest"].lstrip("/"): str(f["content"]) for g in mine for f in per_group.get(g, [])
                           if "host" in f}
    sets = {tuple((f["dest"], str(f["content"])) for f in per_group.get(g, []) if "host" not in f) for g in mine}
    if len(sets) != 1:
        return out
    for dest, text in next(iter(sets)):
        out[dest.lstrip("/")] = text
        if dest.endswith(".mount"):
            unit = dest.rsplit("/", 1)[1]
            target = "remote-fs.target" if "WantedBy=remote-fs.target" in text else "local-fs.target"
            out[f"etc/systemd/system/{target}.d/clusterdef-{unit}.conf"] = (
                f"# Rendered by clusterdef: mount {unit} on every boot of image {image}.\n[Unit]\nWants={unit}\n")
        elif dest.endswith(".service") and "WantedBy=multi-user.target" in text:
            unit = dest.rsplit("/", 1)[1]
            out[f"etc/systemd/system/multi-user.target.d/{unit}.conf"] = (
                f"# Rendered by clusterdef: start {unit} on every boot of image {image}, as `systemctl enable` "
                f"would through its WantedBy=multi-user.target.\n[Unit]\nWants={unit}\n")
    return out


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


def identity_files(resolved: Resolved, image_name: str) -> dict[str, str]:
    """SSSD, NSS and sudo for the image's nodes (docs/identity.md): the packages, and the identity
    files every group booting the image shares and that hold no secret (identity.image_files; the
    rest roles/identity installs after boot). Paths relative to images/<image>/."""
    from .. import identity

    d = resolved.definition
    if d.identity is None or not any(g.image == image_name for g in d.nodes.values()):
        return {}
    pkgs = "".join(f"        {p}\n" for p in identity.packages(d))
    out = {"mkosi.conf.d/65-identity.conf": "# Rendered by clusterdef: SSSD logins and sudo (identity).\n"
                                            f"[Content]\nPackages=\n{pkgs}"}
    for dest, f in identity.image_files(resolved, image_name).items():
        out[EXTRA + dest] = str(f["content"])
    return out


def private_files(resolved: Resolved, image_name: str) -> list[tuple[str, str]]:
    """(mode, path under mkosi.extra/) of the image's files that must not keep the renderer's 0644."""
    from .. import identity

    return [(f["mode"], dest.lstrip("/")) for dest, f in identity.image_files(resolved, image_name).items()
            if f["mode"] != "0644"]


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
    """The images' build recipes (asked by the images target and PXE's identities: once, memo.py)."""
    return dict(memo.once(resolved, "images.recipes", lambda: _build_recipes(resolved)))


def _build_recipes(resolved: Resolved) -> dict[str, str]:
    d, vs = resolved.definition, resolved.set
    tree: dict[str, str] = {}
    for name, img in d.images.items():
        base = bases()[img.distribution]
        release = base["releases"].get(img.release)
        if release is None:  # validate's image-release-unknown reports this before rendering
            raise ValueError(f"image {name}: no base recipe for {img.distribution} {img.release}")
        nv = nvidia()
        pkgs = nvidia_packages(resolved, name)
        groups = {g: grp.hardware for g, grp in d.nodes.items() if grp.image == name}
        major, minor = vs.components.cuda.split(".")[:2]
        set_pkgs = set_packages(resolved, name)
        headers = [base["headers_package"].format(kernel=img.kernel)] if "driver" in pkgs else []
        readers = {t for hw in set(groups.values()) for t in probe.read_tools(d.hardware[hw].firmware).values()}
        tools_nv = [nv["firmware_reader"]] if "nvfwupd" in readers else []
        ctx = {
            "cluster": d.cluster.name, "set": vs.name, "name": name, "img": img, "art": _STEM,
            "base": base, "cuda_distro": release["cuda_repo"], "nv": nv, "pkgs": pkgs,
            "kernel_package": base["kernel_package"].format(kernel=img.kernel),
            "packages": [*base["base_packages"], *img.packages,
                         *(p for p in image_packages(image_services(d, name) or ()) if p not in base["tool_packages"])],
            "driver_hold": _pins_held(resolved, name) if "driver" in pkgs else [], "components": vs.components,
            "branch": vs.driver_branch, "groups": groups, "headers": headers,
            "cuda_repo": nv["cuda_repo_url"].format(distro=release["cuda_repo"], arch=cuda_arch(resolved, img)),
            "mkosi_arch": architectures()[img.architecture]["mkosi"],
            "cuda_package": nv["cuda_package"].format(major=major, minor=minor),
            "nv_tools": tools_nv, "set_pkgs": set_pkgs, "tools": list(base["tool_packages"]),
            "set_repos": sorted({line for ch in set_pkgs.values() if (line := repo_line(ch, img, vs.components))}),
            "executables": [probe.INSTALLED.lstrip("/"), SCRIPT]
            + ([nc[0].lstrip("/")] if (nc := _nodecheck(resolved, name)) else [])
            + [p.lstrip("/") for p in _configless(resolved, name) if p.endswith(".sh")],
            "operator_owned": operator_owns_driver(d, name),
            "private": private_files(resolved, name),
        }
        root = f"images/{name}/"
        ctx["services"] = image_services(d, name) or ()
        tree[root + "mkosi.conf"] = _env.get_template("mkosi.conf.j2").render(ctx)
        if not ctx["services"]:  # a service image has no NVIDIA stack, hence no NVIDIA repository or pin
            tree[root + "mkosi.conf.d/50-nvidia.conf"] = _env.get_template("50-nvidia.conf.j2").render(ctx)
            tree[root + "mkosi.skeleton/etc/apt/sources.list.d/clusterdef-nvidia.list"] = \
                _env.get_template("nvidia.list.j2").render(ctx)
            tree[root + "mkosi.skeleton/etc/apt/preferences.d/clusterdef-nvidia.pref"] = \
                _env.get_template("nvidia.pref.j2").render(ctx)
        tree[root + "mkosi.conf.d/60-set.conf"] = _env.get_template("60-set.conf.j2").render(ctx)
        tree[root + "mkosi.skeleton/etc/apt/sources.list.d/clusterdef-set.list"] = \
            _env.get_template("set.list.j2").render(ctx)
        tree[root + "mkosi.skeleton/etc/apt/preferences.d/clusterdef-set.pref"] = \
            _env.get_template("set.pref.j2").render(ctx)
        tree[root + "build.sh"] = _env.get_template("build.sh.j2").render(ctx)
        extra = root + EXTRA + "/"
        tree[extra + probe.INSTALLED.lstrip("/")] = probe.script()
        nodecheck = _nodecheck(resolved, name)
        if nodecheck is not None:
            tree[extra + nodecheck[0].lstrip("/")] = nodecheck[1]
        for path, text in _configless(resolved, name).items():
            tree[extra + path.lstrip("/")] = text
        ctx["probe_path"] = probe.INSTALLED
        tree[extra + SCRIPT] = _env.get_template("firstboot/firstboot-baseline.sh").render(ctx)
        tree[extra + f"etc/systemd/system/{UNIT}"] = _env.get_template("firstboot/unit.j2").render(ctx)
        tree[extra + "etc/systemd/system/multi-user.target.d/clusterdef-baseline.conf"] = \
            f"# Rendered by clusterdef: run the first-boot baseline on every boot of image {name}.\n" \
            f"[Unit]\nWants={UNIT}\n"
        if "driver" in pkgs and nvswitch_image(d, name):
            # Fabric Manager runs on every boot (FM user guide: `systemctl enable nvidia-fabricmanager`); a drop-in
            # rather than an enable symlink, which a text tree cannot carry
            for unit in nv["nvswitch_units"]:
                tree[extra + f"etc/systemd/system/multi-user.target.d/clusterdef-{unit}.conf"] = (
                    f"# Rendered by clusterdef: start {unit} on every boot of image {name} (NVSwitch nodes;\n"
                    f"# its package is pinned to driver {vs.components.driver} with the driver's).\n[Unit]\nWants={unit}\n")
        if "nvlink5" in pkgs:
            tree.update({extra + k: v for k, v in nvlsm_files(name).items()})
        for rel, text in node_access(resolved, name).items():
            tree[root + rel] = text
        for rel, text in group_files(resolved, name).items():
            tree[extra + rel] = text
        for rel, text in identity_files(resolved, name).items():
            tree[root + rel] = text
        if img.signing is not None:
            # sign.sh signs the build's SHA256SUMS and packs the verifier initrd (docs/provisioning.md)
            sctx = {**ctx, "signing": img.signing}
            tree[root + "sign.sh"] = _env.get_template("verify/sign.sh").render(sctx)
            tree[root + "verify/init"] = _env.get_template("verify/init.sh").render(sctx)
            tree[root + "verify/minisign.pub"] = (f"untrusted comment: clusterdef image signing key, cluster {d.cluster.name}"
                                                  f" image {name}\n{img.signing.public_key}\n")
        bdir = extra + BASELINE_DIR + "/"
        tree[bdir + "meta"] = _kv([("set", vs.name), ("image", _STEM),
                                   ("cuda_package", ctx["cuda_package"])])
        tree[bdir + "components"] = _kv(baseline_components(resolved, name))
        tree[bdir + "groups"] = _kv(sorted(groups.items()))
        tools: dict[str, str] = {}
        for hw in sorted(set(groups.values())):
            htype = d.hardware[hw]
            pinned = vs.firmware.get(htype.platform, {})
            tree[bdir + f"hardware/{hw}"] = _kv((c, pinned.get(c, "unpinned")) for c in htype.firmware)
            tools.update(probe.read_tools(htype.firmware))
            if htype.gpu and "gpu_vbios" in htype.firmware:
                tree[bdir + f"devices/{hw}"] = _kv([("gpu_vbios", htype.gpu.count)])
        tree[bdir + "tools"] = _kv(sorted(tools.items()))
    return tree


def baseline_components(resolved: Resolved, image_name: str) -> list[tuple[str, str]]:
    """(component, version) the first boot compares besides firmware: the NVIDIA stack the image
    carries, slurmd's release on Slurm images (kubelet is compared by node admission), and the
    DOCA-OFED and MFT the image carries (MFT's mlxfwmanager reads and flashes the HCAs)."""
    c = resolved.set.components
    want = carried(resolved, image_name)
    services = image_services(resolved.definition, image_name)
    if services is not None:  # a service host: only what it runs (slurmctld/slurmdbd, kubelet), never GPU facts
        versions = {"slurm": c.slurm, "kubelet": c.kubernetes.lstrip("v")}
        return [(k, versions[k]) for k in checked_components(services)] + \
            [(k, getattr(c, k)) for k in ("doca", "mft") if k in want and getattr(c, k)]
    out = [(k, getattr(c, k)) for k in NODE_COMPONENTS if k in want]
    if "slurm" in want:
        out.append(("slurm", c.slurm))
    out += [(k, getattr(c, k)) for k in ("doca", "mft") if k in want and getattr(c, k)]
    return out


def _configless(resolved: Resolved, image_name: str) -> dict[str, str]:
    """A Slurm image's slurmd options: fetch the configuration from the controllers (render/slurm/configless.py)."""
    from ..slurm import slurm_groups
    from ..slurm.configless import node_files

    if not any(g.image == image_name for g in slurm_groups(resolved).values()):
        return {}
    return node_files(resolved)


def _nodecheck(resolved: Resolved, image_name: str) -> tuple[str, str] | None:
    """(path, text) of the Slurm health check for a Slurm image: installed where slurm.conf's
    HealthCheckProgram points."""
    from ..slurm import nodecheck, slurm_groups

    d = resolved.definition
    if d.slurm is None or not d.slurm.health_check.enabled:
        return None
    if not any(g.image == image_name for g in slurm_groups(resolved).values()):
        return None
    return d.slurm.health_check.program, nodecheck(resolved)
