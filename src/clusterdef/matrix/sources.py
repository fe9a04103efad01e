"""What an image must carry from the validated set, and which apt repository provides each piece
(compat/package-sources.yaml). Pure: the image renderer and the image-source-missing check share it."""

from __future__ import annotations

from dataclasses import dataclass

from .compat import Compat, ver
from .model import PackageSource, ValidatedSet

NVIDIA_STACK = ("driver", "cuda", "nccl", "container_toolkit")


def image_components(definition, image_name: str) -> dict[str, str]:
    """Set component -> why the image carries it, from the node groups that boot the image."""
    groups = [g for g in definition.nodes.values() if g.image == image_name]
    out = {c: "every image carries the set's NVIDIA stack" for c in NVIDIA_STACK}
    for g in groups:
        hw = definition.hardware.get(g.hardware)
        if g.control_plane == "slurm":
            out.setdefault("slurm", "a Slurm node group boots it (slurmd at the set's Slurm release)")
        else:
            out.setdefault("kubernetes", "a Kubernetes node group boots it (kubelet and kubeadm of the set's minor)")
        if hw is not None and (any(n.kind in ("infiniband", "roce") for n in hw.nics)
                               or {"cx7", "bf3"} & set(hw.firmware)):
            why = f"hardware `{g.hardware}` has ConnectX/BlueField HCAs"
            out.setdefault("doca", why + " (DOCA-OFED)")
            out.setdefault("mft", why + " (MFT: mlxfwmanager reads and flashes their firmware)")
    return out


def set_version(vs: ValidatedSet, component: str) -> str | None:
    return getattr(vs.components, component, None)


def _offers(src: PackageSource, component: str, version: str, distribution: str, release: str,
            arch: str = "amd64") -> bool:
    if component not in src.components:
        return False
    if src.architectures and arch not in src.architectures:
        return False
    carried = src.releases.get(distribution, {}).get(release)
    if carried is None:
        return False
    if src.kind == "distribution":
        return carried == version
    v = src.versions
    if v == "any":
        return True
    if isinstance(v, dict) and "from" in v:
        return ver(version) >= ver(str(v["from"]))
    if isinstance(v, (list, tuple)):
        return version in [str(x) for x in v]
    return False


@dataclass(frozen=True)
class Choice:
    component: str
    version: str
    source: PackageSource
    packages: tuple[str, ...]
    pin: str
    distro: str  # the repository's id of the release (vendor/site) or the archive's version
    arch: str = ""  # the repository's path for the image's architecture ({arch} in its URL)


def arch_path(compat: Compat, source_id: str, arch: str) -> str | None:
    """The path a source's repository uses for Debian architecture `arch` (None: it has none)."""
    src = next((s for s in compat.package_sources if s.id == source_id), None)
    if src is None:
        return None
    return src.architectures.get(arch) if src.architectures else arch


def choose(compat: Compat, vs: ValidatedSet, component: str, distribution: str, release: str,
           site: dict[str, str], arch: str = "amd64") -> Choice | None:
    """The source that provides the set's version of `component` for distribution/release: the image's
    declared site repositories first, then vendor and distribution sources in file order."""
    version = set_version(vs, component)
    if version is None:
        return None
    version = version.lstrip("v") if component == "kubernetes" else version
    ordered = [s for s in compat.package_sources if s.kind == "site" and s.id in site] + \
              [s for s in compat.package_sources if s.kind != "site"]
    for src in ordered:
        if _offers(src, component, version, distribution, release, arch):
            c = src.components[component]
            return Choice(component, version, src, tuple(c.packages), c.pin.format(version=version),
                          src.releases[distribution][release], src.architectures.get(arch, arch))
    return None


def explain(compat: Compat, component: str, distribution: str, release: str, site: dict[str, str],
            arch: str = "amd64") -> str:
    """What the known sources offer for a component on a release (for a finding's hint)."""
    parts = []
    for src in compat.package_sources:
        if component not in src.components:
            continue
        carried = src.releases.get(distribution, {}).get(release)
        if src.architectures and arch not in src.architectures:
            parts.append(f"{src.id} has no {arch} repository (it has {', '.join(sorted(src.architectures))})")
        elif carried is None:
            parts.append(f"{src.id} has no {distribution} {release} build")
        elif src.kind == "distribution":
            parts.append(f"{distribution} {release}'s archive carries {carried}")
        elif src.kind == "site" and src.id not in site:
            v = src.versions
            span = f"{v['from']} or later" if isinstance(v, dict) and "from" in v else str(v)
            parts.append(f"a site repository `{src.id}` (declare images.<name>.repositories.{src.id}: URL) "
                         f"would provide {span}")
        else:
            v = src.versions
            span = f"{v['from']} or later" if isinstance(v, dict) and "from" in v else str(v)
            parts.append(f"{src.id} provides {span}")
    return "; ".join(parts) or f"no source in matrices/compat/package-sources.yaml provides {component}"
