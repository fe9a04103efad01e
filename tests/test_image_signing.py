"""Signed node images, verified at boot (images.<name>.signing, minisign).

Debian's iPXE has no image trust (`imgverify`/`imgtrust` are not in /usr/lib/ipxe/*), so the check
runs in a verifier initrd that iPXE loads first: the rendered sign.sh (run here for real on the
artefacts) writes <artefact>.SHA256SUMS, signs it with minisign and packs the verifier; the rendered
build script loads the image initrd and both files under /clusterdef/. In QEMU (BIOS, qemu's iPXE
ROM, the rendered entry and group scripts over HTTP): the signed image boots (the image's own /init
prints the marker and the rendered command line), a tampered image and an unsigned one are refused
with the reason on the console and the image never runs. Three boots of a busybox initrd (~12 s each).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest
from ruamel.yaml import YAML

from clusterdef.build import build_tree
from clusterdef.render.images import identities
from clusterdef.render.pxe import kernel_cmdline
from clusterdef.resolve import resolve
from clusterdef.validate.pipeline import validate_file
from conftest import CLUSTERS, MATRICES, TODAY, dump_yaml
from test_pxe_boot import (MARKER, booted_cmdline, busybox_initrd, cached_kernel, need, need_tools, qemu_command,
                           running, serve, user_netdev, wait_for, write)


def _keypair(tmp):
    subprocess.run(["minisign", "-G", "-W", "-f", "-p", str(tmp / "k.pub"), "-s", str(tmp / "k.key")],
                   check=True, capture_output=True)
    return (tmp / "k.pub").read_text().splitlines()[1], tmp / "k.key"


def _signed_lab(tmp):
    pub, key = _keypair(tmp)
    data = YAML(typ="safe").load((CLUSTERS / "lab.yaml").read_text())
    data["images"]["gpu-node"]["signing"] = {"public_key": pub, "secret_key_file": str(key)}
    result = validate_file(dump_yaml(data, tmp / "lab.yaml"), MATRICES, TODAY)
    assert result.ok, [f.message for f in result.errors]
    tree = build_tree(result, ["pxe", "images"])[0]
    return tree, resolve(result.definition, result.matrix, CLUSTERS)


def test_signed_image_renders_the_verifier_chain(tmp_path):
    need_tools("minisign")
    tree, resolved = _signed_lab(tmp_path)
    art = identities(resolved)["gpu-node"].artefact
    script = tree[f"pxe/ipxe/images/train/{art}.ipxe"].splitlines()
    initrds = [ln for ln in script if ln.startswith("initrd ")]
    assert [ln.split()[1].rsplit("/", 1)[1] for ln in initrds] == [
        f"{art}.verify.initrd", f"{art}.initrd", f"{art}.SHA256SUMS", f"{art}.SHA256SUMS.minisig"]
    assert [ln.split()[2] for ln in initrds[1:]] == [
        "/clusterdef/image.initrd", "/clusterdef/SHA256SUMS", "/clusterdef/SHA256SUMS.minisig"]
    assert kernel_cmdline(resolved, "train").startswith(f"initrd={art}.verify.initrd ")
    assert 'sh "$here/sign.sh" "$out"' in tree["images/gpu-node/build.sh"]
    # the key by reference: the secret key's path, never its content
    assert (tmp_path / "k.key").read_text().splitlines()[1] not in "".join(tree.values())


@pytest.mark.slow
def test_node_boots_only_a_signed_untampered_image(tmp_path):
    need_tools("minisign", "zstd", "cpio", "qemu-system-x86_64", "socat")
    need("iPXE ROMs (package ipxe-qemu)", os.path.exists("/usr/lib/ipxe/qemu/pxe-virtio.rom"))
    kernel = cached_kernel()
    tree, resolved = _signed_lab(tmp_path)
    art = identities(resolved)["gpu-node"].artefact
    recipe = write(tree, tmp_path / "recipe", "images/gpu-node/")
    http = write(tree, tmp_path / "http", "pxe/")
    images = http / "images"
    images.mkdir()
    shutil.copy(kernel, images / f"{art}.vmlinuz")
    busybox_initrd(images / f"{art}.initrd")
    # the rendered sign.sh, for real: checksum file, signature, verifier initrd
    sign = subprocess.run(["sh", str(recipe / "sign.sh"), str(images)], capture_output=True, text=True, timeout=120)
    assert sign.returncode == 0, sign.stdout + sign.stderr
    sums = images / f"{art}.SHA256SUMS"
    ok = subprocess.run(["minisign", "-V", "-p", str(recipe / "verify/minisign.pub"), "-m", str(sums)],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and f"clusterdef {art}" in ok.stdout, ok.stdout + ok.stderr
    assert {ln.split()[1] for ln in sums.read_text().splitlines()} == {f"{art}.vmlinuz", f"{art}.initrd"}

    node = resolved.nodes("train")[0]
    prov = resolved.definition.network.provisioning
    tftp = write({"boot.ipxe": tree["pxe/ipxe/boot.ipxe"]}, tmp_path / "tftp")

    def boot(name: str) -> str:
        console = tmp_path / f"console-{name}.log"
        with serve(http) as port:
            netdev = user_netdev(prov, node, tftp, port)
            started = time.monotonic()
            with running(qemu_command(console, node.mac, netdev, False, tmp_path), tmp_path / f"qemu-{name}.log") as vm:
                text = wait_for(console, r"(CMDLINE:.*\n|clusterdef: REFUSING.*\n)", vm, timeout=240)
            print(f"{name}: {time.monotonic() - started:.1f} s")
        return text

    signed = boot("signed")
    assert f"clusterdef: image {art} verified" in signed and MARKER in signed, signed[-3000:]
    assert booted_cmdline(signed) == kernel_cmdline(resolved, "train")

    image = images / f"{art}.initrd"
    good = image.read_bytes()
    image.write_bytes(good[:-64] + bytes(b ^ 0xFF for b in good[-64:]))  # tampered after signing
    tampered = boot("tampered")
    assert "does not match its signed checksum" in tampered and MARKER not in tampered, tampered[-3000:]

    image.write_bytes(good)
    (images / f"{art}.SHA256SUMS.minisig").unlink()  # unsigned
    unsigned = boot("unsigned")
    assert f"clusterdef: REFUSING to boot image {art}: unsigned" in unsigned and MARKER not in unsigned, \
        unsigned[-3000:]
