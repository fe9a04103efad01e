"""What a node image is built from and which layers it carries, known to both the image
renderer and the checks: the base recipes per distribution (image_bases.yaml), NVIDIA's
package names and pins (nvidia_packages.yaml), and which set components an image carries
once the GPU Operator and the Network Operator own theirs (one owner per layer)."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from ..source import safe_yaml

from ..matrix import sources
from .platforms import has_nvswitch, needs_nvlsm
from .services import image_services, table as service_table

DOCA_HOST_PACKAGE = "doca-ofed"  # the host package of DOCA-OFED (an image without the operator's driver container)


@cache
def _data(name: str) -> dict:
    return safe_yaml().load(files(__package__).joinpath(name).read_text(encoding="utf-8"))


def bases() -> dict:
    """distribution -> base recipe (repositories, kernel package, releases)."""
    return _data("image_bases.yaml")


def nvidia() -> dict:
    """NVIDIA package names per layer and how to pin them."""
    return _data("nvidia_packages.yaml")


def fabric_components(hardware) -> list[str]:
    """Fabric Manager and NSCQ (their R580+ names; `-<branch>` before) for a node type with NVSwitches
    (platforms.has_nvswitch: what the hardware is, not which firmware the set pins), none otherwise:
    they must match the driver exactly (nvidia_packages.yaml, the Fabric Manager user guide)."""
    return list(nvidia()["nvswitch_r580"]) if has_nvswitch(hardware) else []


def nvlink5_components(hardware) -> list[str]:
    """NVLSM and the InfiniBand diagnostics for a node type with fourth-generation NVSwitches of its own
    (platforms.needs_nvlsm: HGX/DGX B200, B300), none otherwise; versioned apart from the driver, unpinned
    (nvidia_packages.yaml nvlink5_packages)."""
    return list(nvidia()["nvlink5_packages"]) if needs_nvlsm(hardware) else []


def branch_names(names, branch: int) -> list[str]:
    """NVIDIA's package names for a driver branch: unversioned from R580, `<name>-<branch>` before."""
    return list(names) if branch >= 580 else [f"{p}-{branch}" for p in names]


def operator_owns_driver(definition, image_name: str) -> bool:
    """The GPU Operator installs driver and toolkit on this image's nodes: every group booting it is a
    Kubernetes GPU group and kubernetes.gpu_operator.driver_owner is `operator`. The image then carries
    neither (one owner per layer; checks_images.py refuses an image that would need both)."""
    k = definition.kubernetes
    groups = [g for g in definition.nodes.values() if g.image == image_name]
    return bool(k is not None and k.gpu_operator.driver_owner == "operator" and groups and all(
        g.control_plane == "kubernetes" and definition.hardware[g.hardware].gpu for g in groups
        if g.hardware in definition.hardware))


def operator_owns_mofed(definition, image_name: str) -> bool:
    """The Network Operator's DOCA driver container (network_operator.ofed_driver) provides MOFED on this
    image's nodes: every group booting it is a Kubernetes group. The image then carries no DOCA-OFED."""
    k = definition.kubernetes
    groups = [g for g in definition.nodes.values() if g.image == image_name]
    return bool(k is not None and k.network_operator.enabled and k.network_operator.ofed_driver is not None
                and groups and all(g.control_plane == "kubernetes" for g in groups))


def service_components(services) -> dict[str, str]:
    """Set component -> why a service image (docs/services.md) carries it: the Slurm or Kubernetes release its
    daemons run, DOCA-OFED and MFT where OpenSM runs; never the NVIDIA stack."""
    t = service_table()
    out: dict[str, str] = {}
    for s in services:
        if t[s].get("component"):
            out.setdefault(t[s]["component"], f"service {s} runs the set's {t[s]['component'].capitalize()} release")
        if t[s].get("mofed"):
            out.setdefault("doca", f"service {s}: OpenSM drives the host's HCA (DOCA-OFED)")
            out.setdefault("mft", f"service {s}: MFT reads and flashes the HCA's firmware")
    return out


def carried_by(definition, image_name: str) -> dict[str, str]:
    """Set component -> why the image carries it (the operators' layers left out where they own them; a
    service image carries only what its services need)."""
    services = image_services(definition, image_name)
    if services is not None:
        return service_components(services)
    want = sources.image_components(definition, image_name)
    if operator_owns_driver(definition, image_name):
        want.pop("driver", None)
        want.pop("container_toolkit", None)
    if operator_owns_mofed(definition, image_name):
        want.pop("doca", None)
    return want
