"""A stand-in GPU node for the probe, first-boot and nodecheck tests: executables named like the real
tools (nvidia-smi, nvfwupd, mlxfwmanager, ibstat, ipmitool, dmesg, dpkg-query, slurmd, kubelet, scontrol)
in a folder put first on PATH, printing the real tools' output shapes
(shared/reference/compat/firmware-tools.yaml; nvidia-smi --query-gpu CSV, `nvidia-smi nvlink --status`,
ibstat CA blocks, the NVRM Xid kernel log line) for a node described as data. scontrol records its calls.

`dgx_h100(vs)` is a DGX H100 on a validated set: 8 GPUs, 4 NVSwitches, 10 HCAs (8 ConnectX-7 for the
InfiniBand compute fabric, 2 BlueField-3 on Ethernet for storage)."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

TOOLS = ("nvidia-smi", "nvfwupd", "mlxfwmanager", "ibstat", "ipmitool", "dmesg", "dpkg-query", "slurmd",
         "kubelet", "scontrol")

_DISPATCH = r'''
import json, os, shlex, sys
STATE = os.environ.get("STANDIN_NODE") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "node.json")
node = json.load(open(STATE))
tool = os.path.basename(sys.argv[0])
args = sys.argv[1:]
with open(STATE + ".calls", "a") as fh:
    fh.write(shlex.join([tool] + args) + "\n")
if tool in node.get("missing", []):
    sys.exit(127)

def gpus():
    return node.get("gpus", [])

if tool == "nvidia-smi":
    q = next((a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")), None)
    r = next((a.split("=", 1)[1] for a in args if a.startswith("--query-remapped-rows=")), None)
    if q:
        for i, g in enumerate(gpus()):
            field = {"index": str(i), "pci.bus_id": g["bus"], "vbios_version": g["vbios"],
                     "driver_version": node["driver"], "ecc.errors.uncorrected.volatile.total": str(g.get("ecc", 0))}
            print(", ".join(field[f] for f in q.split(",")))
    elif r:
        for g in gpus():
            field = {"gpu_bus_id": g["bus"], "remapped_rows.pending": g.get("pending", "0"),
                     "remapped_rows.failure": g.get("failure", "0")}
            print(", ".join(field[f] for f in r.split(",")))
    elif args[:2] == ["nvlink", "--status"]:
        for i, g in enumerate(gpus()):
            print(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i:08x}-0000-0000-0000-000000000000)")
            for link in range(node.get("links_per_gpu", 18)):
                up = link < g.get("links_up", node.get("links_per_gpu", 18))
                print(f"\t Link {link}: " + ("26.562 GB/s" if up else "<inactive>"))
    else:
        print(f"NVIDIA-SMI {node['driver']}   Driver Version: {node['driver']}")
elif tool == "nvfwupd":
    if "show_version" not in args:
        sys.exit("nvfwupd stand-in: only show_version")
    print("System Model: DGXH100\nPart number: 965-24387-0002-001\nSerial number: 1664923000019\n"
          "Connection Status: Successful\n\nFirmware Devices:")
    print("{:<40} {:<30} {:<30} {:<10}".format("AP Name", "Sys Version", "Pkg Version", "Up-To-Date"))
    print("{:<40} {:<30} {:<30} {:<10}".format("-------", "-----------", "-----------", "----------"))
    for ap, v in node.get("redfish", {}).items():
        print("{:<40} {:<30} {:<30} {:<10}".format(ap, v, "N/A", "No"))
    print("-" * 120 + "\nError Code: 0")
elif tool == "mlxfwmanager":
    print("Querying Mellanox devices firmware ...\n")
    for i, h in enumerate(node.get("hcas", []), 1):
        dtype = {"MT4129": "ConnectX7", "MT41692": "BlueField3"}[h["type"]]
        print(f"Device #{i}:\n----------\n\n  Device Type:      {dtype}\n  Part Number:      {h.get('part', 'MCX75310AAS-NEA_Ax')}\n"
              f"  PSID:             MT_0000000838\n  PCI Device Name:  {h['pci']}\n  Base MAC:         605e65fd5b{i:02x}\n"
              f"  Versions:         Current        Available\n     FW             {h['fw']:<14} N/A\n"
              f"     PXE            3.7.0500       N/A\n     UEFI           14.37.0014     N/A\n\n"
              "  Status:           No matching image found\n")
elif tool == "ibstat":
    for h in node.get("hcas", []):
        print(f"CA '{h['ca']}'\n\tCA type: {h['type']}\n\tNumber of ports: {len(h['ports'])}\n"
              f"\tFirmware version: {h['fw']}\n\tHardware version: 0\n\tNode GUID: 0x946dae0300{h['ca'][-1]}a1b2c\n"
              f"\tSystem image GUID: 0x946dae0300a1b2c0")
        for p, port in enumerate(h["ports"], 1):
            state, rate, layer = port
            phys = "LinkUp" if state == "Active" else "Polling"
            print(f"\tPort {p}:\n\t\tState: {state}\n\t\tPhysical state: {phys}\n\t\tRate: {rate}\n\t\tBase lid: {p}\n"
                  f"\t\tLMC: 0\n\t\tSM lid: 1\n\t\tCapability mask: 0xa751e848\n\t\tPort GUID: 0x946dae0300a1b2c{p}\n"
                  f"\t\tLink layer: {layer}")
elif tool == "ipmitool":
    print(f"Device ID                 : 32\nDevice Revision           : 1\nFirmware Revision         : {node.get('ipmi_bmc', '')}\n"
          "IPMI Version              : 2.0\nManufacturer ID           : 5703\nManufacturer Name         : NVIDIA")
elif tool == "dmesg":
    print("[    0.000000] Linux version 6.8.0-60-generic (buildd@lcy02-amd64-001)")
    for line in node.get("kernel_log", []):
        print(line)
elif tool == "dpkg-query":
    pattern = args[-1]
    import fnmatch
    hits = [(p, v) for p, v in node.get("packages", {}).items() if fnmatch.fnmatch(p, pattern)]
    for p, v in hits:
        print(f"ii \t{p}\t{v}")
    sys.exit(0 if hits else 1)
elif tool == "slurmd":
    print("slurm " + node["slurm"])
elif tool == "kubelet":
    print("Kubernetes v" + node["kubelet"])
elif tool == "scontrol":
    if args[:2] == ["show", "hostnames"]:
        from ClusterShell.NodeSet import NodeSet
        print("\n".join(NodeSet(args[2])))
    elif args[:2] == ["show", "node"]:
        reason = node.get("slurm_reason", "")
        print(f"NodeName={args[2]} State={node.get('slurm_state', 'IDLE')}" + (f" Reason={reason}" if reason else ""))
    elif args and args[0] == "update":
        kv = dict(a.split("=", 1) for a in args[1:])
        node["slurm_state"] = "IDLE+DRAIN" if kv.get("State") == "DRAIN" else "IDLE"
        node["slurm_reason"] = kv.get("Reason", "")
        json.dump(node, open(STATE, "w"))
'''


def dgx_h100(vs, platform: str = "dgx-h100") -> dict:
    """A DGX H100 whose every device runs set `vs`."""
    fw = vs.firmware[platform]
    c = vs.components
    buses = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]
    gpus = [{"bus": f"00000000:{b}:00.0", "vbios": fw["gpu_vbios"], "ecc": 0, "pending": "0", "failure": "0"}
            for b in buses]
    hcas = [{"ca": f"mlx5_{i}", "type": "MT4129", "fw": fw["cx7"], "pci": f"/dev/mst/mt4129_pciconf{i}",
             "ports": [("Active", 400, "InfiniBand")]} for i in range(8)]
    hcas += [{"ca": f"mlx5_{8 + i}", "type": "MT41692", "fw": fw.get("bf3", "32.47.2682"),
              "pci": f"/dev/mst/mt41692_pciconf{i}", "ports": [("Active", 200, "Ethernet")] * 2} for i in range(2)]
    redfish = {"HostBMC_0": fw["bmc"], "HostBIOS_0": fw["sbios"], "HGX_FW_BMC_0": "HGX-22.10-1-rc80"}
    redfish.update({f"HGX_FW_GPU_SXM_{i + 1}": fw["gpu_vbios"] for i in range(8)})
    redfish.update({f"HGX_FW_NVSwitch_{i}": fw["nvswitch"] for i in range(4)})
    redfish.update({f"CX7_{i}": fw["cx7"] for i in range(8)})
    major, minor = c.cuda.split(".")[:2]
    return {
        "driver": c.driver, "gpus": gpus, "hcas": hcas, "redfish": redfish, "links_per_gpu": 18,
        "ipmi_bmc": fw["bmc"], "slurm": c.slurm, "kubelet": c.kubernetes,
        "packages": {f"cuda-libraries-{major}-{minor}": f"{c.cuda}-1", "libnccl2": f"{c.nccl}-1+cuda{major}.{minor}",
                     "nvidia-container-toolkit": f"{c.container_toolkit}-1",
                     **({"doca-ofed": f"{c.doca}"} if c.doca else {}), **({"mft": f"{c.mft}"} if c.mft else {})},
        "kernel_log": ["[   12.345678] nvidia-nvswitch: Probing device 0000:05:00.0, Vendor Id = 0x10de"],
    }


def install(folder: Path, node: dict) -> Path:
    """Write the stand-in tools into `folder` (node state in folder/node.json); returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "node.json").write_text(json.dumps(node))
    main = folder / "standin-tool"
    main.write_text(f"#!{sys.executable}\n" + _DISPATCH)
    main.chmod(0o755)
    for name in TOOLS:
        link = folder / name
        if link.exists() or link.is_symlink():
            link.unlink()
        link.symlink_to(main.name)
    return folder


def update(folder: Path, change) -> None:
    node = json.loads((folder / "node.json").read_text())
    change(node)
    (folder / "node.json").write_text(json.dumps(node))


def calls(folder: Path, tool: str) -> list[str]:
    path = folder / "node.json.calls"
    return [line for line in (path.read_text().splitlines() if path.exists() else []) if line.split(" ", 1)[0] == tool]


def variant(node: dict, change) -> dict:
    out = copy.deepcopy(node)
    change(out)
    return out
