"""Real Slurm for the Slurm target's tests: the host's Slurm (bookworm 22.05) and newer
builds from debootstrap roots (trixie 24.11, sid 26.05; scripts/deps.d/20-slurm.sh caches
them under $CLUSTERDEF_CACHE/slurm-roots), munged and slurmctld started per test in a work
folder and always stopped.

The rendered config gets only the adjustments a single test machine needs (see
`test_copy`); everything else is exactly what clusterdef rendered."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet as ClusterShellNodeSet

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("CLUSTERDEF_CACHE", REPO / ".cache"))
ROOTS = CACHE / "slurm-roots"


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


@dataclass(frozen=True)
class Build:
    """One Slurm build: on the host (root None) or inside a debootstrap root via chroot."""

    name: str
    version: str
    root: Path | None

    @property
    def major(self) -> str:
        return ".".join(self.version.split(".")[:2])

    def host_path(self, inside: str | Path) -> Path:
        """Where a path seen by the daemons lies on the host."""
        return Path(inside) if self.root is None else self.root / str(inside).lstrip("/")

    def argv(self, *cmd: str) -> list[str]:
        if self.root is None:
            return list(cmd)
        # A private mount namespace with /proc mounted in the root; it goes away with the process.
        script = 'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"'
        return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, str(self.root), *cmd]

    def run(self, *cmd: str, env: dict | None = None, timeout: float = 60, check: bool = True):
        r = subprocess.run(self.argv(*cmd), env=env, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def popen(self, *cmd: str, env: dict | None = None, log: Path | None = None) -> subprocess.Popen:
        out = open(log, "ab") if log else subprocess.DEVNULL
        return subprocess.Popen(self.argv(*cmd), env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _version(argv: list[str]) -> str | None:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"(\d+\.\d+\.\d+)", r.stdout)
    return m[1] if r.returncode == 0 and m else None


_BUILDS: list[Build] | None = None


def builds() -> list[Build]:
    """Every Slurm build on this machine, oldest first."""
    global _BUILDS
    if _BUILDS is None:
        found = []
        if shutil.which("slurmctld") and shutil.which("munged"):
            v = _version(["slurmctld", "-V"])
            if v:
                found.append(Build("host", v, None))
        if os.geteuid() == 0 and shutil.which("unshare"):
            for suite in ("trixie", "sid"):
                root = ROOTS / suite
                if (root / "usr/sbin/slurmctld").exists():
                    b = Build(suite, "0", root)
                    v = _version(b.argv("slurmctld", "-V"))
                    if v:
                        found.append(Build(suite, v, root))
        _BUILDS = sorted(found, key=lambda b: _vkey(b.version))
    return _BUILDS


def missing(what: str):
    """Skip locally; fail in CI, where scripts/install-test-deps must provide it."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing in CI: scripts/install-test-deps (scripts/deps.d/20-slurm.sh) must provide it")
    pytest.skip(f"{what} is not installed (scripts/install-test-deps installs it)")


def build_for(major: str) -> Build:
    """The oldest build at least as new as a Slurm major."""
    for b in builds():
        if _vkey(b.version)[:2] >= _vkey(major)[:2]:
            return b
    missing(f"a Slurm build >= {major}")


def host_build() -> Build:
    for b in builds():
        if b.root is None:
            return b
    missing("the host's Slurm (slurmctld, slurmd)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    raise AssertionError(f"{what} did not happen within {timeout} s\n{tail}")


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


class Workdir:
    """A work folder the daemons of one build can see (inside its root for chroot builds)."""

    def __init__(self, build: Build, prefix: str = "cdslurm-", base: str = "/tmp"):
        """`base`: where the folder lies as the daemons see it; a per-job /tmp hides /tmp from jobs,
        so a test of it puts the spool and job output elsewhere (/var/tmp)."""
        self.build = build
        where = build.host_path(base)
        where.mkdir(parents=True, exist_ok=True)
        self.host = Path(tempfile.mkdtemp(prefix=prefix, dir=where))
        self.host.chmod(0o755)
        self.inside = f"{base}/{self.host.name}" if build.root is not None else str(self.host)

    def path(self, rel: str) -> str:
        return f"{self.inside}/{rel}"

    @property
    def job_tmp(self) -> str:
        """Base of the per-job /tmp namespaces: Slurm refuses a BasePath under /tmp, so it sits in
        /var/tmp (inside the root for chroot builds), one per work folder, removed with it."""
        return f"/var/tmp/{self.host.name}-job_tmp"

    def cleanup(self) -> None:
        shutil.rmtree(self.host, ignore_errors=True)
        shutil.rmtree(self.build.host_path(self.job_tmp), ignore_errors=True)


class Munge:
    """munged under a work folder; slurm.conf then needs AuthInfo=socket=<socket>."""

    def __init__(self, work: Workdir):
        self.work = work
        self.proc: subprocess.Popen | None = None
        self.socket = work.path("munge/munge.socket")

    def start(self) -> "Munge":
        d = self.work.host / "munge"
        d.mkdir(mode=0o700)
        key = d / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        p = self.work.path("munge")
        self.proc = self.work.build.popen(
            "munged", "-F", "-f", f"--key-file={p}/munge.key", f"--socket={self.socket}",
            f"--pid-file={p}/munged.pid", f"--seed-file={p}/munged.seed", f"--log-file={p}/munged.log",
            "--num-threads=2", log=self.work.host / "munged.out")
        sock = self.work.build.host_path(self.socket)
        wait_for(sock.exists, 15, "munged socket", self.proc, self.work.host / "munged.out")
        return self

    def stop(self) -> None:
        stop(self.proc)


def test_copy(conf: str, work: Workdir, munge_socket: str, *, ctld_port: int, slurmd_port: int,
              accounting: str | None = None, node_params: str = "NodeAddr=127.0.0.1",
              node_ports: dict[str, int] | None = None, job_container: bool = False) -> str:
    """The rendered slurm.conf with the adjustments one test machine needs, and only those:
    this host as the only controller, root as SlurmUser, state/log/pid files and ports in the
    work folder, munge's socket, nodes at 127.0.0.1, and accounting off (with partition QOS and
    AllowQos, which need the database) unless a slurmdbd address is given (`accounting` = "host:port")."""
    host = socket.gethostname().split(".")[0]
    out = []
    for line in conf.splitlines():
        key = line.split("=", 1)[0] if "=" in line and not line.startswith("#") else ""
        if key == "SlurmctldHost":
            if not any(ln.startswith("SlurmctldHost=") for ln in out):
                out.append(f"SlurmctldHost={host}(127.0.0.1)")
            continue
        if key in ("SlurmUser", "SlurmctldPort", "SlurmdPort", "StateSaveLocation", "SlurmdSpoolDir",
                   "SlurmctldPidFile", "SlurmdPidFile", "SlurmctldLogFile", "SlurmdLogFile"):
            continue
        if key.startswith("AccountingStorage") and accounting is None:
            continue
        if key in ("AccountingStorageHost", "AccountingStoragePort"):
            continue
        if key == "NodeName" and node_ports is not None:
            # A live fake cluster: one slurmd per node on this host, each on its own port.
            name, rest = line.split(" ", 1)
            for host in ClusterShellNodeSet(name.split("=", 1)[1]):
                out.append(f"NodeName={host} {rest} NodeAddr=127.0.0.1 NodeHostname=localhost Port={node_ports[host]}")
            continue
        if key in ("JobContainerType", "NamespaceType") and not job_container:
            # Several slurmd on one host make the per-job /tmp plugin fail at the first job
            # (`_create_ns: ns base mount failed: Invalid argument`); test_private_tmp_per_job runs one.
            continue
        if key == "NodeName":
            line = f"{line} {node_params}"
        if key == "PartitionName" and accounting is None:
            # slurmctld resolves a partition's QOS in the accounting database; without one
            # it refuses to start, so the QOS is checked in the slurmdbd test instead.
            line = re.sub(r" (QOS|AllowQos)=\S+", "", line)
        out.append(line)
    w = work.path
    out += [
        "# --- test-only adjustments (tests/slurm_helpers.py) ---",
        "SlurmUser=root",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        f"StateSaveLocation={w('state')}",
        f"SlurmdSpoolDir={w('spool')}/%n",
        f"SlurmctldPidFile={w('slurmctld.pid')}",
        f"SlurmdPidFile={w('slurmd')}-%n.pid",
        f"SlurmctldLogFile={w('slurmctld.log')}",
        f"SlurmdLogFile={w('slurmd')}-%n.log",
        f"AuthInfo=socket={munge_socket}",
    ]
    if node_ports is not None:
        out.append("SlurmdParameters=config_overrides")  # big nodes on a small machine are not drained
    if accounting is not None:
        h, p = accounting.split(":")
        out += [f"AccountingStorageHost={h}", f"AccountingStoragePort={p}", f"AccountingStoragePass={munge_socket}"]
    return "\n".join(out) + "\n"


class Controller:
    """slurmctld on a rendered tree (slurm/*), with scontrol helpers."""

    def __init__(self, build: Build, work: Workdir, munge: Munge):
        self.build, self.work, self.munge = build, work, munge
        self.proc: subprocess.Popen | None = None
        self.conf = work.path("etc/slurm.conf")

    @property
    def env(self) -> dict:
        return {**os.environ, "SLURM_CONF": self.conf}

    def write(self, tree: dict[str, str], **adjust) -> str:
        """Write the rendered slurm/* files (slurm.conf as its test copy) into etc/."""
        etc = self.work.host / "etc"
        etc.mkdir(exist_ok=True)
        for d in ("state", "spool"):
            (self.work.host / d).mkdir(exist_ok=True)
        for rel, text in tree.items():
            if rel.startswith("slurm/"):
                # the per-job /tmp base lives in the work folder, never on the test machine's disk
                text = text.replace("/var/lib/slurm/job_tmp", self.work.job_tmp)
                (etc / rel.split("/", 1)[1]).write_text(text)
        self.ctld_port = adjust.pop("ctld_port", None) or free_port()
        self.slurmd_port = adjust.pop("slurmd_port", None) or free_port()
        conf = test_copy(tree["slurm/slurm.conf"], self.work, self.munge.socket, ctld_port=self.ctld_port,
                         slurmd_port=self.slurmd_port, **adjust)
        (etc / "slurm.conf").write_text(conf)
        return conf

    def start(self, timeout: float = 60) -> "Controller":
        log = self.work.host / "slurmctld.out"
        self.proc = self.build.popen("slurmctld", "-D", "-i", "-f", self.conf, env=self.env, log=log)
        wait_for(self.ping, timeout, "slurmctld answering scontrol ping", self.proc, log)
        return self

    def ping(self) -> bool:
        r = self.build.run("scontrol", "ping", env=self.env, check=False, timeout=30)
        return "is UP" in r.stdout

    def log(self) -> str:
        p = self.work.host / "slurmctld.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def scontrol(self, *args: str) -> str:
        return self.build.run("scontrol", *args, env=self.env).stdout

    def records(self, kind: str) -> list[dict[str, str]]:
        """`scontrol show <kind> -o` as one dict per record."""
        out = []
        for line in self.scontrol("show", kind, "-o").splitlines():
            if line.strip():
                out.append(parse_record(line))
        return out

    def stop(self) -> None:
        stop(self.proc)


_FIELD = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:.]*)=")


def parse_record(line: str) -> dict[str, str]:
    """`Key=value Key2=value with spaces ...` (one scontrol -o line) -> dict."""
    marks = [(m.start(1), m.end(), m[1]) for m in _FIELD.finditer(line)]
    rec = {}
    for i, (_, vstart, key) in enumerate(marks):
        vend = marks[i + 1][0] if i + 1 < len(marks) else len(line)
        rec.setdefault(key, line[vstart:vend].strip())
    return rec


# --- Accounting: MariaDB and slurmdbd (host build only; tests/test_slurm_accounting.py) ---


class MariaDB:
    """mariadbd on a free loopback port with its data, socket and log in the work folder.
    root may log in over TCP without a password (install-db --auth-root-authentication-method=normal)."""

    def __init__(self, work: Workdir):
        self.work = work
        self.proc: subprocess.Popen | None = None
        self.port = free_port()
        self.dir = work.host / "mariadb"
        self.socket = self.dir / "mysqld.sock"

    def start(self, timeout: float = 30) -> "MariaDB":
        if not (shutil.which("mariadbd") and shutil.which("mariadb-install-db")):
            missing("MariaDB (mariadb-server)")
        data = self.dir / "data"
        data.mkdir(parents=True)
        log = self.work.host / "mariadb.out"
        r = subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
                            "--auth-root-authentication-method=normal", "--skip-test-db"],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"mariadb-install-db exited {r.returncode}\n{r.stdout}\n{r.stderr}")
        self.proc = subprocess.Popen(
            ["mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={self.socket}", f"--port={self.port}",
             "--bind-address=127.0.0.1", "--user=root", f"--pid-file={self.dir / 'mariadbd.pid'}",
             "--skip-name-resolve", "--innodb-buffer-pool-size=64M", "--innodb-log-file-size=16M"],
            stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)

        def accepting() -> bool:
            with socket.socket() as s:
                s.settimeout(0.5)
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        wait_for(accepting, timeout, "mariadbd listening", self.proc, log)
        return self

    def stop(self) -> None:
        stop(self.proc)


# Keys of the rendered slurmdbd.conf.j2 a test's slurmdbd keeps as rendered (the rest is the test's own).
RENDERED_DBD_KEYS = ("PrivateData",)


def slurmdbd_conf(work: Workdir, munge_socket: str, db: MariaDB, dbd_port: int, rendered: str = "") -> str:
    """slurmdbd.conf for a test: slurmdbd on loopback, storing into `db` as root, with the
    RENDERED_DBD_KEYS of the rendered slurmdbd.conf.j2 (when there is one) as rendered."""
    w = work.path
    kept = [ln for ln in rendered.splitlines() if ln.split("=", 1)[0] in RENDERED_DBD_KEYS]
    return "\n".join([
        "# slurmdbd.conf for a test (tests/slurm_helpers.py)",
        "AuthType=auth/munge",
        f"AuthInfo=socket={munge_socket}",
        "DbdHost=localhost",
        "DbdAddr=127.0.0.1",
        f"DbdPort={dbd_port}",
        "SlurmUser=root",
        f"PidFile={w('slurmdbd.pid')}",
        f"LogFile={w('slurmdbd.log')}",
        "DebugLevel=info",
        "StorageType=accounting_storage/mysql",
        "StorageHost=127.0.0.1",
        f"StoragePort={db.port}",
        "StorageUser=root",
        "StorageLoc=slurm_acct_db",
        *kept,
    ]) + "\n"


class Slurmdbd:
    """slurmdbd with slurmdbd.conf (mode 0600) beside the controller's slurm.conf, found
    through SLURM_CONF. Start it after `Controller.write(..., accounting=slurmdbd.address)`."""

    def __init__(self, ctl: Controller, db: MariaDB):
        if ctl.build.root is not None:
            raise ValueError("slurmdbd runs from the host's Slurm only")
        self.ctl, self.db = ctl, db
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> "Slurmdbd":
        if not shutil.which("slurmdbd"):
            missing("slurmdbd")
        work = self.ctl.work
        etc = work.host / "etc"
        etc.mkdir(exist_ok=True)
        conf = etc / "slurmdbd.conf"
        rendered = etc / "slurmdbd.conf.j2"  # written by Controller.write from the rendered tree
        conf.write_text(slurmdbd_conf(work, self.ctl.munge.socket, self.db, self.port,
                                      rendered.read_text() if rendered.exists() else ""))
        conf.chmod(0o600)
        log = work.host / "slurmdbd.out"
        self.proc = self.ctl.build.popen("slurmdbd", "-D", env=self.ctl.env, log=log)

        def up() -> bool:
            with socket.socket() as s:
                s.settimeout(0.5)
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        wait_for(up, timeout, "slurmdbd listening", self.proc, work.host / "slurmdbd.log")
        return self

    def sacctmgr(self, *args: str, check: bool = True):
        return self.ctl.build.run("sacctmgr", *args, env=self.ctl.env, check=check)

    def log(self) -> str:
        p = self.ctl.work.host / "slurmdbd.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def stop(self) -> None:
        stop(self.proc)


def fake_gpu_slurmds(build, env: dict, work: Path, hosts, gpus: int):
    """One slurmd per host, in a private mount namespace whose /dev (an overlay) has `gpus` fake
    NVIDIA device files, so gres.conf's File= paths exist without touching the real /dev."""
    script = ("set -e; mkdir -p $W/ov/u $W/ov/w; "
              "mount -t overlay overlay -o lowerdir=/dev,upperdir=$W/ov/u,workdir=$W/ov/w /dev; "
              f"for i in $(seq 0 {gpus - 1}); do mknod /dev/nvidia$i c 195 $i; done; mknod /dev/nvidiactl c 195 255; "
              + " ".join(f"slurmd -D -N {h} -f $SLURM_CONF & " for h in hosts) + "wait")
    return build.popen("unshare", "-m", "--propagation", "private", "sh", "-c", script,
                       env={**env, "W": str(work)}, log=work / "slurmd.out")


def accounting_daemons(build: Build, tree: dict[str, str], stack: list, prefix: str, node_ports=None):
    """Munge, MariaDB, slurmdbd and slurmctld (no slurmd) on the rendered Slurm tree; everything
    started is appended to `stack` (stop it with stop_all(stack)). Returns (work, controller,
    slurmdbd, the written slurm.conf)."""
    work = Workdir(build, prefix=prefix)
    stack.append(work)  # removed last (teardown runs newest first)
    munge = Munge(work)
    stack.append(munge)
    munge.start()
    db = MariaDB(work)
    stack.append(db)
    db.start()
    ctl = Controller(build, work, munge)
    dbd = Slurmdbd(ctl, db)
    conf = ctl.write(tree, accounting=dbd.address, **({"node_ports": node_ports} if node_ports else {}))
    stack.append(dbd)
    dbd.start()
    stack.append(ctl)
    ctl.start()  # registers the cluster in the database
    return work, ctl, dbd, conf


def accounting_cluster(build: Build, tree: dict[str, str], stack: list, prefix: str, node_ports=None):
    """accounting_daemons, with the rendered qos.sh and accounts.cfg loaded as a user would.
    Returns (work, controller, slurmdbd, env)."""
    work, ctl, dbd, _ = accounting_daemons(build, tree, stack, prefix, node_ports=node_ports)
    env = {**ctl.env, "PATH": os.environ["PATH"]}
    etc = work.host / "etc"
    r = subprocess.run(["sh", str(etc / "qos.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    r = dbd.sacctmgr("-i", "load", f"file={etc / 'accounts.cfg'}", check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    return work, ctl, dbd, env


def stop_all(stack: list) -> None:
    """Stop what accounting_cluster (or a test) started, newest first; a Workdir is removed last."""
    for thing in reversed(stack):
        thing.cleanup() if isinstance(thing, Workdir) else thing.stop()
