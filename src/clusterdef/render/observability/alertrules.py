"""The alert rules, derived from the definition: each alert carries its own synthetic input so the
tests can prove with `promtool test rules` that it fires on a sustained condition and stays silent
on a transient blip of the same size.

Thresholds come from the hardware model (GPU count, NIC speeds), the GPU model's limits
(knowledge/gpu_limits.yaml), the validated set (runbooks name it) and `observability`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from ...knowledge.gpu_limits import limits_for
from ...quoting import UnsafeValue, prom_label
from ...resolve import Resolved

HERE = Path(__file__).parent
KUEUE_NAMESPACE = "kueue-system"
DCGM_ID = ("hardware", "node_group", "Hostname", "gpu")
XID_RECORD = "clusterdef:dcgm_xid_errors:last"


def q(value) -> str:
    """A PromQL string literal (values are typed names; escaped anyway)."""
    return '"' + prom_label(value) + '"'


def dur(minutes: int) -> str:
    return f"{minutes}m" if minutes % 60 else f"{minutes // 60}h"


@dataclass(frozen=True)
class Series:
    """One synthetic input series: `good` and `bad` per-sample values. kind `gauge`: bad from the
    onset on (sustained) or for one sample (blip); `counter`: rising by `bad` each sample (sustained)
    or one step of `bad` then flat (blip); `vanish`: present, then stale for good (sustained) or for
    one sample (blip); `static`: `good` throughout, in both cases."""
    selector: str
    kind: str
    good: float = 0
    bad: float = 1


@dataclass(frozen=True)
class Alert:
    name: str
    group: str          # rule group: gpu, fabric, node, slurm, kueue
    expr: str
    for_minutes: int
    window_minutes: int  # the longest range in expr (0 when none)
    severity: str        # critical (pages), warning (ticket), info
    summary: str
    runbook: str         # the action: drain, rollback to the set, open a ticket
    labels: dict = field(default_factory=dict)
    inputs: tuple[Series, ...] = ()
    out_labels: dict = field(default_factory=dict)  # labels the alert carries on the synthetic input

    def rule(self) -> dict:
        return {"alert": self.name, "expr": self.expr, "for": dur(self.for_minutes),
                "labels": {"severity": self.severity, **self.labels},
                "annotations": self.annotations()}

    def annotations(self) -> dict:
        for text in (self.summary, self.runbook):
            if "{{" in text or "}}" in text:  # Prometheus expands annotations as Go templates
                raise UnsafeValue(f"{text[:60]!r}: alert annotations cannot carry '{{{{' or '}}}}'")
        return {"summary": self.summary, "runbook": self.runbook}


@lru_cache(maxsize=1)
def xid_classes() -> dict[str, tuple[int, ...]]:
    """The catalogue's Xids by what they ask of the node, as the health check judges them (knowledge/xid.py,
    xid_nodecheck.csv): informational (IGNORE), application (kept in service: RESTART_APP and Xid 45, the
    driver's cleanup after an ended job) and fatal (everything that drains)."""
    from ...knowledge.xid import catalogue

    out: dict[str, list[int]] = {"fatal": [], "application": [], "informational": []}
    for x in catalogue().values():
        if x.category.strip() == "Unused":
            continue
        cls = "informational" if x.action == "IGNORE" else "fatal" if x.drains else "application"
        out[cls].append(x.code)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def _sel(metric: str, **labels) -> str:
    inner = ",".join(f"{k}={q(v)}" for k, v in labels.items())
    return f"{metric}{{{inner}}}"


def _gpu_alerts(resolved: Resolved) -> list[Alert]:
    d = resolved.definition
    obs = d.observability
    vs = resolved.set.name
    out: list[Alert] = []
    for hname, hw in d.hardware.items():
        if hw.gpu is None or not any(g.hardware == hname for g in d.nodes.values()):
            continue
        group = next(n for n, g in d.nodes.items() if g.hardware == hname)
        ids = {"hardware": hname, "node_group": group, "Hostname": "node-a", "gpu": "0"}
        dsel = lambda m, ids=ids, **kw: _sel(m, **{**ids, **kw})  # noqa: E731
        hw_sel = lambda m, hname=hname: _sel(m, hardware=hname)  # noqa: E731
        lim = limits_for(hw.gpu.model)
        over = obs.hardware.get(hname)
        drain = ("drain the node (scontrol update nodename=<node> state=drain / kubectl cordon and drain), "
                 "then open a hardware ticket with the GPU serial")
        for cls, sev, minutes, action in (
                ("fatal", "critical", 1, drain + "; reset or replace the GPU before returning it to service"),
                ("application", "warning", 5, "open a ticket to the job's owner: the application faulted "
                                              "(XID in the RESTART_APP bucket) or was ended (Xid 45, the driver's "
                                              "cleanup after scancel, a time limit or preemption); the node stays "
                                              "in service"),
                ("informational", "info", 15, "no action on the node; record it in the node's ticket history")):
            codes = xid_classes()[cls]
            out.append(Alert(
                f"GpuXid{cls.capitalize()}", "gpu",
                f'{_sel(XID_RECORD, hardware=hname)[:-1]},xid=~"{"|".join(map(str, codes))}"}}',
                minutes, 0, sev, f"{cls} XID on a {hname} GPU ({hw.gpu.model})", action,
                inputs=(Series(dsel("DCGM_FI_DEV_XID_ERRORS"), "gauge", 0, codes[0]),),
                out_labels={**ids, "xid": str(codes[0])}))
        out.append(Alert(
            "GpuEccUncorrectable", "gpu", f"{hw_sel('DCGM_FI_DEV_ECC_DBE_VOL_TOTAL')} > 0", 5, 0, "critical",
            f"uncorrectable (double-bit) ECC errors on a {hname} GPU", drain,
            inputs=(Series(dsel("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"), "gauge", 0, 1),), out_labels=ids))
        out.append(Alert(
            "GpuRowRemapFailure", "gpu", f"{hw_sel('DCGM_FI_DEV_ROW_REMAP_FAILURE')} > 0", 5, 0, "critical",
            f"HBM row remapping failed on a {hname} GPU: the GPU has no spare rows left",
            drain + " (RMA: a failed row remap does not heal)",
            inputs=(Series(dsel("DCGM_FI_DEV_ROW_REMAP_FAILURE"), "gauge", 0, 1),), out_labels=ids))
        out.append(Alert(
            "GpuRowRemapPending", "gpu", f"{hw_sel('DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS')} > 0", 30, 0,
            "warning", f"rows remapped for uncorrectable errors on a {hname} GPU take effect at the next GPU reset",
            "drain the node when its jobs end and reset the GPU (nvidia-smi -r) so the remap takes effect; "
            "open a ticket if the count keeps rising",
            inputs=(Series(dsel("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"), "gauge", 0, 1),), out_labels=ids))
        # A threshold from the definition's override, else from the model's limits; no alert without either.
        temp = (over.temperature_c if over else None) or \
            (lim.max_operating_c - obs.gpu_temperature_margin_c if lim is not None and lim.max_operating_c is not None else None)
        if temp is not None:
            out.append(Alert(
                "GpuTemperatureHigh", "gpu", f"{hw_sel('DCGM_FI_DEV_GPU_TEMP')} > {temp}", 10, 0, "warning",
                f"{hname} GPU above {temp} C for 10 minutes"
                + (f" ({hw.gpu.model} max operating {lim.max_operating_c} C)" if lim and lim.max_operating_c else ""),
                "check the rack's cooling and the node's fans (ipmitool sdr); drain the node if it stays hot",
                inputs=(Series(dsel("DCGM_FI_DEV_GPU_TEMP"), "gauge", temp - 20, temp + 1),), out_labels=ids))
        power = (over.power_w if over else None) or \
            (lim.tdp_w * obs.gpu_power_percent_of_tdp // 100 if lim is not None and lim.tdp_w is not None else None)
        if power is not None:
            out.append(Alert(
                "GpuPowerHigh", "gpu", f"{hw_sel('DCGM_FI_DEV_POWER_USAGE')} > {power}", 15, 0, "warning",
                f"{hname} GPU drawing above {power} W for 15 minutes"
                + (f" ({hw.gpu.model} TDP {lim.tdp_w} W)" if lim and lim.tdp_w else ""),
                "check the power limit (nvidia-smi -q -d POWER) against the validated set "
                f"{vs}'s firmware; open a ticket",
                inputs=(Series(dsel("DCGM_FI_DEV_POWER_USAGE"), "gauge", power // 2, power + 10),), out_labels=ids))
        links = f"{lim.nvlink_links} NVLink links per GPU" if lim and lim.nvlink_links else "every NVLink link"
        out.append(Alert(
            "GpuNvlinkErrors", "gpu", f"increase({hw_sel('DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL')}[10m]) > 0",
            20, 10, "warning", f"NVLink CRC data errors rising on a {hname} GPU for 20 minutes",
            f"open a ticket; run nvidia-smi nvlink -e and expect {links}; drain if errors keep rising",
            inputs=(Series(dsel("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL"), "counter", 0, 5),), out_labels=ids))
        out.append(Alert(
            "GpuNvlinkLinkDown", "gpu",
            f"increase({hw_sel('DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL')}[10m]) > 0", 20, 10, "critical",
            f"NVLink links failing recovery on a {hname} GPU (links going down)",
            f"{drain}; nvidia-smi nvlink -s must show {links} up"
            + (f" ({lim.nvlink_links} on {hw.gpu.model})" if lim and lim.nvlink_links else ""),
            inputs=(Series(dsel("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"), "counter", 0, 1),), out_labels=ids))
        n = hw.gpu.count
        node_ids = {k: ids[k] for k in ("hardware", "node_group", "Hostname")}
        out.append(Alert(
            "GpuMissing", "gpu",
            f"count by (hardware, node_group, Hostname) ({hw_sel('DCGM_FI_DEV_GPU_TEMP')}) < {n}", 10, 0, "critical",
            f"a {hname} node reports fewer than its {n} GPUs",
            drain + f"; a {hname} node must show {n} GPUs in nvidia-smi -L",
            inputs=tuple(Series(dsel("DCGM_FI_DEV_GPU_TEMP", gpu=str(i)), "vanish" if i == 0 else "static", 40)
                         for i in range(n)),
            out_labels=node_ids))
    return out


def _fabric_alerts(resolved: Resolved) -> list[Alert]:
    """Per hardware type: the InfiniBand rules for its InfiniBand NICs (node_exporter's infiniband
    collector; runbooks name ibstat and the subnet manager), the RoCE rules for its RoCE NICs
    (node_exporter's netclass collector on the RoCE interfaces by name: no subnet manager)."""
    d = resolved.definition
    out: list[Alert] = []
    for hname, hw in d.hardware.items():
        if not any(g.hardware == hname for g in d.nodes.values()):
            continue
        group = next(n for n, g in d.nodes.items() if g.hardware == hname)
        ib = [n for n in hw.nics if n.kind == "infiniband"]
        roce = [n for n in hw.nics if n.kind == "roce"]
        if ib:
            out += _ib_alerts(resolved, hname, group, ib)
        if roce:
            out += _roce_alerts(hname, group, roce)
    return out


FABRIC_DRAIN = "drain the node and open a fabric ticket (reseat or replace the cable/transceiver)"


def _ib_alerts(resolved: Resolved, hname: str, group: str, ib: list) -> list[Alert]:
    obs = resolved.definition.observability
    out: list[Alert] = []
    ids = {"hardware": hname, "node_group": group, "instance": "node-a:9100", "device": "mlx5_0", "port": "1"}
    nsel = lambda m, ids=ids, **kw: _sel(m, **{**ids, **kw})  # noqa: E731
    hw_sel = lambda m, hname=hname: _sel(m, hardware=hname)  # noqa: E731
    ports = sum(n.count for n in ib)
    drain = FABRIC_DRAIN
    out.append(Alert(
        "IbPortDown", "fabric", f"{hw_sel('node_infiniband_state_id')} != 4", 5, 0, "critical",
        f"an InfiniBand port of a {hname} node is not ACTIVE ({ports} expected active)",
        drain + "; check ibstat and the subnet manager log",
        inputs=(Series(nsel("node_infiniband_state_id"), "gauge", 4, 1),), out_labels=ids))
    node_ids = {k: ids[k] for k in ("hardware", "node_group", "instance")}
    for speed in sorted({n.speed_gbps for n in ib}):
        want = sum(n.count for n in ib if n.speed_gbps >= speed)
        rate = speed * 1_000_000_000 // 8
        inputs = tuple(Series(nsel("node_infiniband_rate_bytes_per_second", device=f"mlx5_{i}"),
                              "gauge" if i == 0 else "static", rate, rate // 2) for i in range(want))
        out.append(Alert(
            "IbPortBelowRatedSpeed", "fabric",
            f"count by (hardware, node_group, instance) ({hw_sel('node_infiniband_rate_bytes_per_second')} "
            f">= {rate}) < {want}", 10, 0, "warning",
            f"fewer than {want} InfiniBand ports of a {hname} node at their rated {speed} Gb/s (speed or width "
            "degraded)",
            drain + f"; ibstat must show Rate {speed} on {want} ports",
            labels={"rated_gbps": str(speed)}, inputs=inputs, out_labels={**node_ids, "rated_gbps": str(speed)}))
    for name, metric, sev, what, step in (
            ("IbSymbolErrors", "node_infiniband_symbol_error_total", "warning", "symbol errors", 10),
            ("IbLinkDowned", "node_infiniband_link_downed_total", "critical", "link-downed events", 1),
            ("IbPortReceiveErrors", "node_infiniband_port_errors_received_total", "warning", "receive errors", 10)):
        out.append(Alert(
            name, "fabric", f"increase({hw_sel(metric)}[10m]) > 0", 20, 10, sev,
            f"{what} rising on an InfiniBand port of a {hname} node for 20 minutes",
            drain if sev == "critical" else "open a fabric ticket; drain the node if the counter keeps rising",
            inputs=(Series(nsel(metric), "counter", 0, step),), out_labels=ids))
    wait = obs.fabric_transmit_wait_per_s
    out.append(Alert(
        "IbPortCongested", "fabric", f"rate({hw_sel('node_infiniband_port_transmit_wait_total')}[5m]) > {wait}",
        15, 5, "warning",
        f"a {hname} port waits to transmit more than {wait} ticks/s for 15 minutes (pause storm / congestion)",
        "open a fabric ticket: find the congested switch port (ibqueryerrors) and the job flooding it",
        inputs=(Series(nsel("node_infiniband_port_transmit_wait_total"), "counter", 0, wait * 240),),
        out_labels=ids))
    return out


def _device_regex(names: list[str]) -> str:
    """An RE2 alternation of interface names (letters, digits, `_ . -`: the dot escaped; q() then
    escapes the backslash for the PromQL string)."""
    return "|".join(n.replace(".", "\\.") for n in names)


def _roce_alerts(hname: str, group: str, roce: list) -> list[Alert]:
    """node_exporter's netclass collector (collector/netclass_linux.go): node_network_up{device} is 1
    when operstate is `up`; node_network_speed_bytes{device} is the sysfs speed (Mb/s) x 10^6 / 8, and
    -125000 while a link is down (speed -1; dropped with --collector.netclass.ignore-invalid-speed);
    node_network_carrier_changes_total{device} counts carrier transitions. The interfaces are the
    hardware's RoCE NICs by name (tenancy.nic_ports), so no other port of the node counts; an
    interface that is gone has no series, which RocePortMissing counts (`or ... * 0`: a node whose
    RoCE interfaces are all gone still counts 0 while node_exporter reports any interface)."""
    from ...tenancy import nic_ports

    out: list[Alert] = []
    ifaces = [i for n in roce for i in nic_ports(n)]
    ids = {"hardware": hname, "node_group": group, "instance": "node-a:9100", "device": ifaces[0]}
    nsel = lambda m, ids=ids, **kw: _sel(m, **{**ids, **kw})  # noqa: E731

    def dsel(metric: str, names: list[str]) -> str:
        return f"{_sel(metric, hardware=hname)[:-1]},device=~{q(_device_regex(names))}}}"

    out.append(Alert(
        "RocePortDown", "fabric", f"{dsel('node_network_up', ifaces)} == 0", 5, 0, "critical",
        f"a RoCE interface of a {hname} node is not up ({len(ifaces)} expected up: {', '.join(ifaces)})",
        FABRIC_DRAIN + "; on the node, `ip link show` and `ethtool` the interface; on its leaf, the switch "
        "port (clusterdef fabric check --lldp shows which leaf and port it is cabled to)",
        inputs=(Series(nsel("node_network_up"), "gauge", 1, 0),), out_labels=ids))
    node_ids = {k: ids[k] for k in ("hardware", "node_group", "instance")}
    by = "count by (hardware, node_group, instance)"
    out.append(Alert(
        "RocePortMissing", "fabric",
        f"({by} ({dsel('node_network_up', ifaces)}) or {by} ({_sel('node_network_up', hardware=hname)}) * 0) "
        f"< {len(ifaces)}", 10, 0, "critical",
        f"a {hname} node shows fewer than its {len(ifaces)} RoCE interfaces ({', '.join(ifaces)})",
        FABRIC_DRAIN + "; `ip link` on the node must list every one of them (a NIC gone from the bus, a "
        "driver that did not load, or an interface renamed)",
        inputs=tuple(Series(nsel("node_network_up", device=name), "vanish" if k == 0 else "static", 1)
                     for k, name in enumerate(ifaces)), out_labels=node_ids))
    for speed in sorted({n.speed_gbps for n in roce}):
        names = [i for n in roce if n.speed_gbps == speed for i in nic_ports(n)]
        rate = speed * 1_000_000_000 // 8
        out.append(Alert(
            "RocePortBelowRatedSpeed", "fabric", f"{dsel('node_network_speed_bytes', names)} < {rate}", 10, 0,
            "warning", f"a RoCE interface of a {hname} node below its rated {speed} Gb/s (or its link down)",
            FABRIC_DRAIN + f"; ethtool must show Speed: {speed * 1000}Mb/s on {', '.join(names)}",
            labels={"rated_gbps": str(speed)},
            inputs=(Series(nsel("node_network_speed_bytes", device=names[0]), "gauge", rate, rate // 2),),
            out_labels={**ids, "device": names[0], "rated_gbps": str(speed)}))
    out.append(Alert(
        "RoceLinkFlapping", "fabric", f"increase({dsel('node_network_carrier_changes_total', ifaces)}[10m]) > 0",
        20, 10, "critical", f"carrier changes on a RoCE interface of a {hname} node for 20 minutes (the link "
        "keeps going down)", FABRIC_DRAIN + "; the leaf's port counters show the flaps too",
        inputs=(Series(nsel("node_network_carrier_changes_total"), "counter", 0, 2),), out_labels=ids))
    return out


def _node_alerts(resolved: Resolved) -> list[Alert]:
    d = resolved.definition
    obs = d.observability
    vs = resolved.set.name
    out: list[Alert] = []
    off = {"instance": "node-a:9100", "node": "node-a", "group": "g", "component": "driver",
           "expected": "1", "actual": "2"}
    out.append(Alert(
        "NodeOffMatrix", "node", "clusterdef_node_off_matrix > 0", 15, 0, "warning",
        f"a node runs a component off the validated set {vs}",
        f"drain the node (clusterdef drift --drain), run playbooks/enforce-baseline.yml to return it to the "
        f"set {vs}; if the set itself is bad, roll back to the set named in upgrade.rollback",
        inputs=(Series(_sel("clusterdef_node_off_matrix", **off), "gauge", 0, 1),), out_labels=off))
    fs = {"instance": "node-a:9100", "device": "/dev/nvme0n1p1", "mountpoint": "/", "fstype": "ext4"}
    keep = 'fstype!~"tmpfs|overlay|squashfs|nsfs|ramfs"'
    pct = obs.filesystem_free_percent
    out.append(Alert(
        "NodeFilesystemFull", "node",
        f"100 * node_filesystem_avail_bytes{{{keep}}} / node_filesystem_size_bytes{{{keep}}} < {pct} "
        f"and node_filesystem_readonly{{{keep}}} == 0", 15, 0, "warning",
        f"a filesystem has less than {pct}% free for 15 minutes",
        "open a ticket; clean up or grow the filesystem (scratch: check the tenants' expiry)",
        inputs=(Series(_sel("node_filesystem_avail_bytes", **fs), "gauge", 100, 0),
                Series(_sel("node_filesystem_size_bytes", **fs), "static", 100),
                Series(_sel("node_filesystem_readonly", **fs), "static", 0)),
        out_labels=fs))
    return out


def _slurm_alerts(resolved: Resolved) -> list[Alert]:
    d = resolved.definition
    s = d.slurm
    if s is None:
        return []
    obs = d.observability
    wait = obs.queue_wait_minutes
    vs = resolved.set.name
    out: list[Alert] = []
    unit = {"instance": "ctl:9100", "name": "slurmctld.service", "state": "active"}
    out.append(Alert(
        "SlurmctldDown", "slurm", 'node_systemd_unit_state{name="slurmctld.service",state="active"} == 0', 5, 0,
        "critical", f"slurmctld is not active on a controller ({', '.join(s.controllers)})",
        "restart slurmctld (systemctl restart slurmctld) and read its log; if it fails after a change, roll back "
        f"to the validated set {vs}",
        inputs=(Series(_sel("node_systemd_unit_state", **unit), "gauge", 1, 0),), out_labels=unit))
    exp = {"instance": "ctl:9092"}
    out.append(Alert(
        "SlurmctldUnreachable", "slurm", "increase(slurm_node_scrape_error[5m]) > 0", 10, 5, "critical",
        "the Slurm exporter cannot query slurmctld (sinfo failing) for 10 minutes",
        "check slurmctld (scontrol ping) and munge on the exporter host; restart slurmctld if it hangs",
        inputs=(Series(_sel("slurm_node_scrape_error", **exp), "counter", 0, 2),), out_labels=exp))
    if s.accounting.storage == "slurmdbd":
        unit = {"instance": "dbd:9100", "name": "slurmdbd.service", "state": "active"}
        out.append(Alert(
            "SlurmdbdDown", "slurm", 'node_systemd_unit_state{name="slurmdbd.service",state="active"} == 0', 5, 0,
            "critical", f"slurmdbd is not active on {s.accounting.host or 'the accounting host'}",
            "restart slurmdbd and check its database; slurmctld queues accounting records meanwhile "
            "(open a ticket if it stays down)",
            inputs=(Series(_sel("node_systemd_unit_state", **unit), "gauge", 1, 0),), out_labels=unit))
    if s.health_check.enabled:
        minutes = max(5, math.ceil(2 * s.health_check.interval_s / 60))
        st = {"instance": "ctl:9092", "state": "drain"}
        out.append(Alert(
            "SlurmNodesDrained", "slurm", 'slurm_node_count_per_state{state=~"(?i)drain.*"} > 0', minutes, 0,
            "warning", f"Slurm nodes drained (the health check runs every {s.health_check.interval_s} s) "
                       f"for {minutes} minutes",
            "read the drain reason (sinfo -R); an off-matrix node goes back through playbooks/enforce-baseline.yml, "
            "a hardware fault gets a ticket",
            inputs=(Series(_sel("slurm_node_count_per_state", **st), "gauge", 0, 2),), out_labels=st))
    for pname in s.partitions:
        lab = {"instance": "ctl:9092", "partition": pname}
        out.append(Alert(
            "SlurmQueueWait", "slurm",
            f'{_sel("slurm_partition_job_state_total", partition=pname)[:-1]},state=~"(?i)pending"}} > 0',
            wait, 0, "warning", f"partition {pname} has had pending jobs without a break for {wait} minutes",
            "check the partition's pending reasons (squeue -p <partition> -t PD -o %r) and drained nodes; "
            "open a capacity ticket if demand exceeds the partition",
            labels={"partition": pname},
            inputs=(Series(_sel("slurm_partition_job_state_total", **lab, state="PENDING"), "gauge", 0, 3),),
            out_labels={**lab, "state": "PENDING"}))
        failed, finished = '"(?i)failed|node_fail|timeout|out_of_memory"', '"(?i)completed|failed|node_fail|timeout|out_of_memory"'
        pct = obs.job_failure_percent
        out.append(Alert(
            "SlurmJobFailureRatio", "slurm",
            f"100 * sum by (partition) (slurm_partition_job_state_total{{partition={q(pname)},state=~{failed}}}) "
            f"/ sum by (partition) (slurm_partition_job_state_total{{partition={q(pname)},state=~{finished}}}) > {pct}",
            15, 0, "warning", f"more than {pct}% of partition {pname}'s finished jobs failed for 15 minutes",
            "look for a common node (sacct -X -S -1h -s F,NF -o nodelist); drain it; if failures began with a "
            f"change, roll back to the validated set {vs}",
            labels={"partition": pname}, inputs=(Series(_sel("slurm_partition_job_state_total", **lab, state="FAILED"), "gauge", 0, 1000),
                    Series(_sel("slurm_partition_job_state_total", **lab, state="COMPLETED"), "static", 10)),
            out_labels={"partition": pname}))
    for tname, t in d.tenants.items():
        if t.slurm is None:
            continue
        lab = {"instance": "ctl:9092", "account": t.slurm.account}
        out.append(Alert(
            "TenantPendingDemand", "slurm",
            f'{_sel("slurm_account_job_state_total", account=t.slurm.account)[:-1]},state=~"(?i)pending"}} > 0',
            wait, 0, "info",
            f"tenant {tname} (account {t.slurm.account}) has had pending jobs for {wait} minutes "
            "(the Slurm exporter gives no pending reason)",
            "compare the tenant's demand with its quota (reserved and burst GPUs); open a capacity ticket",
            labels={"tenant": tname},
            inputs=(Series(_sel("slurm_account_job_state_total", **lab, state="PENDING"), "gauge", 0, 4),),
            out_labels={**lab, "state": "PENDING", "tenant": tname}))
    return out


def _kueue_alerts(resolved: Resolved) -> list[Alert]:
    d = resolved.definition
    k = d.kubernetes
    if k is None:
        return []
    obs = d.observability
    wait = obs.queue_wait_minutes
    out: list[Alert] = [Alert(
        "KueueControllerDown", "kueue", "absent(kueue_build_info)", 5, 0, "critical",
        f"the Kueue controller ({KUEUE_NAMESPACE}) exports no metrics for 5 minutes",
        f"kubectl -n {KUEUE_NAMESPACE} get pods; restart the controller; if it fails after an upgrade, roll back "
        f"to the validated set {resolved.set.name}",
        inputs=(Series('kueue_build_info{git_version="v0.19.2"}', "vanish", 1),), out_labels={})]
    for qname in k.kueue.queues:
        lab = {"cluster_queue": qname}
        out.append(Alert(
            "KueueQueueWait", "kueue",
            f'{_sel("kueue_pending_workloads", cluster_queue=qname)[:-1]},status=~"active|inadmissible"}} > 0',
            wait, 0, "warning", f"ClusterQueue {qname} has had pending workloads without a break for {wait} minutes",
            "kubectl get workloads -A --field-selector ... to read the pending reasons; open a capacity ticket "
            "if nominal quota and borrowing cannot cover the demand",
            labels={"cluster_queue": qname}, inputs=(Series(_sel("kueue_pending_workloads", **lab, status="active"), "gauge", 0, 3),),
            out_labels={**lab, "status": "active"}))
    for tname, t in d.tenants.items():
        if t.kubernetes is None:
            continue
        ns = t.kubernetes.namespace
        lab = {"namespace": ns, "reason": "QuotaReserved"}
        out.append(Alert(
            "TenantPendingDemand", "kueue",
            f"sum by (namespace, reason) ({_sel('kueue_local_queue_unadmitted_workloads', namespace=ns)}) > 0",
            wait, 0, "info", f"tenant {tname} (namespace {ns}) has had unadmitted workloads for {wait} minutes, "
                             "split by reason",
            "compare the tenant's demand with its quota (reserved and burst GPUs); open a capacity ticket",
            labels={"tenant": tname},
            inputs=(Series(_sel("kueue_local_queue_unadmitted_workloads", name="q", **lab,
                                cluster_queue="cq"), "gauge", 0, 2),),
            out_labels={**lab, "tenant": tname}))
    return out


def alerts(resolved: Resolved) -> list[Alert]:
    """Every alert; rules of one name for several hardware types, partitions or queues carry that
    name as a rule label too, so that each rule is distinct (promtool refuses duplicates)."""
    hw = [replace(a, labels={"hardware": a.out_labels["hardware"], **a.labels})
          for a in _gpu_alerts(resolved) + _fabric_alerts(resolved)]
    return hw + _node_alerts(resolved) + _slurm_alerts(resolved) + _kueue_alerts(resolved)


def xid_recording_rule() -> dict:
    return {"record": XID_RECORD,
            "expr": f'count_values by ({", ".join(DCGM_ID)}) ("xid", DCGM_FI_DEV_XID_ERRORS{{hardware!=""}})'}
