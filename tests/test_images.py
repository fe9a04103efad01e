"""Image target: mkosi configurations pinned from the validated set, `mkosi summary` on
each, the first-boot baseline script run directly against faked probes, and (slow) a small
rendered image built with mkosi, packed as an initrd, PXE-booted under QEMU to its baseline
step: on-matrix once, and off-matrix with a faked driver version."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from clusterdef.build import build_tree
from clusterdef.knowledge.services import image_services
from clusterdef.render.images import BASELINE_DIR, SCRIPT, architectures, artefact, carried
from clusterdef.resolve import resolve
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, TODAY, dump_yaml
from standin_node import update
from test_pxe_boot import (CACHE, user_netdev, cached_kernel, kernel_cmdline, need, need_tools, qemu_command, running, serve,
                           wait_for, write)

EXAMPLES = ["lab", "estate", "gb200"]


def render_file(path: Path):
    result = validate_file(path, MATRICES, TODAY)
    assert result.ok, [(f.code, f.message) for f in result.findings]
    tree, _ = build_tree(result, ["pxe", "images"])
    return tree, resolve(result.definition, result.matrix, path.parent)


@pytest.fixture(scope="module", params=EXAMPLES)
def example(request):
    return request.param, *render_file(CLUSTERS / f"{request.param}.yaml")


def test_versions_come_from_the_set(example):
    name, tree, resolved = example
    c = resolved.set.components
    for image in resolved.definition.images:
        if image_services(resolved.definition, image) is not None:
            continue  # service images: test_service_image_carries_only_its_services
        pref = tree[f"images/{image}/mkosi.skeleton/etc/apt/preferences.d/clusterdef-nvidia.pref"]
        owned = "driver" in carried(resolved, image)  # not where the GPU Operator owns driver and toolkit
        assert (f"Pin: version {c.driver}-*" in pref) == owned
        assert f"Pin: version {c.cuda}-*" in pref
        assert f"Pin: version {c.nccl}-*+cuda13.0" in pref
        assert (f"Pin: version {c.container_toolkit}-*" in pref) == owned
        components = tree[f"images/{image}/mkosi.extra/{BASELINE_DIR}/components"]
        want = ([f"driver={c.driver}"] if owned else []) + [f"cuda={c.cuda}", f"nccl={c.nccl}"] + \
            ([f"container_toolkit={c.container_toolkit}"] if owned else []) + \
            ([f"slurm={c.slurm}"] if "slurm" in carried(resolved, image) else []) + \
            [f"{k}={getattr(c, k)}" for k in ("doca", "mft") if k in carried(resolved, image)]  # host packages
        assert components.splitlines() == want
        conf = tree[f"images/{image}/mkosi.conf"]
        img = resolved.definition.images[image]
        assert f"Output={artefact(resolved, image)}\n" in conf and f"ImageVersion={img.version}\n" in conf
        assert f"linux-image-{img.kernel}" in conf
        assert c.driver not in conf, "versions belong in the pin file, not the package list"


def test_service_image_carries_only_its_services():
    """docs/services.md: the lab's `mgmt` image (slurmctld, slurmdbd, boot server, subnet manager, Prometheus,
    Kubernetes control plane, etcd) has no NVIDIA repository, pin, package or health check; Slurm and
    Kubernetes are pinned from the set as on the GPU images, with the site build's package names; its first
    boot compares only what the hosts run."""
    tree, resolved = render_file(CLUSTERS / "lab.yaml")
    c = resolved.set.components
    root = "images/mgmt/"
    mine = {p[len(root):]: t for p, t in tree.items() if p.startswith(root)}
    assert not [p for p in mine if "nvidia" in p or "nodecheck" in p]
    # the recipe (the probe and the first-boot script are the same generic scripts on every image)
    text = "\n".join(t for p, t in mine.items() if p.startswith(("mkosi.conf", "mkosi.skeleton", "build.sh")))
    for gpu in ("cuda", "libnccl2", "nvidia-driver", "nvidia-container-toolkit", "nvidia-fabricmanager",
                "linux-headers"):
        assert gpu not in text.replace("clusterdef", ""), gpu
    pref = mine["mkosi.skeleton/etc/apt/preferences.d/clusterdef-set.pref"]
    assert f"Package: slurm-smd-slurmctld slurm-smd-client slurm-smd-slurmdbd\nPin: version {c.slurm}-*\n" in pref
    assert f"Package: kubelet kubeadm kubectl\nPin: version {c.kubernetes.lstrip('v')}-*\n" in pref
    assert "slurm-smd-slurmd " not in pref, "a controller is not a Slurm node"
    conf = mine["mkosi.conf"]
    for p in ("dnsmasq", "ipxe", "opensm", "prometheus", "etcd-server", "munge", "mariadb-server"):
        assert f"        {p}\n" in conf, p
    # OpenSM drives the HCA: DOCA-OFED and MFT come with the subnet manager
    assert "doca-ofed" in mine["mkosi.conf.d/60-set.conf"]
    assert mine[f"mkosi.extra/{BASELINE_DIR}/components"].splitlines() == [
        f"slurm={c.slurm}", f"kubelet={c.kubernetes.lstrip('v')}", f"doca={c.doca}", f"mft={c.mft}"]
    # an image of slurmctld alone carries neither Kubernetes nor DOCA
    assert carried(resolved, "gpu-node").keys() >= {"driver", "cuda", "nccl"}
    from clusterdef.knowledge.images import service_components
    assert service_components(("slurmctld",)).keys() == {"slurm"}
    assert service_components(("etcd", "prometheus")) == {}


def test_firmware_baseline_per_hardware_type(example):
    name, tree, resolved = example
    d, vs = resolved.definition, resolved.set
    for image in d.images:
        groups = tree[f"images/{image}/mkosi.extra/{BASELINE_DIR}/groups"].splitlines()
        assert groups == sorted(f"{g}={grp.hardware}" for g, grp in d.nodes.items() if grp.image == image)
        for hw in {line.split("=")[1] for line in groups}:
            lines = tree[f"images/{image}/mkosi.extra/{BASELINE_DIR}/hardware/{hw}"].splitlines()
            platform = d.hardware[hw].platform
            assert lines == [f"{c}={vs.firmware[platform][c]}" for c in d.hardware[hw].firmware]


def need_mkosi() -> str:
    need_tools("mkosi")
    return shutil.which("mkosi")


def test_mkosi_summary_accepts_every_image(example, tmp_path):
    need_mkosi()
    name, tree, resolved = example
    write(tree, tmp_path)
    for image, img in resolved.definition.images.items():
        r = subprocess.run(["mkosi", "summary"], cwd=tmp_path / "images" / image, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        summary = r.stdout + r.stderr  # mkosi 14 prints the summary on stderr
        assert f"Release: {img.release}" in summary
        # mkosi 14 builds for the image's architecture (uname -m names), from ports.ubuntu.com for arm64
        assert f"Architecture: {architectures()[img.architecture]['mkosi']}\n" in summary
        if img.architecture == "arm64" and img.distribution == "ubuntu":
            assert "Mirror: http://ports.ubuntu.com" in summary
        assert f"Image Version: {img.version}" in summary
        services = image_services(resolved.definition, image)
        assert ("libnccl2" in summary) == (services is None), "drop-in 50-nvidia.conf not read"
        assert "ipmitool" in summary and "mft" in summary, "drop-in 60-set.conf not read"
        if services is not None:  # a service image: its daemons, no NVIDIA stack (docs/services.md)
            assert "slurm-smd-slurmctld" in summary and "etcd-server" in summary and "cuda" not in summary
            continue
        if "driver" in carried(resolved, image):
            assert "nvidia-container-toolkit" in summary and f"linux-headers-{img.kernel}" in summary
        else:
            assert "nvidia-container-toolkit" not in summary and "nvidia-dkms-open" not in summary
        assert ("slurm-smd-slurmd" in summary) == ("slurm" in carried(resolved, image))
        assert ("kubelet" in summary) == ("kubernetes" in carried(resolved, image))


def test_mkosi_summary_rejects_an_unknown_key(tmp_path):
    """The summary check can fail: a misspelt key is rc 2 (so the tests above mean something)."""
    need_mkosi()
    tree, _ = render_file(CLUSTERS / "lab.yaml")
    write(tree, tmp_path)
    conf = tmp_path / "images/gpu-node/mkosi.conf"
    conf.write_text(conf.read_text().replace("WithDocs=no", "WithDoc=no"))
    r = subprocess.run(["mkosi", "summary"], cwd=conf.parent, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0


# -- the first-boot baseline script, run directly ---------------------------------------------

@pytest.fixture
def baseline(tmp_path):
    """The lab image's first-boot step, run directly on a stand-in HGX H100 node (stand-in nvidia-smi,
    nvfwupd, mlxfwmanager, dpkg-query, slurmd first on PATH, printing the real tools' output shapes),
    reading through the image's own probe."""
    from standin_node import dgx_h100, install

    tree, resolved = render_file(CLUSTERS / "lab.yaml")
    write(tree, tmp_path / "out")
    image = tmp_path / "out/images/gpu-node/mkosi.extra"
    vs = resolved.set
    node = install(tmp_path / "node", dgx_h100(vs, "hgx-h100"))
    sysfs = tmp_path / "sysroot"
    (sysfs / "sys/module/nvidia").mkdir(parents=True)
    (sysfs / "sys/module/nvidia/version").write_text(vs.components.driver + "\n")
    cmdline = tmp_path / "cmdline"
    cmdline.write_text(kernel_cmdline(resolved, "train") + "\n")
    env = {"PATH": f"{node}:/usr/bin:/bin", "CLUSTERDEF_BASELINE_DIR": str(image / BASELINE_DIR),
           "CLUSTERDEF_STATE_DIR": str(tmp_path / "state"), "CLUSTERDEF_PROBE": str(image / "usr/lib/clusterdef/probe"),
           "CLUSTERDEF_CMDLINE": str(cmdline), "CLUSTERDEF_PROBE_SYSFS": str(sysfs)}

    def run(**extra):
        return subprocess.run(["sh", str(image / SCRIPT)], env={**env, **extra}, capture_output=True, text=True,
                              timeout=60)
    return run, node, tmp_path / "state", cmdline, resolved


# 1 BMC + 1 SBIOS + 8 GPU VBIOS + 4 NVSwitches + 8 ConnectX-7 + driver, CUDA, NCCL, toolkit, slurmd, DOCA-OFED, MFT
HGX_CHECKS = 1 + 1 + 8 + 4 + 8 + 7


def test_baseline_on_matrix(baseline):
    run, node, state, _, resolved = baseline
    r = run()
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"is on-matrix for set 2026.07-r580: {HGX_CHECKS} check(s) passed" in r.stdout
    assert (state / "on-matrix").is_file() and not (state / "off-matrix").exists()


def test_baseline_off_matrix_driver_refuses_registration(baseline):
    run, node, state, _, _ = baseline
    r = run(CLUSTERDEF_PROBE_SYSFS=str(node))  # no loaded module there: nvidia-smi's per-GPU driver version
    assert r.returncode == 0, r.stdout
    update(node, lambda n: n.update(driver="580.95.05"))
    r = run(CLUSTERDEF_PROBE_SYSFS=str(node))
    assert r.returncode == 1
    assert ("clusterdef-baseline: OFF-MATRIX driver gpu0(00000000:18:00.0): node runs 580.95.05, "
            "set 2026.07-r580 pins 580.126.20") in r.stdout
    assert "refusing to register" in r.stdout
    assert (state / "off-matrix").read_text().startswith(
        "driver gpu0(00000000:18:00.0) running=580.95.05 pinned=580.126.20\n")
    assert not (state / "on-matrix").exists()


def test_baseline_one_gpu_and_one_hca_out_of_step(baseline):
    """Every device is compared: the seventh GPU's VBIOS and the fourth HCA are named with both versions."""
    run, node, state, _, _ = baseline
    update(node, lambda n: (n["gpus"][6].update(vbios="96.00.99.00.01"), n["hcas"][3].update(fw="28.46.1006")))
    r = run()
    assert r.returncode == 1, r.stdout
    assert ("OFF-MATRIX gpu_vbios gpu6(00000000:ba:00.0): node runs 96.00.99.00.01, set 2026.07-r580 pins "
            "96.00.68.00.01") in r.stdout
    assert ("OFF-MATRIX cx7 /dev/mst/mt4129_pciconf3: node runs 28.46.1006, set 2026.07-r580 pins 28.47.2682"
            in r.stdout)
    assert f"2 of {HGX_CHECKS} check(s) failed" in r.stdout
    assert "sbios" not in (state / "off-matrix").read_text()


def test_baseline_missing_probe_tool_is_off_matrix(baseline):
    """nvfwupd absent: BMC, SBIOS and NVSwitch are unknown, off-matrix with the probe's reason."""
    run, node, state, _, _ = baseline
    (node / "nvfwupd").unlink()
    r = run()
    assert r.returncode == 1
    assert ("OFF-MATRIX nvswitch: node runs unknown (nvfwupd not installed), set 2026.07-r580 pins 96.10.38.00.01"
            in r.stdout)
    assert "OFF-MATRIX bmc: node runs unknown (nvfwupd not installed)" in r.stdout


def test_baseline_doca_ofed_and_mft_from_the_set(baseline):
    """DOCA-OFED and MFT are read with dpkg-query (doca-ofed, mft) and compared with the set: a build
    suffix to the pinned release passes (the source pins `{version}*`), another release or an
    uninstalled package fails naming the component and both versions (unknown: fail closed)."""
    run, node, state, _, resolved = baseline
    c = resolved.set.components
    update(node, lambda n: n["packages"].update({"doca-ofed": f"{c.doca}.1", "mft": f"1:{c.mft}"}))
    r = run()
    assert r.returncode == 0 and f"{HGX_CHECKS} check(s) passed" in r.stdout, r.stdout
    update(node, lambda n: n["packages"].update({"doca-ofed": "3.1.0-091000", "mft": f"{c.mft}0"}))
    r = run()
    assert r.returncode == 1, r.stdout
    assert (f"OFF-MATRIX doca doca-ofed: node runs 3.1.0-091000, set {resolved.set.name} pins {c.doca}"
            in r.stdout), r.stdout
    assert f"OFF-MATRIX mft mft: node runs {c.mft}0, set {resolved.set.name} pins {c.mft}" in r.stdout, r.stdout
    assert f"2 of {HGX_CHECKS} check(s) failed" in r.stdout
    update(node, lambda n: n["packages"].pop("mft"))
    r = run()
    assert r.returncode == 1
    assert (f"OFF-MATRIX mft: node runs unknown (no installed package matches mft), set {resolved.set.name} "
            f"pins {c.mft}") in r.stdout, r.stdout


def test_baseline_missing_gpu_is_off_matrix(baseline):
    run, node, state, _, _ = baseline
    update(node, lambda n: n["gpus"].pop())
    r = run()
    assert r.returncode == 1
    assert "OFF-MATRIX gpu_vbios: node runs 7 of 8 devices readable, set 2026.07-r580 pins 96.00.68.00.01 on all 8" \
        in r.stdout


def test_baseline_wrong_set_or_group_on_cmdline(baseline):
    run, node, state, cmdline, resolved = baseline
    cmdline.write_text(kernel_cmdline(resolved, "train").replace("clusterdef.set=2026.07-r580",
                                                                 "clusterdef.set=2025.10-r580")
                       .replace("clusterdef.group=train", "clusterdef.group=login"))
    r = run()
    assert r.returncode == 1
    assert "OFF-MATRIX set: node runs 2025.10-r580, set 2026.07-r580 pins 2026.07-r580" in r.stdout
    assert "OFF-MATRIX group: node runs login" in r.stdout


def test_baseline_on_a_stand_in_dgx(tmp_path):
    """First boot of the estate's DGX image on a stand-in DGX H100 (8 GPUs, 4 NVSwitches, 10 HCAs: 8
    ConnectX-7 and 2 BlueField-3): passes on the set; one GPU's VBIOS, one BlueField-3, or a missing
    probe tool fails naming the device and both versions."""
    from standin_node import dgx_h100, install

    tree, resolved = render_file(CLUSTERS / "estate.yaml")
    write(tree, tmp_path / "out")
    image = tmp_path / "out/images/gpu-slurm/mkosi.extra"
    vs = resolved.set
    node = install(tmp_path / "node", dgx_h100(vs))
    sysfs = tmp_path / "sysroot"
    (sysfs / "sys/module/nvidia").mkdir(parents=True)
    (sysfs / "sys/module/nvidia/version").write_text(vs.components.driver + "\n")
    cmdline = tmp_path / "cmdline"
    cmdline.write_text(kernel_cmdline(resolved, "su01") + "\n")
    env = {"PATH": f"{node}:/usr/bin:/bin", "CLUSTERDEF_BASELINE_DIR": str(image / BASELINE_DIR),
           "CLUSTERDEF_STATE_DIR": str(tmp_path / "state"), "CLUSTERDEF_PROBE": str(image / "usr/lib/clusterdef/probe"),
           "CLUSTERDEF_CMDLINE": str(cmdline), "CLUSTERDEF_PROBE_SYSFS": str(sysfs)}

    def run():
        return subprocess.run(["sh", str(image / SCRIPT)], env=env, capture_output=True, text=True, timeout=60)

    fw = vs.firmware["dgx-h100"]
    r = run()
    # bmc, sbios, 8 VBIOS, 4 NVSwitch, 8 CX7, 2 BF3, driver, CUDA, NCCL, toolkit, slurmd, DOCA-OFED, MFT
    assert r.returncode == 0 and "on-matrix for set 2026.07-r580: 31 check(s) passed" in r.stdout, r.stdout
    update(node, lambda n: (n["gpus"][2].update(vbios="96.00.74.00.01"), n["hcas"][9].update(fw="32.46.3048")))
    r = run()
    assert r.returncode == 1
    assert (f"OFF-MATRIX gpu_vbios gpu2(00000000:3a:00.0): node runs 96.00.74.00.01, set 2026.07-r580 pins "
            f"{fw['gpu_vbios']}") in r.stdout
    assert f"OFF-MATRIX bf3 /dev/mst/mt41692_pciconf1: node runs 32.46.3048, set 2026.07-r580 pins {fw['bf3']}" \
        in r.stdout
    assert "2 of 31 check(s) failed" in r.stdout
    update(node, lambda n: (n["gpus"][2].update(vbios=fw["gpu_vbios"]), n["hcas"][9].update(fw=fw["bf3"])))
    (node / "mlxfwmanager").unlink()
    r = run()
    assert r.returncode == 1
    assert f"OFF-MATRIX cx7: node runs unknown (mlxfwmanager (MFT) not installed), set 2026.07-r580 pins {fw['cx7']}" \
        in r.stdout
    assert "OFF-MATRIX bf3: node runs unknown (mlxfwmanager (MFT) not installed)" in r.stdout


def test_baseline_script_is_posix_sh(baseline):
    """dash -n (and busybox sh -n where present) accept it: nodes run it with /bin/sh."""
    run, *_ = baseline
    tree, _ = render_file(CLUSTERS / "lab.yaml")
    text = tree[f"images/gpu-node/mkosi.extra/{SCRIPT}"]
    for sh in ("dash", "busybox"):
        path = shutil.which(sh)
        if path:
            args = [path, "sh", "-n"] if sh == "busybox" else [path, "-n"]
            r = subprocess.run(args, input=text, capture_output=True, text=True)
            assert r.returncode == 0, (sh, r.stderr)


# -- mkosi build + PXE boot -------------------------------------------------------------------

def small_image_definition(lab: dict, tmp: Path, kver: str, repo: str) -> Path:
    """The lab with its image switched to Debian bookworm (what this machine can reach) and its site
    Slurm repository pointed at the local stand-in repository."""
    img = lab["images"]["gpu-node"]
    img.update({"distribution": "debian", "release": "bookworm", "kernel": kver, "packages": [],
                "repositories": {"slurm-site": repo}})
    return dump_yaml(lab, tmp / "lab-small.yaml")


@pytest.fixture(scope="module")
def built_image(tmp_path_factory, lab_data):
    """Build the rendered mkosi image with the set's packages: driver, CUDA, NCCL, toolkit, slurmd,
    kubelet/kubeadm, DOCA-OFED, MFT and nvfwupd from a local stand-in repository (tests/standin_repo.py;
    every component there at the set's version, an older and a newer one), ipmitool and infiniband-diags
    from Debian. The rendered package lists (50-nvidia.conf, 60-set.conf) and pin files are used as
    rendered; only the repositories are swapped for the stand-in (NVIDIA's, pkgs.k8s.io and DOCA's are
    unreachable here). Left out: the kernel and its headers (the cached kernel is used; the headers
    would pull a compiler for DKMS, which has no real driver source to build here)."""
    import copy

    from standin_repo import build as build_repo

    need_mkosi()
    need_tools("zstd", "cpio", "unshare", "qemu-system-x86_64", "socat", "dpkg-deb")
    if os.geteuid() != 0:
        need("root (mkosi build)", False)
    kernel = cached_kernel()
    kver = kernel.name[len("vmlinuz-"):]
    tmp = tmp_path_factory.mktemp("mkosi")
    repo = tmp / "standin-repo"
    repo.mkdir()
    # Served over HTTP like the site's repository (apt fetches into the image's cache; a file: URI
    # would leave dpkg, chrooted into the image, looking for the .deb at a host path).
    with serve(repo) as port:
        url = f"http://127.0.0.1:{port}/"
        tree, resolved = render_file(small_image_definition(copy.deepcopy(lab_data), tmp, kver, url))
        build_repo(repo, resolved.set, "debian")
        write(tree, tmp / "out")
        src = tmp / "out/images/gpu-node"
        apt = src / "mkosi.skeleton/etc/apt/sources.list.d"
        site = apt / "clusterdef-set.list"
        assert f"{url} ./" in site.read_text()  # the image's site Slurm repository, as declared
        for lst in apt.glob("clusterdef-*.list"):
            lst.unlink()
        # NVIDIA's, pkgs.k8s.io and DOCA's repositories: the stand-in offers their packages
        (apt / "clusterdef-standin.list").write_text(f"deb [trusted=yes] {url} ./\n")
        (CACHE / "mkosi").mkdir(parents=True, exist_ok=True)
        artefacts = tmp / "artefacts"
        env = {**os.environ, "KERNEL": str(kernel),
               "MKOSI_ARGS": f"--package=!linux-image-{kver} --package=!linux-headers-{kver} "
                             f"--cache={CACHE / 'mkosi'} --nspawn-keep-unit"}
        started = time.monotonic()
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            "mkdir -p /run/systemd/nspawn && mount -t tmpfs tmpfs /run/systemd/nspawn && "
                            f"sh build.sh {artefacts}"], cwd=src, env=env, capture_output=True, text=True,
                           timeout=900)
    took = time.monotonic() - started
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    art = artefact(resolved, "gpu-node")
    initrd = artefacts / f"{art}.initrd"
    assert initrd.stat().st_size < 120 * 2**20, f"image too large: {initrd.stat().st_size} bytes"
    root = src / art if (src / art).is_dir() else src / "mkosi.output" / art
    installed = subprocess.run(["dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W", "-f", "${Package}=${Version}\n"],
                               capture_output=True, text=True, check=True).stdout.split()
    shutil.rmtree(root, ignore_errors=True)
    print(f"mkosi build + pack: {took:.1f} s, initrd {initrd.stat().st_size / 2**20:.1f} MiB")
    return tmp, tree, resolved, artefacts, art, dict(p.split("=", 1) for p in installed)


def files_cpio(files: dict[str, str]) -> bytes:
    """A gzip cpio with the given files (relative paths), appended to the image's initrd."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        names: set[str] = set()
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
            parts = Path(rel).parts
            names.update(str(Path(*parts[:i])) for i in range(1, len(parts) + 1))
        r = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root,
                           input="\n".join(sorted(names, key=lambda n: (n.count("/"), n))).encode(),
                           capture_output=True, check=True)
    return gzip.compress(r.stdout)


def boot_image(built, files: dict[str, str], tag: str) -> str:
    tmp, tree, resolved, artefacts, art, _ = built
    root = write(tree, tmp / f"http-{tag}", "pxe/")
    (root / "images").mkdir()
    shutil.copy(artefacts / f"{art}.vmlinuz", root / "images")
    with open(root / "images" / f"{art}.initrd", "wb") as fh:
        fh.write((artefacts / f"{art}.initrd").read_bytes())
        fh.write(files_cpio(files))
    node = resolved.nodes("train")[0]
    prov = resolved.definition.network.provisioning
    tftp = write({"boot.ipxe": tree["pxe/ipxe/boot.ipxe"]}, tmp / f"tftp-{tag}")
    console = tmp / f"console-{tag}.log"
    with serve(root) as port:
        netdev = user_netdev(prov, node, tftp, port)
        started = time.monotonic()
        with running(qemu_command(console, node.mac, netdev, False, tmp, memory=1536), tmp / f"qemu-{tag}.log") as vm:
            text = wait_for(console, r"clusterdef-baseline: node .* (on-matrix|OFF-MATRIX) .*\n", vm, timeout=300)
        print(f"{tag}: PXE boot of the mkosi image to its baseline verdict: {time.monotonic() - started:.1f} s")
    return text


def _tool_answers(built, tmp: Path, change=None) -> dict[str, str]:
    """What the packaged stand-in tools answer on the booted node: the stand-in HGX node's outputs for
    exactly the calls the image's probe makes (tests/standin_repo.py)."""
    from standin_node import dgx_h100, install
    from standin_repo import answers

    _, tree, resolved, *_ = built
    node = dgx_h100(resolved.set, "hgx-h100")
    if change:
        change(node)
    folder = install(tmp, node)
    probe = tmp / "probe"
    probe.write_text(tree[f"images/gpu-node/mkosi.extra/{PROBE_PATH}"])
    tools = tree[f"images/gpu-node/mkosi.extra/{BASELINE_DIR}/tools"].split()
    return answers(folder, probe, ["driver", *tools])


PROBE_PATH = "usr/lib/clusterdef/probe"


@pytest.mark.slow
def test_mkosi_image_carries_the_set(built_image):
    """The built image holds the set's version of every component, picked by the rendered pins from a
    repository that also offers older and newer ones; and the probe, nodecheck and first boot are
    executable where the unit and slurm.conf point."""
    installed = built_image[5]
    c = built_image[2].set.components
    want = {"nvidia-driver-cuda": f"{c.driver}-1", "nvidia-kernel-open-dkms": f"{c.driver}-1",
            "nvidia-fabricmanager": f"{c.driver}-1", "cuda-libraries-13-0": f"{c.cuda}-1",
            "libnccl2": f"{c.nccl}-1+cuda13.0", "nvidia-container-toolkit": f"{c.container_toolkit}-1",
            "slurm-smd-slurmd": f"{c.slurm}-1", "kubelet": f"{c.kubernetes}-1.1", "kubeadm": f"{c.kubernetes}-1.1",
            "doca-ofed": c.doca, "mft": c.mft}
    assert {p: installed.get(p) for p in want} == want
    assert "ipmitool" in installed and "infiniband-diags" in installed and "nvfwupd" in installed
    # slurmd within slurmctld's window: slurmctld runs the set's release; slurmd's major is the same or
    # one slurmctld's release accepts (matrices/compat/slurm-releases.yaml compatible_prior)
    resolved = built_image[2]
    slurmd = ".".join(installed["slurm-smd-slurmd"].split("-")[0].split(".")[:2])
    ctld = resolved.matrix.compat.slurm_release(resolved.set.slurm_major)
    assert ctld is not None and (slurmd == ctld.major or slurmd in ctld.compatible_prior), (slurmd, ctld)


# The off-matrix verdict (one GPU's VBIOS, the driver) is proven on the same first-boot script run
# directly on stand-in nodes above; booting a second image under QEMU for it cost CI minutes it
# does not have (the whole run must stay under 30 on 2 cores).
@pytest.mark.slow
def test_mkosi_image_boots_on_matrix(built_image, tmp_path):
    text = boot_image(built_image, _tool_answers(built_image, tmp_path / "node"), "on")
    # bmc, sbios, 8 VBIOS, 4 NVSwitches, 8 ConnectX-7; CUDA, NCCL, toolkit from dpkg; slurmd -V; and the
    # driver on each of the 8 GPUs (no loaded module under QEMU: nvidia-smi's per-GPU driver version)
    assert f"is on-matrix for set 2026.07-r580: {HGX_CHECKS + 7} check(s) passed" in text, text[-3000:]
    assert "OFF-MATRIX" not in text
