"""The rendered PXE chain boots for real: QEMU (TCG) runs qemu's iPXE ROM, which fetches the
rendered entry script, is sent to its node group's script by MAC and boots a Debian kernel
with a busybox initrd over HTTP. The initrd prints /proc/cmdline on the serial console,
which must be exactly the command line the group script carries.

- user mode: qemu's own BOOTP/TFTP (restrict=on; the provisioning subnet exists only inside
  qemu) and a guest forward from the provisioning server's HTTP port to a local server;
- dnsmasq: the rendered dnsmasq.conf serves DHCP and TFTP on a tap device in a network namespace
  the test creates, next to an HTTP server on the provisioning server's address; the node there
  is UEFI without qemu's iPXE ROM, so its firmware's PXE fetches the first stage (ipxe.efi) first.

Slow (emulator). Locally they skip when a tool is missing; with CI set they fail instead.
Pieces: scripts/deps.d/40-pxe.sh installs the tools and caches a bookworm kernel."""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from clusterdef.build import build_tree
from clusterdef.render.images import identities
from clusterdef.render.pxe import builds, host_pointer, kernel_cmdline, pointer_path
from clusterdef.resolve import resolve
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, ROOT, TODAY

CACHE = Path(os.environ.get("CLUSTERDEF_CACHE", ROOT / ".cache"))
MARKER = "CLUSTERDEF-PXE-INITRD"
OVMF_CODE = Path("/usr/share/OVMF/OVMF_CODE_4M.fd")
OVMF_VARS = Path("/usr/share/OVMF/OVMF_VARS_4M.fd")


def need(what: str, present: bool) -> None:
    """Skip locally, fail in CI (the pattern of conftest.need_scontrol)."""
    if present:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing in CI: scripts/install-test-deps (deps.d/40-pxe.sh) must provide it")
    pytest.skip(f"{what} is not installed (scripts/deps.d/40-pxe.sh installs it)")


def need_tools(*names: str) -> None:
    for name in names:
        need(name, shutil.which(name) is not None)


def cached_kernel() -> Path:
    kernels = sorted((CACHE / "pxe").glob("vmlinuz-*"))
    need(f"a cached Debian kernel under {CACHE / 'pxe'}", bool(kernels))
    return kernels[-1]


def render_example(name: str) -> tuple[dict[str, str], object]:
    result = validate_file(CLUSTERS / f"{name}.yaml", MATRICES, TODAY)
    assert result.ok, [f.message for f in result.findings]
    tree, _ = build_tree(result, ["pxe", "images"])
    resolved = resolve(result.definition, result.matrix, CLUSTERS)
    return tree, resolved


def write(tree: dict[str, str], root: Path, prefix: str = "") -> Path:
    for rel, text in tree.items():
        if rel.startswith(prefix):
            dest = root / rel[len(prefix):]
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)
    return root


def busybox_initrd(dest: Path, build: str = "") -> Path:
    """A gzip cpio with static busybox and an /init that prints the marker and /proc/cmdline
    (and `BUILD:<build>`, baked in, so a boot shows which artefact's initrd it loaded)."""
    need_tools("cpio")
    need("busybox-static", Path("/bin/busybox").exists())
    root = dest.parent / f"initrd-root{('-' + build) if build else ''}"
    (root / "bin").mkdir(parents=True)
    (root / "proc").mkdir()
    (root / "dev").mkdir()
    shutil.copy("/bin/busybox", root / "bin/busybox")
    os.symlink("busybox", root / "bin/sh")
    init = root / "init"
    init.write_text("#!/bin/busybox sh\n/bin/busybox mount -t proc proc /proc\n"
                    f"echo {MARKER}\n" + (f"echo BUILD:{build}\n" if build else "") +
                    "echo \"CMDLINE:$(/bin/busybox cat /proc/cmdline)\"\n"
                    "/bin/busybox poweroff -f\n")
    init.chmod(0o755)
    files = subprocess.run(["find", "."], cwd=root, capture_output=True, text=True, check=True).stdout
    with open(dest, "wb") as fh:
        cpio = subprocess.Popen(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE)
        out, _ = cpio.communicate("\n".join(sorted(files.split())).encode())
        assert cpio.returncode == 0
        import gzip
        fh.write(gzip.compress(out, compresslevel=1))
    return dest


def http_root(tmp: Path, tree: dict[str, str], resolved, kernel: Path, initrd: Path) -> Path:
    """What the provisioning server serves: ipxe/ (rendered) and images/<image>-<version>.*"""
    root = write(tree, tmp / "http", "pxe/")
    (root / "images").mkdir()
    for ident in identities(resolved).values():
        shutil.copy(kernel, root / "images" / f"{ident.artefact}.vmlinuz")
        shutil.copy(initrd, root / "images" / f"{ident.artefact}.initrd")
    return root


@contextlib.contextmanager
def serve(directory: Path):
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


def user_netdev(prov, node, tftp: Path, port: int) -> str:
    """qemu user networking that plays the provisioning network: DHCP hands the node its address,
    TFTP serves the first iPXE stage, and the provisioning server's HTTP port reaches our local server."""
    return (f"user,id=n0,restrict=on,net={prov.subnet},host={prov.gateway},dhcpstart={node.ipv4},"
            f"tftp={tftp},bootfile=boot.ipxe,"
            f"guestfwd=tcp:{prov.server}:{prov.http_port}-cmd:socat - TCP:127.0.0.1:{port}")


def qemu_command(console: Path, mac: str, netdev: str, uefi: bool, tmp: Path, memory: int = 512,
                 nic_rom: bool = True) -> list[str]:
    """nic_rom=False: the NIC without qemu's iPXE option ROM (`romfile=`), so the firmware's own PXE
    client (OVMF's network stack) boots, as on a real node whose firmware is not iPXE."""
    nic = f"virtio-net-pci,netdev=n0,mac={mac}" + ("" if nic_rom else ",romfile=,bootindex=0")
    cmd = ["qemu-system-x86_64", "-accel", "tcg", "-m", str(memory), "-smp", "1", "-nodefaults",
           "-display", "none", "-no-reboot", "-serial", f"file:{console}", "-boot", "n",
           "-netdev", netdev, "-device", nic]
    if uefi:
        need("OVMF (package ovmf)", OVMF_CODE.exists() and OVMF_VARS.exists())
        vars_copy = tmp / "OVMF_VARS.fd"
        shutil.copy(OVMF_VARS, vars_copy)
        cmd += ["-machine", "q35", "-drive", f"if=pflash,format=raw,readonly=on,file={OVMF_CODE}",
                "-drive", f"if=pflash,format=raw,file={vars_copy}"]
    return cmd


def wait_for(console: Path, pattern: str, proc: subprocess.Popen, timeout: float) -> str:
    """Console text once `pattern` (a regex) matches; fails with the console tail on timeout."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = console.read_text(errors="replace") if console.exists() else ""
        if re.search(pattern, text):
            return text
        if proc.poll() is not None:
            time.sleep(0.2)
            text = console.read_text(errors="replace") if console.exists() else ""
            if re.search(pattern, text):
                return text
            pytest.fail(f"VM exited (rc {proc.returncode}) before {pattern!r}; console tail:\n{text[-3000:]}")
        time.sleep(0.25)
    pytest.fail(f"no {pattern!r} within {timeout:.0f} s; console tail:\n{text[-3000:]}")


@contextlib.contextmanager
def running(cmd: list[str], log: Path):
    """A process in its own session, always killed with everything it started."""
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def booted_cmdline(console_text: str) -> str:
    lines = [ln for ln in console_text.splitlines() if ln.startswith("CMDLINE:")]
    assert lines, console_text[-2000:]
    return lines[-1][len("CMDLINE:"):].strip()


@pytest.fixture(scope="module")
def lab_boot(tmp_path_factory):
    need_tools("qemu-system-x86_64", "socat")
    need("iPXE ROMs (package ipxe-qemu)", Path("/usr/lib/ipxe/qemu/efi-virtio.rom").exists())
    kernel = cached_kernel()
    tmp = tmp_path_factory.mktemp("pxe-boot")
    tree, resolved = render_example("lab")
    initrd = busybox_initrd(tmp / "busybox.initrd")
    return tmp, tree, resolved, http_root(tmp, tree, resolved, kernel, initrd)


def _user_mode_boot(lab_boot, uefi: bool, group: str):
    tmp, tree, resolved, root = lab_boot
    node = resolved.nodes(group)[0]
    prov = resolved.definition.network.provisioning
    tftp = write({"boot.ipxe": tree["pxe/ipxe/boot.ipxe"]}, tmp / f"tftp-{uefi}")
    console = tmp / f"console-user-{uefi}.log"
    with serve(root) as port:
        netdev = user_netdev(prov, node, tftp, port)
        started = time.monotonic()
        with running(qemu_command(console, node.mac, netdev, uefi, tmp), tmp / f"qemu-user-{uefi}.log") as vm:
            text = wait_for(console, r"CMDLINE:.*\n", vm, timeout=240)
        took = time.monotonic() - started
    return text, took, kernel_cmdline(resolved, group)


@pytest.mark.slow
def test_user_mode_bios_boot_shows_the_rendered_cmdline(lab_boot):
    text, took, want = _user_mode_boot(lab_boot, uefi=False, group="train")
    assert MARKER in text
    assert booted_cmdline(text) == want, f"console:\n{text[-2000:]}"
    assert "clusterdef.group=train" in want and "clusterdef.set=2026.07-r580" in want
    print(f"BIOS user-mode boot to marker: {took:.1f} s")


@pytest.mark.slow
def test_user_mode_uefi_boot_shows_the_rendered_cmdline(lab_boot):
    text, took, want = _user_mode_boot(lab_boot, uefi=True, group="infer")
    assert MARKER in text
    # Under UEFI iPXE hands the EFI stub its load options as "<image name> <arguments>", and the
    # kernel keeps that first word: /proc/cmdline is the kernel's file name, then exactly the line.
    art = identities(lab_boot[2])["gpu-node"].artefact
    assert booted_cmdline(text) == f"{art}.vmlinuz {want}", f"console:\n{text[-2000:]}"
    print(f"UEFI user-mode boot to marker: {took:.1f} s")


NETNS_SCRIPT = r"""
set -eu
# the rendered tftp-root (/srv/tftp) on a tmpfs of this mount namespace only, holding the first
# iPXE stages of Debian's ipxe package
mount -t tmpfs tmpfs /srv
mkdir /srv/tftp
cp {first_stages} /srv/tftp/
ip link set lo up
ip tuntap add dev tap0 mode tap
ip addr add {server}/{prefix} dev tap0
ip link set tap0 up
cd {http}
{python} -m http.server --bind {server} {port} >{tmp}/http.log 2>&1 &
dnsmasq -k -C {conf} --user=root --pid-file={tmp}/dnsmasq.pid --dhcp-leasefile={tmp}/leases \
  --log-facility={tmp}/dnsmasq.log --enable-ra --dhcp-range=::,constructor:tap0,ra-only &
for i in $(seq 50); do
  {python} -c 'import socket; socket.create_connection(("{server}", {port}), 1)' 2>/dev/null && break
  sleep 0.1
done
exec {qemu}
"""


FIRST_STAGES = (Path("/usr/lib/ipxe/undionly.kpxe"), Path("/usr/lib/ipxe/ipxe.efi"))  # Debian package ipxe


@pytest.mark.slow
def test_dnsmasq_in_netns_firmware_pxe_chains_to_the_right_group_by_mac(lab_boot):
    """Firmware PXE end to end on the rendered dnsmasq.conf: a UEFI node whose NIC has no iPXE ROM
    (OVMF's own PXE client, client-arch 7) gets its fixed address and, over dnsmasq's TFTP,
    ipxe.efi (Debian's ipxe package); that iPXE asks again as user class iPXE, gets the entry
    script over HTTP, which sends its MAC to the infer group script, which boots the kernel.
    (BIOS's undionly.kpxe is served from the same tftp-root but not booted: SeaBIOS has no PXE
    client of its own, and qemu's only NIC ROMs are iPXE, which skips the first stage.)"""
    need_tools("dnsmasq", "unshare", "ip")
    need("the first iPXE stages (package ipxe)", all(p.exists() for p in FIRST_STAGES))
    if os.geteuid() != 0:
        need("root (network and mount namespace with a tap device)", False)
    tmp, tree, resolved, root = lab_boot
    node = list(resolved.nodes("infer"))[1]
    prov = resolved.definition.network.provisioning
    conf = write({"dnsmasq.conf": tree["pxe/dnsmasq.conf"]}, tmp / "dnsmasq") / "dnsmasq.conf"
    assert "tftp-root=/srv/tftp\n" in tree["pxe/dnsmasq.conf"]
    console = tmp / "console-netns.log"
    qemu = qemu_command(console, node.mac, "tap,id=n0,ifname=tap0,script=no,downscript=no", True, tmp, nic_rom=False)
    script = NETNS_SCRIPT.format(server=prov.server, prefix=prov.subnet.prefixlen, http=root,
                                 python=shutil.which("python3") or "python3", port=prov.http_port, tmp=tmp,
                                 conf=conf, qemu=" ".join(f"'{a}'" for a in qemu),
                                 first_stages=" ".join(str(p) for p in FIRST_STAGES))
    with running(["unshare", "--net", "--mount", "--", "bash", "-c", script], tmp / "netns.log") as proc:
        text = wait_for(console, r"CMDLINE:.*\n", proc, timeout=300)
    # iPXE under UEFI: the kernel's file name, then exactly the group's line (test_user_mode_uefi_...)
    art = identities(resolved)["gpu-node"].artefact
    assert booted_cmdline(text) == f"{art}.vmlinuz {kernel_cmdline(resolved, 'infer')}", f"console:\n{text[-2000:]}"
    log = (tmp / "dnsmasq.log").read_text()
    assert f"DHCPACK(tap0) {node.ipv4} {node.mac} {node.name}" in log, log[-3000:]
    # each DHCP exchange: its tags and the boot file dnsmasq sent, in order
    exchanges: dict[str, dict] = {}
    for m in re.finditer(r"dnsmasq-dhcp\[\d+\]: (\d+) (tags: .*|sent size: +\d+ option: 67 bootfile-name +\S+)", log):
        ex = exchanges.setdefault(m[1], {})
        ex["tags" if m[2].startswith("tags") else "file"] = m[2].split()[-1] if "bootfile" in m[2] else m[2]
    boots = list(dict.fromkeys((ex["tags"], ex["file"]) for ex in exchanges.values() if "file" in ex))
    # the firmware (UEFI x64, no iPXE user class) is sent the first stage, iPXE the entry script
    assert boots == [("tags: known, efi64, tap0", "ipxe.efi"),
                     ("tags: known, ipxe, efi64, tap0", f"http://{prov.server}/ipxe/boot.ipxe")], log[-3000:]
    assert "dnsmasq-tftp[" in log and f"sent /srv/tftp/ipxe.efi to {node.ipv4}" in log, log[-3000:]
    served = (tmp / "http.log").read_text()
    assert "GET /ipxe/boot.ipxe" in served and "GET /ipxe/groups/infer.ipxe" in served, served


def _lab_versions(tmp: Path):
    """The lab with image build v1 (2026.07.1), and the lab moved to v2 (2026.07.2) that keeps
    v1 published: the boot server during a rollout holds both."""
    from conftest import images_tree, keep_builds

    v1_file = tmp / "lab-v1.yaml"
    v1_file.write_text((CLUSTERS / "lab.yaml").read_text())
    v2_text = (CLUSTERS / "lab.yaml").read_text().replace('\n    version: "2026.07.1"\n', '\n    version: "2026.07.2"\n')
    v2_file = tmp / "lab-v2.yaml"
    v2_file.write_text(keep_builds(v2_text, images_tree(v1_file)))
    out = []
    for f in (v1_file, v2_file):
        result = validate_file(f, MATRICES, TODAY)
        assert result.ok, [x.message for x in result.findings]
        out.append((build_tree(result, ["pxe", "images"])[0], resolve(result.definition, result.matrix, CLUSTERS)))
    return out


@pytest.mark.slow
def test_canary_pointer_and_rollback_switch_exactly_one_host(lab_boot):
    """Two hosts of the stateless group `train` boot build v1 (the group default). The canary's
    boot pointer sends gpu001 to v2 while gpu002 stays on v1; the rollback pointer sends gpu001
    back to v1. The boot server is what a rollout leaves there: the running tree's entry and group
    scripts (defaults on v1), the new tree's build scripts and both artefacts (each initrd prints its
    build), and only the pointers written; both artefacts stay published throughout."""
    tmp0, _, _, _ = lab_boot
    tmp = tmp0 / "pointers"
    tmp.mkdir()
    kernel = cached_kernel()
    (t1, r1), (t2, r2) = _lab_versions(tmp)
    b1, b2 = identities(r1)["gpu-node"], identities(r2)["gpu-node"]
    assert b1.artefact != b2.artefact and b1.version == "2026.07.1" and b2.version == "2026.07.2"
    assert builds(r2, "gpu-node") == {"2026.07.2": b2, "2026.07.1": b1}
    root = write({k: v for k, v in t1.items() if not k.startswith("pxe/ipxe/images/")}, tmp / "http", "pxe/")
    write({k: v for k, v in t2.items() if k.startswith("pxe/ipxe/images/") or k == "pxe/published"},
          root, "pxe/")
    (root / "images").mkdir()
    for b in (b1, b2):
        shutil.copy(kernel, root / "images" / f"{b.artefact}.vmlinuz")
        busybox_initrd(root / "images" / f"{b.artefact}.initrd", b.artefact)
    published = (root / "published").read_text()
    nodes = {n.name: n for n in r2.nodes("train")}
    prov = r2.definition.network.provisioning
    tftp = write({"boot.ipxe": t1["pxe/ipxe/boot.ipxe"]}, tmp / "tftp")

    def boot_all(label: str, hosts: list[str]) -> dict[str, str]:
        """Boot `hosts` at once (one VM each); host -> the BUILD line its initrd printed, after
        checking the command line is exactly that build's for the group."""
        out = {}
        with serve(root) as port, contextlib.ExitStack() as stack:
            vms = {}
            for h in hosts:
                console = tmp / f"console-{label}-{h}.log"
                netdev = user_netdev(prov, nodes[h], tftp, port)
                vms[h] = (console, stack.enter_context(running(
                    qemu_command(console, nodes[h].mac, netdev, False, tmp, memory=256), tmp / f"qemu-{label}-{h}.log")))
            for h, (console, vm) in vms.items():
                text = wait_for(console, r"CMDLINE:.*\n", vm, timeout=240)
                build = re.findall(r"^BUILD:(\S+)", text, re.M)
                assert build, text[-2000:]
                out[h] = build[-1]
                want = b1 if build[-1] == b1.artefact else b2
                assert booted_cmdline(text) == kernel_cmdline(r2, "train", want), text[-2000:]
        for b in (b1, b2):  # both artefacts stay on the boot server and in its manifest
            assert (root / "images" / f"{b.artefact}.initrd").is_file() and b.artefact in published
        return out

    def point(host: str, build) -> None:
        n = nodes[host]
        dest = root / pointer_path(n.mac)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(host_pointer(r2, host, "train", n.mac, build))

    assert boot_all("v1", ["gpu001", "gpu002"]) == {"gpu001": b1.artefact, "gpu002": b1.artefact}
    point("gpu001", b2)  # the canary
    assert boot_all("canary", ["gpu001", "gpu002"]) == {"gpu001": b2.artefact, "gpu002": b1.artefact}
    point("gpu001", b1)  # the rollback drill
    assert boot_all("rollback", ["gpu001"]) == {"gpu001": b1.artefact}
