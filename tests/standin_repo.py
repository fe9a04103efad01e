"""A local flat apt repository of small stand-in packages with the real package names and version
strings of a set's stack (the molecule tests' tests/molecule/build-repo.sh does the same inside
containers; shared/reference/compat/packages.yaml for names and revisions), built on the host with
dpkg-deb and an index written here (Packages with sizes and hashes, as apt-ftparchive writes it).

Each component is present at the set's version, an older one and a newer one, so an image that
ends up with the set's version got it from the rendered pin file, not from "newest wins".

Tools the probe calls (nvidia-smi, nvfwupd, mlxfwmanager, slurmd) are shell scripts in the packages
that print /etc/standin/<tool>/<their arguments, sanitised>: the test writes those answers (real
output shapes, produced by tests/standin_node.py) into the booted image."""

from __future__ import annotations

import hashlib
import shlex
import re
import subprocess
from pathlib import Path

ANSWER = r'''#!/bin/sh
# stand-in {tool}: prints what the test put in /etc/standin/{tool}/ for these arguments
key=$(printf '%s' "$*" | tr -c 'A-Za-z0-9' '_')
f=/etc/standin/{tool}/$key
[ -r "$f" ] || exit 127
cat "$f"
'''


def key(args: list[str]) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", " ".join(args))


def _deb(out: Path, work: Path, name: str, version: str, depends: str = "", files: dict[str, str] | None = None):
    d = work / f"{name}_{version}"
    (d / "DEBIAN").mkdir(parents=True)
    control = [f"Package: {name}", f"Version: {version}", "Architecture: all",
               "Maintainer: clusterdef stand-in <noreply@example.invalid>"]
    if depends:
        control.append(f"Depends: {depends}")
    control.append(f"Description: stand-in for {name} {version} (clusterdef tests)")
    (d / "DEBIAN/control").write_text("\n".join(control) + "\n")
    for path, text in (files or {}).items():
        p = d / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        p.chmod(0o755)
    deb = out / f"{name}_{version.replace(':', '%3a')}_all.deb"
    subprocess.run(["dpkg-deb", "-Zgzip", "--root-owner-group", "--build", str(d), str(deb)], check=True,
                   capture_output=True)
    return deb


def _index(repo: Path) -> None:
    entries = []
    for deb in sorted(repo.glob("*.deb")):
        control = subprocess.run(["dpkg-deb", "-f", str(deb)], check=True, capture_output=True, text=True).stdout
        data = deb.read_bytes()
        entries.append(control.rstrip("\n") + f"\nFilename: ./{deb.name}\nSize: {len(data)}\n"
                       f"MD5sum: {hashlib.md5(data).hexdigest()}\nSHA256: {hashlib.sha256(data).hexdigest()}\n")
    (repo / "Packages").write_text("\n".join(entries))


def build(repo: Path, vs, distribution: str = "debian") -> Path:
    """Stand-ins for set `vs` (and one older and one newer version of each component) in `repo`."""
    repo.mkdir(parents=True, exist_ok=True)
    work = repo.parent / (repo.name + ".build")
    c = vs.components
    major, minor = c.cuda.split(".")[:2]
    answer = {t: {f"/usr/bin/{t}": ANSWER.format(tool=t)} for t in ("nvidia-smi", "nvfwupd", "mlxfwmanager")}
    driver_pkgs = (["nvidia-driver-cuda", "nvidia-kernel-open-dkms"] if distribution == "debian"
                   else ["libnvidia-compute", "nvidia-dkms-open", "nvidia-driver-cuda"])
    for v in ("580.95.05", c.driver, "595.91.07"):
        for p in driver_pkgs + ["nvidia-fabricmanager", "libnvidia-nscq"]:
            _deb(repo, work, p, f"{v}-1", files=answer["nvidia-smi"] if p == "nvidia-driver-cuda" else None)
    _deb(repo, work, "nvfwupd", "2.0.7-1", files=answer["nvfwupd"])
    for v in ("13.0.1", c.cuda, "13.0.9"):
        _deb(repo, work, f"cuda-libraries-{major}-{minor}", f"{v}-1")
    for v in ("2.28.7", c.nccl, "2.31.9"):
        _deb(repo, work, "libnccl2", f"{v}-1+cuda{major}.{minor}")
    for v in ("1.18.0", c.container_toolkit, "1.20.0"):
        _deb(repo, work, "libnvidia-container1", f"{v}-1")
        _deb(repo, work, "libnvidia-container-tools", f"{v}-1", f"libnvidia-container1 (= {v}-1)")
        _deb(repo, work, "nvidia-container-toolkit-base", f"{v}-1")
        _deb(repo, work, "nvidia-container-toolkit", f"{v}-1",
             f"nvidia-container-toolkit-base (= {v}-1), libnvidia-container-tools (= {v}-1)")
    for v in ("25.05.0", c.slurm, "26.05.3"):
        _deb(repo, work, "slurm-smd-slurmd", f"{v}-1", "",
             {"/usr/sbin/slurmd": f"#!/bin/sh\necho 'slurm {v}'\n"})
        _deb(repo, work, "slurm-smd-client", f"{v}-1")
    k = c.kubernetes.lstrip("v")
    for v in ("1.33.0", k, "1.36.0"):
        for p in ("kubelet", "kubeadm", "kubectl"):
            _deb(repo, work, p, f"{v}-1.1")
    if c.doca:
        for v in ("3.1.0-1", c.doca, "3.9.0-1"):
            _deb(repo, work, "doca-ofed", v)
    if c.mft:
        for v in ("4.33.0-1", c.mft, "4.99.0-1"):
            _deb(repo, work, "mft", v, files=answer["mlxfwmanager"] if v == c.mft else None)
    _index(repo)
    return repo


def answers(standin_folder: Path, probe: Path, args: list[str]) -> dict[str, str]:
    """/etc/standin/<tool>/<key> -> output, for every tool call `clusterdef-probe args` makes on the
    stand-in node in `standin_folder` (tests/standin_node.py), as the packaged stand-ins replay them."""
    import os

    from standin_node import calls

    log = standin_folder / "node.json.calls"
    log.unlink(missing_ok=True)
    env = {"PATH": f"{standin_folder}:/usr/bin:/bin"}
    subprocess.run(["sh", str(probe), *args], env=env, check=True, capture_output=True)
    out = {}
    for tool in ("nvidia-smi", "nvfwupd", "mlxfwmanager"):
        for call in calls(standin_folder, tool):
            argv = shlex.split(call)[1:]
            r = subprocess.run([str(standin_folder / tool), *argv], env={**os.environ, **env}, capture_output=True,
                               text=True)
            out[f"etc/standin/{tool}/{key(argv)}"] = r.stdout
    return out
