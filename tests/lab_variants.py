"""Variants of the lab definition that tests share.

`dedicated_kubernetes`: the lab's dedicated tenant `secure` also gets a Kubernetes node of its own
(group `secure-infer`, host ksgpu01 on leaf02, with HCA port GUIDs), a flavor on it (`secure-h100`)
and a queue (`secure-serve`), so its whole-node, partition-key and storage claims compile into the
Kubernetes objects too. The lab itself stays as it is: a ninth host there would change every
fabric, inventory, drift and rollout fixture built from it.

`driver_pool_canary`: the GPU Operator owns driver and toolkit, and a canary pool (group `canary`,
host kgpu03) runs the candidate set's driver through its own NVIDIADriver.

`vlan_roce`: the dedicated tenant `secure` isolated by VLAN 2101 instead of partition key, its nodes
(sgpu01-02) on a RoCE compute fabric `roce0` (MTU 9000, port ens1f0/ens1f1) and attached to a RoCE
storage fabric `stor0` (10.40.0.0/24, MTU 9000) through `storage_nic`: `ens2` (RoCE: the VLAN takes the
port) or `ibs` (the InfiniBand storage NIC: a VLAN is not put on it; then `stor0` is InfiniBand, IPoIB
MTU 2044). The lab's other Slurm groups stay on `ib0`, so validate warns `slurm-topology-fabrics`.

`roce_rails`: the lab's compute fabric ib0 switched to RoCE with rail addresses (tests/test_roce_hosts.py).

`roce_two_models`: RoCE rails and two GPU models together (issue 29 item 7): the lab on `roce_rails`, the
train nodes split into `train` (gpu001, gpu003: HGX H100) and `train-b200` (gpu002, gpu004: HGX B200), both in
partitions train and debug; the inference nodes into `infer` (kgpu01, H100) and `infer-b200` (kgpu02, B200),
a Kueue flavor per model; tenant vision's queue takes B200 first, then H100."""

from __future__ import annotations

import copy

SECURE_INFER_GUIDS = ";".join(f"0x0002c90300a3000{i}" for i in range(1, 9))


def dedicated_kubernetes(lab: dict) -> dict:
    d = copy.deepcopy(lab)
    d["nodes"]["secure-infer"] = {
        "hosts": "ksgpu01", "hardware": "hgx-h100", "image": "gpu-node", "control_plane": "kubernetes",
        "addressing": {"ipv4_start": "10.20.0.51", "mac": {
            "source": "list", "macs": ["52:54:00:20:00:51"], "port_guids": [SECURE_INFER_GUIDS]}},
        "placement": {"fabric": "ib0", "rack": "r03"}}
    d["network"]["fabrics"]["ib0"]["topology"]["switches"]["leaf02"]["nodes"] += ",ksgpu01"
    kq = d["kubernetes"]["kueue"]
    kq["flavors"]["secure-h100"] = {"node_groups": ["secure-infer"]}
    kq["queues"]["secure-serve"] = {"flavor": "secure-h100", "nominal_gpus": 8, "workload_class": "inference"}
    t = d["tenants"]["secure"]
    t["quota"] = {"reserved_gpus": 24, "burst_gpus": 0}  # its 3 nodes: 16 GPUs on Slurm, 8 on Kubernetes
    t["isolation"]["node_groups"] = [*t["isolation"]["node_groups"], "secure-infer"]
    t["kubernetes"] = {"namespace": "secure", "queues": ["secure-serve"], "groups": ["secure-eng"]}
    d["filesystems"]["scratch"]["node_groups"] = [*d["filesystems"]["scratch"]["node_groups"], "secure-infer"]
    return d


def driver_pool_canary(lab: dict) -> dict:
    d = copy.deepcopy(lab)
    d["cluster"]["allow_candidate"] = True
    # the operator owns driver and toolkit: the Kubernetes groups get an image without them
    d["kubernetes"]["gpu_operator"]["driver_owner"] = "operator"
    d["images"]["k8s-node"] = copy.deepcopy(d["images"]["gpu-node"])
    d["images"]["k8s-node"].pop("repositories")
    d["nodes"]["infer"]["image"] = "k8s-node"
    d["nodes"]["canary"] = {**copy.deepcopy(d["nodes"]["infer"]), "hosts": "kgpu03",
                            "addressing": {"ipv4_start": "10.20.0.33",
                                           "mac": {"source": "list", "macs": ["52:54:00:20:00:33"],
                                                   "port_guids": [";".join(f"0x0002c90300c3000{p}" for p in range(1, 9))]}}}
    d["network"]["fabrics"]["ib0"]["topology"]["switches"]["leaf02"]["nodes"] += ",kgpu03"
    d["kubernetes"]["gpu_operator"]["driver_pools"] = {
        "canary": {"node_groups": ["canary"], "matrix": "2026.11-r595-candidate"}}
    return d


def vlan_roce(lab: dict, storage_nic: str = "ens2") -> dict:
    d = copy.deepcopy(lab)
    hw = copy.deepcopy(d["hardware"]["hgx-h100"])
    hw["nics"] += [{"name": "ens1f", "kind": "roce", "speed_gbps": 400, "count": 2, "role": "compute"},
                   {"name": "ens2", "kind": "roce", "speed_gbps": 200, "role": "storage"},
                   {"name": "ibs", "kind": "infiniband", "speed_gbps": 400, "role": "storage"}]
    d["hardware"]["hgx-h100-roce"] = hw
    d["network"]["fabrics"]["ib0"]["topology"]["switches"]["leaf01"]["nodes"] = "gpu[001-002]"
    d["network"]["fabrics"]["ib0"]["topology"]["switches"]["leaf02"]["nodes"] = "gpu[003-004],kgpu[01-02]"
    d["network"]["fabrics"]["roce0"] = {"kind": "roce", "mtu": 9000, "topology": {
        "kind": "tree", "switches": {"roce-leaf01": {"nodes": "sgpu[01-02]"}}}}
    d["network"]["fabrics"]["stor0"] = {"kind": "roce" if storage_nic == "ens2" else "infiniband",
                                        "subnet": "10.40.0.0/24", "mtu": 9000 if storage_nic == "ens2" else 2044,
                                        "topology": {"kind": "tree", "switches": {"stor-leaf01": {"nodes": "sgpu[01-02]"}}}}
    g = d["nodes"]["secure"]
    g["hardware"] = "hgx-h100-roce"
    g["placement"] = {"fabric": "roce0", "rack": "r03"}
    g["attachments"] = {"compute": {"network": "roce0", "nic": "ens1f"},
                        "storage": {"network": "stor0", "nic": storage_nic, "ipv4_start": "10.40.0.41"}}
    t = d["tenants"]["secure"]
    t["isolation"].update(network="vlan", vlan=2101)
    return d


def without_governed_data(lab: dict) -> dict:
    """`lab` (edited in place, and returned) without its datasets, privileged-workload approvals, privileged
    partitions, the two filesystems only datasets use and its queue policy statements (which name partitions
    and queues): for variants that remove what those name (a node group, the Kubernetes section, the
    directory) and test something else. The statements' settings stay, written out as the statements set them."""
    lab.pop("datasets", None)
    policy = lab.get("service", {}).pop("queue_policy", {})
    parts = lab.get("slurm", {}).get("partitions", {})
    for st in policy.values():
        for p in st.get("partitions", ()):
            if p in parts and "max_job_hours" in st:
                parts[p]["max_time"] = str(round(st["max_job_hours"] * 60))
            qos = lab["slurm"]["qos"].get(parts.get(p, {}).get("qos") or "")
            if qos is not None and "max_gpus_per_user" in st:
                qos.setdefault("max_tres_per_user", {})["gres/gpu"] = st["max_gpus_per_user"]
    lab.pop("privileged", None)
    for p in lab["slurm"]["partitions"].values():
        p.pop("privileged", None)
    for fs in ("projects", "secure-data"):
        lab.get("filesystems", {}).pop(fs, None)
    return lab


def box(lab: dict, matrix: str) -> dict:
    """The lab's Slurm side as the box (tests/test_box_bringup.py) can carry it, on the site set `matrix` that
    pins the containers' Slurm release. Left out: the Kubernetes side (no API server in a container), the
    backup and the filesystems (restic, btrfs and the scratch mounts need what a container has not), the
    subnet manager (no HCA), and so the dedicated tenant's InfiniBand partition and project quota: `secure` keeps
    its partition and nodes but is shared. Passed through: the process tracking, task and accounting plugins that need no
    cgroups, and config_overrides (the containers have two CPUs, not the lab's 224). Off: the health check
    (nodecheck needs a GPU driver). The service hosts have 16 GiB, so MariaDB's buffer pool is Slurm's
    4 GiB floor. No directory: the tenants' groups are the containers' local groups."""
    d = copy.deepcopy(lab)
    d["cluster"]["matrix"] = matrix
    d.pop("kubernetes", None)
    d.pop("backup", None)
    d.pop("filesystems", None)
    without_governed_data(d)  # on the filesystems left out; its Kubernetes approval names a namespace the box has not
    d["nodes"] = {g: n for g, n in d["nodes"].items() if n["control_plane"] != "kubernetes"}
    d["nodes"]["mgmt"]["services"] = [s for s in d["nodes"]["mgmt"]["services"] if s != "subnet-manager"]
    for t in d["tenants"].values():
        t.pop("kubernetes", None)
        t.pop("storage", None)
        # a dedicated tenant needs a filesystem quota and an InfiniBand partition, which the box has not: the
        # tenant keeps its partition (AllowAccounts) and its own nodes, shared otherwise
        t["isolation"] = {"level": "shared"}
    gone = {h for g in lab["nodes"].values() if g["control_plane"] == "kubernetes" for h in [g["hosts"]]}
    for sw in d["network"]["fabrics"]["ib0"]["topology"]["switches"].values():
        if "nodes" in sw:
            sw["nodes"] = ",".join(p for p in sw["nodes"].split(",") if p not in gone)
    d["identity"].pop("oidc", None)
    d["identity"].pop("directory", None)  # no LDAP server in the box: the tenants' groups are local (box.users)
    d["secrets"]["refs"].pop("ldap_bind_password", None)
    d["upgrade"].pop("smoke_tests", None)
    # the service objectives name what is left out: the Kubernetes group's window and the backed-up data sets
    svc = d.get("service")
    if svc:
        svc.pop("recovery", None)
        for w in svc.get("maintenance_windows", {}).values():
            if "node_groups" in w:
                w["node_groups"] = [g for g in w["node_groups"] if g in d["nodes"]]
    # the service hosts' hardware as small as a container: MariaDB gets the floor of its buffer pool (4 GiB)
    d["hardware"]["mgmt-server"]["memory_gib"] = 16
    s = d["slurm"]
    s["health_check"] = {"enabled": False}
    s["passthrough"] = {"ProctrackType": "proctrack/linuxproc", "TaskPlugin": "task/none",
                        "JobAcctGatherType": "jobacct_gather/none", "SlurmdParameters": "config_overrides"}
    return d


def mixed_generations(lab: dict) -> dict:
    """Two GPU models in the lab's Slurm partitions: the train nodes split into `train` (gpu001, gpu003:
    H100) and `train-h200` (gpu002, gpu004: H200, hardware hgx-h200), each on both leaf switches, and the
    partitions over `train` over both groups."""
    d = copy.deepcopy(lab)
    hw = copy.deepcopy(d["hardware"]["hgx-h100"])
    hw["gpu"].update(model="H200-SXM-141GB", type="h200", memory_gib=141)
    hw["gpu"].pop("mig_profiles", None)
    d["hardware"]["hgx-h200"] = hw
    train = d["nodes"]["train"]
    h200 = copy.deepcopy(train)
    mac = train["addressing"]["mac"]
    for group, hosts, picks, start in ((train, "gpu[001,003]", (0, 2), "10.20.0.11"),
                                       (h200, "gpu[002,004]", (1, 3), "10.20.0.13")):
        group["hosts"] = hosts
        group["addressing"]["ipv4_start"] = start
        group["addressing"]["mac"] = {**mac, "macs": [mac["macs"][i] for i in picks],
                                      "port_guids": [mac["port_guids"][i] for i in picks]}
    h200["hardware"] = "hgx-h200"
    d["nodes"]["train-h200"] = h200
    for p in d["slurm"]["partitions"].values():
        if "train" in p["node_groups"]:
            p["node_groups"] = [*p["node_groups"], "train-h200"]
    for fs in d.get("filesystems", {}).values():
        if "train" in fs.get("node_groups", []):
            fs["node_groups"] = [*fs["node_groups"], "train-h200"]
    return d


def mixed_flavor(lab: dict) -> dict:
    """The Kueue flavor `h100` over two GPU models: the inference nodes split into `infer` (kgpu01, H100)
    and `infer-h200` (kgpu02, hardware hgx-h200), both in the flavor."""
    d = mixed_generations(lab)  # for its hardware hgx-h200
    infer = d["nodes"]["infer"]
    h200 = copy.deepcopy(infer)
    mac = infer["addressing"]["mac"]
    for i, (group, host, start) in enumerate(((infer, "kgpu01", "10.20.0.31"), (h200, "kgpu02", "10.20.0.32"))):
        group["hosts"] = host
        group["addressing"]["ipv4_start"] = start
        group["addressing"]["mac"] = {**mac, "macs": [mac["macs"][i]], "port_guids": [mac["port_guids"][i]]}
    h200["hardware"] = "hgx-h200"
    d["nodes"]["infer-h200"] = h200
    d["kubernetes"]["kueue"]["flavors"]["h100"]["node_groups"] = ["infer", "infer-h200"]
    lab_only = copy.deepcopy(lab)  # the Slurm side as in the lab: only the flavor mixes
    d["nodes"]["train"], d["slurm"] = lab_only["nodes"]["train"], lab_only["slurm"]
    del d["nodes"]["train-h200"]
    d["filesystems"] = lab_only["filesystems"]
    for fs in d["filesystems"].values():
        if "infer" in fs.get("node_groups", []):
            fs["node_groups"] = [*fs["node_groups"], "infer-h200"]
    return d


def fallback_flavors(lab: dict, when_can_borrow: str | None = None) -> dict:
    """A queue over two GPU models in order (Kueue flavor fungibility): the inference nodes split as in
    `mixed_flavor`, a flavor per model (`h200` on infer-h200, `h100` on infer); tenant vision's queue
    takes H200 first (4 GPUs) then H100 (4), nlp's queue H100 only (4)."""
    d = mixed_flavor(lab)
    kq = d["kubernetes"]["kueue"]
    kq["flavors"] = {"h200": {"node_groups": ["infer-h200"]}, "h100": {"node_groups": ["infer"]}}
    vision = kq["queues"]["vision-serve"]
    vision.update(flavor="h200", nominal_gpus=4, fallback_flavors=[{"flavor": "h100", "nominal_gpus": 4}])
    if when_can_borrow:
        vision["flavor_fungibility"] = {"when_can_borrow": when_can_borrow}
    kq["queues"]["nlp-serve"]["nominal_gpus"] = 4
    return d


def roce_rails(lab: dict, subnet: str = "10.50.0.0/16", start: str = "10.50.0.11") -> dict:
    """The lab with ib0 a RoCE fabric (MTU 9000) and its 8 compute ports RoCE ports ens0..ens7; the
    Slurm group `train` (gpu001-004) and the Kubernetes group `infer` (kgpu01-02) get rail addresses."""
    d = copy.deepcopy(lab)
    d["hardware"]["hgx-h100"]["nics"][1] = {"name": "ens", "kind": "roce", "speed_gbps": 400, "count": 8,
                                            "role": "compute"}
    d["network"]["fabrics"]["ib0"].update(kind="roce", subnet=subnet, mtu=9000)
    d["nodes"]["train"]["attachments"] = {"compute": {"network": "ib0", "nic": "ens", "ipv4_start": start}}
    d["nodes"]["infer"]["attachments"] = {"compute": {"network": "ib0", "nic": "ens", "ipv4_start": "10.50.0.31"}}
    return d


def _b200(lab_hw: dict) -> dict:
    hw = copy.deepcopy(lab_hw)
    hw["platform"] = "hgx-b200"
    hw["gpu"].update(model="B200-SXM-180GB", type="b200", memory_gib=180)
    hw["gpu"].pop("mig_profiles", None)
    hw["firmware"] = ["cx7"]  # the sets pin only cx7 for hgx-b200
    return hw


def _split(d: dict, group: str, new: str, hosts: tuple[str, str], picks: tuple[tuple[int, ...], tuple[int, ...]],
           starts: tuple[str, str], rails: tuple[str, str]) -> None:
    """Node group `group` split in two: its hosts[0] stay, hosts[1] go to group `new` on hardware hgx-b200;
    each with the MACs/GUIDs of its hosts (`picks`), its management and rail addresses (`starts`, `rails`)."""
    old = d["nodes"][group]
    twin = copy.deepcopy(old)
    mac = old["addressing"]["mac"]
    for g, h, pick, start, rail in ((old, hosts[0], picks[0], starts[0], rails[0]),
                                    (twin, hosts[1], picks[1], starts[1], rails[1])):
        g["hosts"] = h
        g["addressing"]["ipv4_start"] = start
        g["addressing"]["mac"] = {**mac, "macs": [mac["macs"][i] for i in pick],
                                  "port_guids": [mac["port_guids"][i] for i in pick]}
        g["attachments"]["compute"]["ipv4_start"] = rail
    twin["hardware"] = "hgx-b200"
    d["nodes"][new] = twin


def roce_two_models(lab: dict) -> dict:
    d = roce_rails(lab)
    d["hardware"]["hgx-b200"] = _b200(d["hardware"]["hgx-h100"])
    _split(d, "train", "train-b200", ("gpu[001,003]", "gpu[002,004]"), ((0, 2), (1, 3)),
           ("10.20.0.11", "10.20.0.13"), ("10.50.0.11", "10.50.0.13"))
    _split(d, "infer", "infer-b200", ("kgpu01", "kgpu02"), ((0,), (1,)), ("10.20.0.31", "10.20.0.32"),
           ("10.50.0.31", "10.50.0.32"))
    for p in d["slurm"]["partitions"].values():
        if "train" in p["node_groups"]:
            p["node_groups"] = [*p["node_groups"], "train-b200"]
    for fs in d.get("filesystems", {}).values():
        for g, new in (("train", "train-b200"), ("infer", "infer-b200")):
            if g in fs.get("node_groups", []):
                fs["node_groups"] = [*fs["node_groups"], new]
    kq = d["kubernetes"]["kueue"]
    kq["flavors"] = {"b200": {"node_groups": ["infer-b200"]}, "h100": {"node_groups": ["infer"]}}
    kq["queues"]["vision-serve"].update(flavor="b200", nominal_gpus=4,
                                        fallback_flavors=[{"flavor": "h100", "nominal_gpus": 4}])
    kq["queues"]["nlp-serve"]["nominal_gpus"] = 4
    return d
