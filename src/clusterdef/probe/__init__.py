"""The node probe: one POSIX sh script (`clusterdef-probe`, package data) that every node-side check
calls: the image's first-boot baseline, the Slurm health check (nodecheck), the gpu_facts collector
(drift) and node admission (which reads gpu_facts). It reads every device (all GPUs, all HCAs, all
NVSwitches) and prints "unknown" with a reason for what it cannot read; callers fail closed on it.

Which tool reads each firmware component comes from `read_tools()`, used by the image renderer and
the Ansible renderer alike, so the first boot and the roles ask the same tool.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

NAME = "clusterdef-probe"
# Where the image and the gpu_facts role install it (nodecheck and the collector call it there).
INSTALLED = "/usr/lib/clusterdef/probe"

# Reading tool per firmware component (compat/firmware-tools.yaml): the BMC's Redfish inventory through
# nvfwupd for the baseboard and GPU-tray firmware it lists (its Sys Version strings are what the sets pin),
# nvidia-smi in-band for every GPU's VBIOS, MFT's mlxfwmanager for ConnectX/BlueField, sysfs for NVMe.
READ_TOOLS = {"bmc": "nvfwupd", "sbios": "nvfwupd", "gpu_vbios": "nvidia-smi", "nvswitch": "nvfwupd",
              "cx7": "mlxfwmanager", "bf3": "mlxfwmanager", "cpld": "nvfwupd", "psu": "nvfwupd", "nvme": "sysfs"}


@cache
def script() -> str:
    return files(__package__).joinpath(NAME).read_text(encoding="utf-8")


def read_tools(firmware) -> dict[str, str]:
    """component -> the tool the probe reads it with, for a hardware type's firmware components."""
    return {c: READ_TOOLS[c] for c in firmware}


def args(firmware) -> list[str]:
    """clusterdef-probe arguments for a hardware type's firmware components (component=tool)."""
    return [f"{c}={t}" for c, t in read_tools(firmware).items()]
