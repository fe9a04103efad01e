"""PXE target: the rendered dnsmasq configuration passes `dnsmasq --test` for both examples,
and the iPXE scripts map every known MAC to its group's versioned image and command line."""

from __future__ import annotations

import copy

import re
import shutil
import subprocess

import pytest

from clusterdef.render import pxe
from clusterdef.render.images import identities
from conftest import CLUSTERS, dump_yaml
from test_images import render_file
from test_pxe_boot import need_tools

EXAMPLES = ["lab", "estate"]


@pytest.fixture(scope="module", params=EXAMPLES)
def example(request):
    return request.param, *render_file(CLUSTERS / f"{request.param}.yaml")


def dnsmasq_test(text: str, tmp_path) -> subprocess.CompletedProcess:
    need_tools("dnsmasq")
    conf = tmp_path / "dnsmasq.conf"
    conf.write_text(text)
    return subprocess.run([shutil.which("dnsmasq"), "--test", "-C", str(conf)], capture_output=True, text=True,
                          timeout=60)


def test_dnsmasq_accepts_the_rendered_config(example, tmp_path):
    name, tree, _ = example
    r = dnsmasq_test(tree["pxe/dnsmasq.conf"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "syntax check OK" in r.stderr + r.stdout


def test_dnsmasq_test_rejects_a_broken_config(tmp_path):
    """`dnsmasq --test` is a real check: a misspelt option fails it."""
    tree, _ = render_file(CLUSTERS / "lab.yaml")
    r = dnsmasq_test(tree["pxe/dnsmasq.conf"].replace("dhcp-userclass=", "dhcp-user-class="), tmp_path)
    assert r.returncode != 0


def test_every_known_mac_has_one_host_line_and_one_label(example):
    name, tree, resolved = example
    conf, boot = tree["pxe/dnsmasq.conf"], tree["pxe/ipxe/boot.ipxe"]
    hosts = re.findall(r"^dhcp-host=(\S+)$", conf, re.M)
    labels = re.findall(r"^:mac-(\S+)$", boot, re.M)
    nodes = [n for g in resolved.definition.nodes for n in resolved.nodes(g) if n.mac]
    assert hosts == [f"{n.mac},{n.ipv4},{n.name},infinite" for n in nodes]
    assert labels == [n.mac.replace(":", "-") for n in nodes]
    assert len(set(labels)) == len(labels)


def test_labels_fall_through_to_their_own_group(example):
    """Between one group's chain and the next, only that group's MACs."""
    name, tree, resolved = example
    boot = tree["pxe/ipxe/boot.ipxe"].splitlines()
    group_of = {n.mac.replace(":", "-"): g for g in resolved.definition.nodes for n in resolved.nodes(g)}
    pending = []
    for line in boot:
        if line.startswith(":mac-"):
            pending.append(line[len(":mac-"):])
        elif line.startswith("chain "):
            g = re.search(r"/ipxe/groups/([a-z0-9-]+)\.ipxe$", line)[1]
            assert pending and all(group_of[m] == g for m in pending), (g, pending[:3])
            pending = []
    assert pending == []


def test_group_scripts_carry_the_versioned_image_and_cmdline(example):
    name, tree, resolved = example
    d = resolved.definition
    scripts = {k for k in tree if k.startswith("pxe/ipxe/groups/")}
    assert scripts == {f"pxe/ipxe/groups/{g}.ipxe" for g in d.nodes}, "one default per group, none per host"
    assert not [k for k in tree if k.startswith("pxe/ipxe/hosts/")], "no boot pointers unless declared"
    ids = identities(resolved)
    for g, grp in d.nodes.items():
        img = d.images[grp.image]
        art = f"{grp.image}-{img.version}-{resolved.set.name}-{ids[grp.image].digest}"
        assert art == ids[grp.image].artefact
        # the build's own script (what a boot pointer chains to) boots exactly the same
        build = tree[f"pxe/ipxe/images/{g}/{art}.ipxe"]
        script = tree[f"pxe/ipxe/groups/{g}.ipxe"]
        cmdline = pxe.kernel_cmdline(resolved, g)
        assert f"kernel http://{d.network.provisioning.server}/images/{art}.vmlinuz {cmdline}\n" in script
        assert f"initrd http://{d.network.provisioning.server}/images/{art}.initrd\n" in script
        assert script.split("# Rendered by clusterdef")[1] == build.split("# Rendered by clusterdef")[1]
        assert cmdline.split() == [f"initrd={art}.initrd", *img.kernel_cmdline, f"clusterdef.image={art}",
                                   f"clusterdef.set={resolved.set.name}", f"clusterdef.group={g}",
                                   f"clusterdef.server=http://{d.network.provisioning.server}"]


def test_estate_tree_stays_small():
    tree, resolved = render_file(CLUSTERS / "estate.yaml")
    pxe_files = [k for k in tree if k.startswith("pxe/")]
    # entry script, dnsmasq.conf, manifest; per group its default and its build's script: 32 groups, not 4,096 hosts
    assert len(pxe_files) == 3 + 2 * len(resolved.definition.nodes)
    assert sum(len(tree[k]) for k in pxe_files) < 600_000


def test_new_image_version_is_a_new_artefact(lab, tmp_path):
    lab["images"]["gpu-node"]["version"] = "2026.07.2"
    lab["network"]["provisioning"]["http_port"] = 8080
    tree, resolved = render_file(dump_yaml(lab, tmp_path / "lab.yaml"))
    script = tree["pxe/ipxe/groups/train.ipxe"]
    art = identities(resolved)["gpu-node"].artefact
    assert art.startswith("gpu-node-2026.07.2-2026.07-r580-")
    assert f"http://10.20.0.2:8080/images/{art}.vmlinuz initrd={art}.initrd" in script
    assert "clusterdef.server=http://10.20.0.2:8080" in script
    assert "dhcp-boot=tag:ipxe,http://10.20.0.2:8080/ipxe/boot.ipxe" in tree["pxe/dnsmasq.conf"]
    assert f"Output={art}\n" in tree["images/gpu-node/mkosi.conf"]
    assert f"artefact={art}\n" in tree["images/gpu-node/identity"]


def test_discovering_group_boots_unknown_macs(lab, tmp_path):
    # the discovering group on Ethernet only: an InfiniBand group's ports are listed by GUID in the shared
    # partition, which a group whose nodes are unknown cannot give (port-guid-missing)
    hw = copy.deepcopy(lab["hardware"]["hgx-h100"])
    hw["nics"] = [n for n in hw["nics"] if n["kind"] != "infiniband"]
    lab["hardware"]["hgx-h100-eth"] = hw
    lab["nodes"]["infer"]["hardware"] = "hgx-h100-eth"
    lab["nodes"]["infer"]["addressing"]["mac"] = {"source": "discover"}
    tree, _ = render_file(dump_yaml(lab, tmp_path / "lab.yaml"))
    boot = tree["pxe/ipxe/boot.ipxe"]
    unknown = boot[boot.index(":unknown"):]
    assert "chain --replace --autofree http://10.20.0.2/ipxe/groups/infer.ipxe" in unknown
    assert "mac-52-54-00-20-00-31" not in boot
    assert "52:54:00:20:00:31" not in tree["pxe/dnsmasq.conf"]
    assert "dhcp-range=10.20.0.200,10.20.0.250,255.255.255.0,1h" in tree["pxe/dnsmasq.conf"]


def test_without_dynamic_range_only_static_hosts(lab, tmp_path):
    del lab["network"]["provisioning"]["dynamic_range"]
    tree, _ = render_file(dump_yaml(lab, tmp_path / "lab.yaml"))
    conf = tree["pxe/dnsmasq.conf"]
    assert "dhcp-range=10.20.0.0,static,255.255.255.0,infinite" in conf
    r = dnsmasq_test(conf, tmp_path)
    assert r.returncode == 0, r.stderr


def test_dhcp_host_lines_hold_each_value_to_the_templates_check():
    """dnsmasq.conf's dhcp-host lines are built outside the template: a value the template's finalize would
    refuse (a newline starting a directive of its own) is refused there too."""
    from clusterdef.quoting import UnsafeValue
    from clusterdef.render.pxe import dhcp_hosts
    from clusterdef.resolve import Node

    assert dhcp_hosts([Node("gpu1", "g", "10.0.0.1", "02:00:00:00:00:01")]) == \
        "dhcp-host=02:00:00:00:00:01,10.0.0.1,gpu1,infinite\n"
    with pytest.raises(UnsafeValue):
        dhcp_hosts([Node("gpu1\ndhcp-script=/tmp/x", "g", "10.0.0.1", "02:00:00:00:00:01")])
    many = [Node(f"gpu{i}", "g", f"10.0.0.{i}", f"02:00:00:00:00:{i:02x}") for i in range(1, 200)]
    with pytest.raises(UnsafeValue, match="gpu7;reboot"):  # checked in one scan, reported by its line
        dhcp_hosts(many[:150] + [Node("gpu7;reboot", "g", "10.0.0.7", "02:00:00:00:00:07")] + many[150:])


def test_values_checked_in_one_scan_are_each_held_to_the_check():
    """plain_all checks the values joined by spaces (a space is plain): each is refused as plain() refuses
    it, whatever its neighbours, and comes back as Quoted, which the templates' finalize lets through."""
    from clusterdef.quoting import Quoted, UnsafeValue, plain_all

    assert plain_all(["mac-02-00", "gpu 1", ""]) == ["mac-02-00", "gpu 1", ""]
    assert all(isinstance(v, Quoted) for v in plain_all(["a", "b"]))
    for bad in ("x\n", "$(id)", "a`b", "a\tb", "é"):
        with pytest.raises(UnsafeValue, match="unquoted value"):
            plain_all(["ok-1", bad, "ok-2"])


def test_the_template_check_refuses_a_value_that_ends_in_a_newline():
    """`$` in the plain-text pattern matched before a final newline too: a value ending in one passed."""
    from clusterdef.quoting import UnsafeValue, plain

    assert plain("gpu001,10.0.0.1") == "gpu001,10.0.0.1"
    for bad in ("abc\n", "abc\ndhcp-option=3", "\n"):
        with pytest.raises(UnsafeValue):
            plain(bad)
