"""The box: a cluster of containers, one per host, each with systemd as PID 1, on an internal podman
network (no gateway: nothing leaves the machine). Built from localhost/clusterdef-box:trixie
(scripts/deps.d/90-box.sh: Debian trixie, Slurm 24.11 daemons, munge, MariaDB and dnsmasq preinstalled with
their services disabled). Each container is named exactly as its host, so an Ansible inventory naming the
hosts reaches them through the containers.podman.podman connection (`ansible_env`). See docs/box.md.

    with running_box([{"name": "slurmctl01", "ip": "10.20.0.3"}, {"name": "gpu001", "ip": "10.20.0.11", "gpus": 8}]) as box:
        box.exec("gpu001", ["hostname"])

A plugin of the suite (conftest.py's pytest_plugins): the `box_ready` fixture skips when podman or the image
is missing on a developer's machine and fails under CI."""

from __future__ import annotations

import difflib
import ipaddress
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import pytest

from molecule_support import missing
from slurm_helpers import parse_record

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("CLUSTERDEF_CACHE", ROOT / ".cache"))
IMAGE = "localhost/clusterdef-box:trixie"
VERSIONS = CACHE / "box" / "trixie.versions"        # `package version` lines of the image (90-box.sh)
CONTAINERS_CONF = CACHE / "molecule" / "containers.conf"   # host quirks (50-molecule.sh)
COLLECTIONS = CACHE / "molecule" / "collections"           # containers.podman (50-molecule.sh)
DOMAIN = "lab.example"
SUBNET = "10.20.0.0/24"
PREFIX = "clusterdef-box"
LABEL = "clusterdef.box"          # on every container and network the box makes: the owning process's pid
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
            "BOOT_FAIL", "DEADLINE"}


class BoxError(AssertionError):
    """The box did not do what was asked (with the relevant journal tails in the message)."""


def image_versions(path: Path = VERSIONS) -> dict[str, str]:
    """The image's Debian package versions, e.g. {"slurmctld": "24.11.5-4+deb13u1", ...}."""
    return dict(line.split(" ", 1) for line in path.read_text().splitlines() if " " in line)


@dataclass(frozen=True)
class Host:
    name: str
    ip: str
    gpus: int = 0
    caps: tuple[str, ...] = ()  # extra capabilities (SYS_ADMIN: Slurm's per-job mount namespaces)

    @classmethod
    def of(cls, h: Host | dict) -> Host:
        return h if isinstance(h, Host) else cls(name=h["name"], ip=h["ip"], gpus=int(h.get("gpus", 0)),
                                                 caps=tuple(h.get("caps", ())))


@dataclass
class Job:
    """A batch job submitted as `user`: `id` when Slurm took it, else `refused` (sbatch's message)."""

    user: str
    id: str | None = None
    refused: str = ""
    submit: subprocess.CompletedProcess | None = field(default=None, repr=False)


def _start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def owner_token(pid: int | None = None) -> str:
    """`PID-STARTTIME` of a process (this one by default): the value of LABEL on what the box makes, so a
    reused pid does not make a killed run's leftovers look alive."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}-{_start_time(pid) or 0}"


def _alive(token: str) -> bool:
    pid, _, start = token.partition("-")
    return pid.isdigit() and _start_time(int(pid)) == start


def wait_for(what: str, probe: Callable[[], object], timeout: float, interval: float = 0.25,
             diagnostics: Callable[[], str] = lambda: "") -> object:
    """Poll `probe` until it returns something truthy (returned); after `timeout` seconds fail with
    `what`, the last value seen and `diagnostics()`."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise BoxError(f"timed out after {timeout:.0f} s waiting for {what}; last seen: {last!r}\n{diagnostics()}")
        time.sleep(interval)


class BoxCluster:
    """One container per host on an internal network of its own (unique name per run). `start()` and
    `stop()`; `stop()` is idempotent and removes the containers and the network even after a failed start."""

    def __init__(self, hosts: Iterable[Host | dict], subnet: str = SUBNET, network: str | None = None,
                 image: str = IMAGE, domain: str = DOMAIN, client: str | None = None, prefix: str = PREFIX):
        self.hosts = {h.name: h for h in map(Host.of, hosts)}
        net = ipaddress.ip_network(subnet)
        for h in self.hosts.values():
            if ipaddress.ip_address(h.ip) not in net:
                raise ValueError(f"{h.name}: {h.ip} is not in {subnet}")
        if len({h.ip for h in self.hosts.values()}) != len(self.hosts):
            raise ValueError("two hosts share an address")
        self.subnet = subnet
        self.prefix = prefix
        self.network = network or f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.image = image
        self.domain = domain
        self.client = client or next(iter(self.hosts))   # where the Slurm helpers run their commands
        self.podman = shutil.which("podman") or "podman"
        self.env = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)} if CONTAINERS_CONF.exists() else dict(os.environ)
        self.timings: dict[str, float] = {}
        self.degraded: dict[str, str] = {}   # host -> its failed units, when systemd came up degraded
        self.started = False

    # ---- podman
    def _podman(self, *args: str, check: bool = True, timeout: float = 120, input: str | bytes | None = None,
                text: bool = True) -> subprocess.CompletedProcess:
        try:
            r = subprocess.run([self.podman, *args], env=self.env, capture_output=True, text=text, input=input,
                               timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise BoxError(f"podman {shlex.join(args)} did not finish in {timeout:.0f} s") from exc
        if check and r.returncode != 0:
            raise BoxError(f"podman {shlex.join(args)} exited {r.returncode}: {r.stderr if text else r.stderr.decode(errors='replace')}")
        return r

    def _labels(self) -> list[str]:
        return ["--label", f"{LABEL}={owner_token()}", "--label", f"{LABEL}.network={self.network}"]

    def _clear_stale(self) -> None:
        """Containers and networks of a previous run that was killed (the process that made them is gone):
        removed. A container with one of our names that the box did not make, or a live process's: fail."""
        for name in self.hosts:
            r = self._podman("container", "inspect", "--format", "{{json .Config.Labels}}", name, check=False)
            if r.returncode != 0:
                continue
            labels = json.loads(r.stdout or "null") or {}
            owner = labels.get(LABEL, "")
            if not owner:
                raise BoxError(f"a container named {name} exists that the box did not make: remove it yourself")
            if _alive(owner):
                raise BoxError(f"container {name} belongs to a box that is still running (pid {owner}, network "
                               f"{labels.get(LABEL + '.network')}): wait for it or stop it")
            self._podman("rm", "-f", "-t", "0", name, check=False)
        for net in json.loads(self._podman("network", "ls", "--format", "json").stdout or "[]"):
            labels = net.get("labels") or {}
            owner = labels.get(LABEL, "")
            if not net.get("name", "").startswith(self.prefix) or not owner:
                continue
            if not _alive(owner):   # a live process's box (this one's too) is never touched
                users = self._podman("ps", "-aq", "--filter", f"network={net['name']}").stdout.split()
                if users:
                    self._podman("rm", "-f", "-t", "0", *users, check=False)
                self._podman("network", "rm", "-f", net["name"], check=False)

    def start(self, timeout: float = 90) -> BoxCluster:
        t0 = time.monotonic()
        self._clear_stale()
        self.started = True   # from here on stop() has something to remove
        self._podman("network", "create", "--internal", "--subnet", self.subnet, *self._labels(), self.network)
        hosts_args = []
        for h in self.hosts.values():
            hosts_args += ["--add-host", f"{h.name}.{self.domain}:{h.ip}", "--add-host", f"{h.name}:{h.ip}"]
        for h in self.hosts.values():
            self._podman("run", "-d", "--name", h.name, "--hostname", h.name, "--network", self.network, "--ip", h.ip,
                         *hosts_args, "--dns", "127.0.0.1", *self._labels(),
                         *(["--cap-add", "MKNOD"] if h.gpus else []),
                         *(a for c in h.caps for a in ("--cap-add", c)), self.image, "/sbin/init")
        self.timings["run"] = time.monotonic() - t0
        for h in self.hosts.values():
            state = wait_for(f"systemd on {h.name} to reach running or degraded", lambda h=h: self._system_state(h.name),
                             timeout, interval=0.2, diagnostics=lambda h=h: self.diagnostics([h.name]))
            if state == "degraded":   # acceptable, but say what failed when a later step trips over it
                self.degraded[h.name] = self.exec(h.name, ["systemctl", "--failed", "--plain", "--no-legend"]).stdout
            if h.gpus:
                script = ('for i in $(seq 0 $(($1 - 1))); do mknod -m 666 /dev/nvidia$i c 195 $i; done; '
                          'mknod -m 666 /dev/nvidiactl c 195 255')
                self.sh(h.name, script, str(h.gpus), check=True)
        self.timings["start"] = time.monotonic() - t0
        return self

    def _system_state(self, host: str) -> str | None:
        r = self._podman("exec", host, "systemctl", "is-system-running", check=False, timeout=30)
        if r.returncode != 0 and self._podman("container", "inspect", "--format", "{{.State.Running}}", host,
                                              check=False).stdout.strip() != "true":
            logs = self._podman("logs", "--tail", "30", host, check=False)
            raise BoxError(f"container {host} is not running (its /sbin/init ended); podman logs:\n"
                           f"{logs.stdout}{logs.stderr}")
        state = r.stdout.strip()
        return state if state in ("running", "degraded") else None

    def stop(self) -> None:
        """Remove the containers and the network; safe to call twice and after a failed start."""
        if not self.started:
            return
        t0 = time.monotonic()
        mine = self._podman("ps", "-aq", "--filter", f"label={LABEL}.network={self.network}", check=False).stdout.split()
        if mine:
            self._podman("rm", "-f", "-t", "0", *mine, check=False)
        self._podman("network", "rm", "-f", self.network, check=False)
        self.started = False
        self.timings["stop"] = time.monotonic() - t0

    # ---- commands and files
    def exec(self, host: str, argv: Sequence[str], user: str | None = None, check: bool = False,
             input: str | None = None, timeout: float = 60, workdir: str | None = None) -> subprocess.CompletedProcess:
        """`argv` in `host` (as `user`: from the user's home directory unless `workdir`)."""
        opts = ["-i"] if input is not None else []
        if user:
            opts += ["--user", user, "--workdir", workdir or f"/home/{user}"]
        elif workdir:
            opts += ["--workdir", workdir]
        r = self._podman("exec", *opts, host, *argv, check=False, timeout=timeout, input=input)
        if check and r.returncode != 0:
            raise BoxError(f"{host}{' as ' + user if user else ''}: {shlex.join(argv)} exited {r.returncode}\n"
                           f"stdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-2000:]}")
        return r

    def sh(self, host: str, script: str, *args: str, user: str | None = None, check: bool = False,
           timeout: float = 60) -> subprocess.CompletedProcess:
        """A shell script in `host`; `args` are its $1, $2... (never pasted into the script)."""
        return self.exec(host, ["sh", "-ec", script, "sh", *args], user=user, check=check, timeout=timeout)

    def put(self, host: str, path: str, content: str | bytes, owner: str = "root", group: str | None = None,
            mode: int = 0o644) -> None:
        """Write `content` to `path` on `host` (parents made), then owner, group and mode; atomic rename."""
        data = content.encode() if isinstance(content, str) else content
        script = ('mkdir -p "$(dirname "$1")"; umask 077; cat >"$1.box-tmp"; chown "$2:$3" "$1.box-tmp"; '
                  'chmod "$4" "$1.box-tmp"; mv "$1.box-tmp" "$1"')
        r = self._podman("exec", "-i", host, "sh", "-ec", script, "sh", path, owner, group or owner, f"{mode:o}",
                         input=data, text=False, check=False)
        if r.returncode != 0:
            raise BoxError(f"{host}: writing {path} failed: {r.stderr.decode(errors='replace')}")

    def get(self, host: str, path: str) -> bytes:
        r = self._podman("exec", host, "cat", path, text=False, check=False)
        if r.returncode != 0:
            raise BoxError(f"{host}: cannot read {path}: {r.stderr.decode(errors='replace').strip()}")
        return r.stdout

    def stat(self, host: str, path: str) -> tuple[str, str, int]:
        """(owner, group, mode) of `path` on `host`."""
        out = self.exec(host, ["stat", "-c", "%U %G %a", path], check=True).stdout.split()
        return out[0], out[1], int(out[2], 8)

    def assert_file(self, host: str, path: str, text: str | bytes, owner: str | None = None, group: str | None = None,
                    mode: int | None = None) -> None:
        """`path` on `host` holds exactly `text` (a unified diff otherwise), with the owner, group and mode given."""
        want = text.encode() if isinstance(text, str) else text
        got = self.get(host, path)
        if got != want:
            diff = "".join(difflib.unified_diff(want.decode(errors="replace").splitlines(True),
                                                got.decode(errors="replace").splitlines(True),
                                                f"expected {path}", f"{host}:{path}"))
            raise BoxError(f"{host}:{path} differs from the expected text:\n{diff[-4000:]}")
        o, g, m = self.stat(host, path)
        for what, expected, actual in (("owner", owner, o), ("group", group, g)):
            if expected is not None and expected != actual:
                raise BoxError(f"{host}:{path}: {what} {actual}, expected {expected}")
        if mode is not None and mode != m:
            raise BoxError(f"{host}:{path}: mode {m:04o}, expected {mode:04o}")

    def users(self, groups: dict[str, list[str]], first_gid: int = 20000, first_uid: int = 21000) -> dict[str, int]:
        """The same local groups and users (same gid and uid, home directories) on every host: tenant users
        standing in for the directory. Numbers follow sorted names; a user's primary group is the first
        group listing them. Returns {user: uid}."""
        names = sorted({u for members in groups.values() for u in members})
        for name in (*groups, *names):
            if not re.fullmatch(r"[a-z_][a-z0-9_-]*", name):
                raise ValueError(f"not a user or group name: {name!r}")
        gids = {g: first_gid + i for i, g in enumerate(sorted(groups))}
        uids = {u: first_uid + i for i, u in enumerate(names)}
        lines = [f"getent group {g} >/dev/null || groupadd -g {gid} {g}" for g, gid in gids.items()]
        for u in names:
            member_of = [g for g in groups if u in groups[g]]
            lines.append(f"getent passwd {u} >/dev/null || useradd -m -s /bin/bash -u {uids[u]} -g {member_of[0]} "
                         f"-G {','.join(member_of)} {u}")
        for host in self.hosts:
            self.sh(host, "\n".join(lines), check=True)
        return uids

    def diagnostics(self, hosts: Iterable[str] | None = None, units: Sequence[str] = (), lines: int = 30) -> str:
        """Failed units and the journal tail (of `units` when given) of each host, for failure messages."""
        out = []
        for host in hosts or self.hosts:
            unit_args = [a for u in units for a in ("-u", u)]
            failed = self._podman("exec", host, "systemctl", "--failed", "--plain", "--no-legend", check=False, timeout=30)
            journal = self._podman("exec", host, "journalctl", "--no-pager", "-q", "-n", str(lines), *unit_args,
                                   check=False, timeout=30)
            out.append(f"--- {host}: failed units: {failed.stdout.strip() or failed.stderr.strip() or 'none'}\n"
                       f"--- {host}: journal{' of ' + ', '.join(units) if units else ''}, last {lines} lines:\n"
                       f"{journal.stdout.rstrip() or journal.stderr.rstrip()}")
        return "\n".join(out)

    def wait_active(self, host: str, unit: str, timeout: float = 30) -> None:
        """`unit` is active on `host` (its journal tail otherwise)."""
        wait_for(f"{unit} active on {host}",
                 lambda: self.exec(host, ["systemctl", "is-active", unit]).stdout.strip() == "active",
                 timeout, diagnostics=lambda: self.diagnostics([host], [unit]))

    def rss_mib(self) -> dict[str, float]:
        """Resident memory of every process in each container, MiB."""
        return {h: sum(int(x) for x in self.exec(h, ["ps", "-e", "-o", "rss="], check=True).stdout.split()) / 1024
                for h in self.hosts}

    # ---- Ansible
    def ansible_env(self, base: dict | None = None) -> dict[str, str]:
        """Environment for ansible / ansible-playbook / ansible-runner against the containers: the
        containers.podman connection for every host (ANSIBLE_TRANSPORT, so an inventory that names the hosts
        and sets no ansible_connection reaches them), its collection, podman's host quirks, the image's python."""
        env = dict(os.environ if base is None else base)
        env.update({"CONTAINERS_CONF": self.env.get("CONTAINERS_CONF", ""), "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
                    "ANSIBLE_TRANSPORT": "containers.podman.podman", "ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3",
                    "ANSIBLE_HOST_KEY_CHECKING": "False", "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0",
                    "ANSIBLE_RETRY_FILES_ENABLED": "False",
                    "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])})
        return {k: v for k, v in env.items() if v}

    def inventory(self, groups: dict[str, list[str]] | None = None) -> str:
        """An INI inventory of every host (and `groups`): bare names, as clusterdef's rendered inventory has them;
        the connection comes from `ansible_env` (ANSIBLE_TRANSPORT)."""
        lines = list(self.hosts)
        for group, members in (groups or {}).items():
            lines += ["", f"[{group}]", *members]
        return "\n".join(lines) + "\n"

    def ansible(self, pattern: str, module: str, args: str = "", groups: dict[str, list[str]] | None = None,
                timeout: float = 180) -> dict[str, dict]:
        """An ad-hoc `ansible PATTERN -m MODULE -a ARGS` through ansible-runner (as `clusterdef apply` runs
        Ansible) over `inventory(groups)` and the podman connection: {host: the module's result, with
        "_event" runner_on_ok|runner_on_failed|runner_on_unreachable}."""
        import ansible_runner

        results: dict[str, dict] = {}

        def handler(event: dict) -> bool:
            data = event.get("event_data") or {}
            if event.get("event") in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable"):
                results[data["host"]] = {**(data.get("res") or {}), "_event": event["event"]}
            return True

        with tempfile.TemporaryDirectory(prefix="clusterdef-box-ansible-") as tmp:
            Path(tmp, "hosts.ini").write_text(self.inventory(groups))
            env = {**self.ansible_env(), "HOME": tmp, "ANSIBLE_FORKS": str(len(self.hosts))}
            r = ansible_runner.run(private_data_dir=tmp, host_pattern=pattern, module=module, module_args=args or None,
                                   inventory=str(Path(tmp, "hosts.ini")), envvars=env, quiet=True, timeout=int(timeout),
                                   event_handler=handler, suppress_env_files=True)
            output = r.stdout.read()
        if r.rc != 0 or r.status != "successful":
            raise BoxError(f"ansible {pattern} -m {module} {args}: {r.status}, rc {r.rc}:\n{output[-4000:]}")
        return results

    # ---- Slurm (client commands run on `on`, default self.client)
    def slurm(self, argv: Sequence[str], on: str | None = None, user: str | None = None, check: bool = True,
              timeout: float = 60) -> subprocess.CompletedProcess:
        return self.exec(on or self.client, argv, user=user, check=check, timeout=timeout,
                         workdir=None if user else "/tmp")

    def sinfo(self, on: str | None = None) -> dict[str, dict]:
        """{partition: {"nodes": {node: state}, "default": bool, "avail": "up"|...}} from `sinfo -N`."""
        out = self.slurm(["sinfo", "-h", "-N", "-o", "%P|%N|%T|%a"], on=on).stdout
        parts: dict[str, dict] = {}
        for line in out.splitlines():
            part, node, state, avail = line.split("|")
            p = parts.setdefault(part.rstrip("*"), {"nodes": {}, "default": part.endswith("*"), "avail": avail})
            p["nodes"][node] = state
        return parts

    def _records(self, argv: Sequence[str], on: str | None = None, user: str | None = None) -> list[dict[str, str]]:
        """`-P` output with its header line -> one dict per row."""
        lines = self.slurm(argv, on=on, user=user).stdout.splitlines()
        if not lines:
            return []
        head = lines[0].split("|")
        return [dict(zip(head, line.split("|"))) for line in lines[1:]]

    def assoc(self, on: str | None = None, fields: str = "Cluster,Account,User,Partition,Share,QOS,DefaultQOS,"
              "GrpTRES,MaxTRES,MaxTRESPerNode,MaxJobs,MaxSubmit,MaxWall,ParentName") -> list[dict[str, str]]:
        """`sacctmgr -P show assoc` as records (one dict per association, keyed by the format's headers)."""
        return self._records(["sacctmgr", "-P", "show", "assoc", f"format={fields}"], on=on)

    def qos(self, on: str | None = None, fields: str = "Name,Priority,Flags,GrpTRES,MaxTRESPerUser,MaxTRESPerJob,"
            "MaxJobsPerUser,MaxWall") -> list[dict[str, str]]:
        return self._records(["sacctmgr", "-P", "show", "qos", f"format={fields}"], on=on)

    def squeue(self, on: str | None = None, user: str | None = None) -> list[dict[str, str]]:
        """Every job in the queue: JOBID, USER, ACCOUNT, PARTITION, QOS, STATE, REASON, NODELIST."""
        out = self.slurm(["squeue", "-h", "-a", "-o", "%i|%u|%a|%P|%q|%T|%r|%N"], on=on, user=user).stdout
        keys = ["JOBID", "USER", "ACCOUNT", "PARTITION", "QOS", "STATE", "REASON", "NODELIST"]
        return [dict(zip(keys, line.split("|"))) for line in out.splitlines()]

    def sacct(self, job: str | None = None, on: str | None = None, fields: str = "JobID,User,Account,Partition,QOS,"
              "State,ExitCode,AllocTRES,NodeList") -> list[dict[str, str]]:
        """Accounting records of the allocations (-X), every user's, of the box's lifetime."""
        return self._records(["sacct", "-P", "-a", "-X", "-S", "2020-01-01", *(["-j", job] if job else []), "-o", fields], on=on)

    def job(self, job_id: str, on: str | None = None) -> dict[str, str]:
        """`scontrol -o show job` as a dict ({} once the controller has forgotten it)."""
        r = self.slurm(["scontrol", "-o", "show", "job", job_id], on=on, check=False)
        return parse_record(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip() else {}

    def submit(self, user: str, partition: str, account: str | None = None, qos: str | None = None,
               gres: str | None = None, nodes: int = 1, command: str = "hostname", time_limit: str = "5",
               extra: Sequence[str] = (), on: str | None = None) -> Job:
        """sbatch as `user` (from their home directory on `on`); a refusal at submit is `Job.refused`."""
        argv = ["sbatch", "--parsable", "-p", partition, "-N", str(nodes), "-t", time_limit,
                "-o", "/tmp/slurm-%j.out", *(["-A", account] if account else []), *(["-q", qos] if qos else []),
                *([f"--gres={gres}"] if gres else []), *extra, "--wrap", command]
        r = self.slurm(argv, on=on, user=user, check=False)
        if r.returncode != 0:
            return Job(user=user, refused=(r.stderr.strip() or r.stdout.strip()), submit=r)
        return Job(user=user, id=r.stdout.strip().split(";")[0], submit=r)

    def wait_job(self, job: Job | str, state: str | Iterable[str] = "COMPLETED", reason: str | None = None,
                 timeout: float = 60, on: str | None = None) -> dict[str, str]:
        """Wait until the job is in `state` (one or several; with `reason` when given, e.g. PENDING for
        QOSGrpGRES) and return its `scontrol show job` record. A job ending in another state fails at once."""
        job_id = job.id if isinstance(job, Job) else job
        if job_id is None:
            raise BoxError(f"job of {job.user if isinstance(job, Job) else '?'} was refused at submit: "
                           f"{job.refused if isinstance(job, Job) else ''}")
        want = {state} if isinstance(state, str) else set(state)

        seen: dict[str, str] = {}

        def probe():
            rec = self.job(job_id, on=on)
            seen.clear()
            seen.update(rec)
            got = rec.get("JobState", "")
            if got in want and (reason is None or rec.get("Reason") == reason):
                return rec
            if got in TERMINAL and got not in want:
                raise BoxError(f"job {job_id} ended {got} (reason {rec.get('Reason')}), expected {sorted(want)}: "
                               f"{rec}\n{self.diagnostics([on or self.client], ['slurmctld'])}")
            return None

        return wait_for(f"job {job_id} in {sorted(want)}{' with reason ' + reason if reason else ''}", probe, timeout,
                        diagnostics=lambda: f"job: {seen}\n{self.diagnostics([on or self.client], ['slurmctld'])}")


@contextmanager
def running_box(hosts: Iterable[Host | dict], **kwargs) -> Iterator[BoxCluster]:
    """A started BoxCluster, always stopped afterwards (also when start fails)."""
    box = BoxCluster(hosts, **kwargs)
    try:
        box.start()
        yield box
    finally:
        box.stop()


@pytest.fixture(scope="session")
def box_ready() -> dict[str, str]:
    """podman, the box image and the containers.podman collection are here (skip, or fail under CI); the
    image's package versions."""
    podman = shutil.which("podman")
    if podman is None:
        missing("podman")
    if not CONTAINERS_CONF.exists() or not (COLLECTIONS / "ansible_collections" / "containers" / "podman").is_dir():
        missing(f"the molecule cache ({CONTAINERS_CONF.parent}: containers.conf and the containers.podman collection)")
    env = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}
    if subprocess.run([podman, "image", "exists", IMAGE], env=env).returncode != 0 or not VERSIONS.exists():
        missing(f"podman image {IMAGE} or {VERSIONS}")
    return image_versions()
