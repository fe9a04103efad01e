"""The image checks (validate/checks_images.py) finding by finding: code, path, message and hint
written out by hand, for the branches the bad-input corpus does not take. Issue #18: the mutants
of these checks (images, gpu-layer-owner, image-group-files and the set's package names) that the
corpus and test_checks.py let through."""

from __future__ import annotations

import copy
import shutil

from clusterdef.errors import Severity
from clusterdef.matrix.load import load_matrix
from conftest import MATRICES
from lab_variants import without_governed_data
from test_checks import run

CODES = ("image-repository-unknown", "image-package-from-set", "image-source-missing", "gpu-layer-two-owners",
         "image-group-files")
E, W = Severity.ERROR, Severity.WARNING


def _found(result, code):
    return [(f.severity, f.path, f.message, f.hint) for f in result.findings if f.code == code]


def _none_of_these(result):
    return [(f.code, f.message) for f in result.findings if f.code in CODES]


def _matrices(tmp_path, sources: tuple[str, str] | None = None, set_: tuple[str, ...] = ()):
    """matrices/ with one edit of compat/package-sources.yaml (old, new) and edits of the lab's set
    (old, new, old, new, ...), each old text found exactly once."""
    root = tmp_path / "matrices"
    shutil.copytree(MATRICES, root)
    edits = [(root / "compat" / "package-sources.yaml", *sources)] if sources else []
    edits += [(root / "sets" / "2026.07-r580.yaml", set_[i], set_[i + 1]) for i in range(0, len(set_), 2)]
    for path, old, new in edits:
        text = path.read_text(encoding="utf-8")
        assert text.count(old) == 1, old
        path.write_text(text.replace(old, new), encoding="utf-8")
    matrix, findings = load_matrix(root)
    assert findings == []
    return matrix


def _own_image(lab, group: str, image: str):
    """`group` boots `image`, a copy of the lab's gpu-node."""
    lab["images"][image] = copy.deepcopy(lab["images"]["gpu-node"])
    lab["nodes"][group]["image"] = image


# ---------------------------------------------------------------- images: packages of the set


def test_every_kind_of_set_package_is_refused_in_an_image(lab, matrix, tmp_path):
    """A package of each origin: a source's component (kubernetes, slurm from the archive and from the
    site source, doca, mft), NVIDIA's driver, NVSwitch, toolkit and NCCL names, and the Slurm daemons."""
    lab["images"]["gpu-node"]["packages"] = [
        "kubelet", "openssh-server", "slurmctld", "slurmdbd", "slurm-wlm", "nvidia-open", "nvidia-fabricmanager",
        "nvidia-container-toolkit", "libnccl2", "doca-ofed", "mft", "slurm-smd-slurmd", "slurm-client", "chrony",
        "nvidia-kernel-open-dkms", "libnvidia-container1"]
    owner = {"kubelet": "kubernetes", "slurmctld": "slurm", "slurmdbd": "slurm", "slurm-wlm": "slurm",
             "nvidia-open": "driver", "nvidia-fabricmanager": "driver", "nvidia-container-toolkit": "container_toolkit",
             "libnccl2": "nccl", "doca-ofed": "doca", "mft": "mft", "slurm-smd-slurmd": "slurm", "slurm-client": "slurm",
             "nvidia-kernel-open-dkms": "driver", "libnvidia-container1": "container_toolkit"}
    expected = []
    for i, pkg in enumerate(lab["images"]["gpu-node"]["packages"]):
        if pkg in ("openssh-server", "chrony"):
            continue
        comp = owner[pkg]
        expected.append((
            E, ("images", "gpu-node", "packages", i),
            f"image `gpu-node`: package `{pkg}` is part of the set's {comp}, which the image installs from the set "
            "at 2026.07-r580's version",
            f"remove `{pkg}` from images.gpu-node.packages: the image target adds the set's {comp} packages with "
            "their pins"))
    result = run(lab, matrix, tmp_path)
    assert _found(result, "image-package-from-set") == expected
    assert [c for c, _ in _none_of_these(result)] == ["image-package-from-set"] * len(expected)


def test_the_first_package_is_index_0_and_a_clean_list_is_accepted(lab, matrix, tmp_path):
    lab["images"]["gpu-node"]["packages"] = ["slurmctld"]
    assert _found(run(lab, matrix, tmp_path), "image-package-from-set") == [(
        E, ("images", "gpu-node", "packages", 0),
        "image `gpu-node`: package `slurmctld` is part of the set's slurm, which the image installs from the set at "
        "2026.07-r580's version",
        "remove `slurmctld` from images.gpu-node.packages: the image target adds the set's slurm packages with their "
        "pins")]
    lab["images"]["gpu-node"]["packages"] = ["openssh-server", "chrony", "rdma-core", "slurm", "driver", "nccl"]
    assert _none_of_these(run(lab, matrix, tmp_path)) == []


# ---------------------------------------------------------------- images: site repositories


def test_each_unknown_repository_is_named_and_the_site_one_is_not(lab, matrix, tmp_path):
    lab["images"]["gpu-node"]["repositories"] = {"zz-ppa": "http://10.20.0.2/z/",
                                                 "slurm-site": "http://10.20.0.2/repos/slurm-25.11/",
                                                 "aa-ppa": "http://10.20.0.2/a/"}
    result = run(lab, matrix, tmp_path)
    assert _found(result, "image-repository-unknown") == [
        (E, ("images", "gpu-node", "repositories", "zz-ppa"),
         "image `gpu-node`: `zz-ppa` is not a site source of matrices/compat/package-sources.yaml",
         "site sources: slurm-site"),
        (E, ("images", "gpu-node", "repositories", "aa-ppa"),
         "image `gpu-node`: `aa-ppa` is not a site source of matrices/compat/package-sources.yaml",
         "site sources: slurm-site")]
    assert [c for c, _ in _none_of_these(result)] == ["image-repository-unknown"] * 2


def test_the_hint_lists_every_site_source_or_none(lab, tmp_path):
    """A vendor source is not a site source, even under the same id."""
    matrix = _matrices(tmp_path / "none", sources=("    kind: site\n", "    kind: vendor\n"))
    result = run(lab, matrix, tmp_path)
    assert _found(result, "image-repository-unknown") == [(
        E, ("images", "gpu-node", "repositories", "slurm-site"),
        "image `gpu-node`: `slurm-site` is not a site source of matrices/compat/package-sources.yaml",
        "site sources: none"), (  # the service hosts' image names it too (slurmctld, slurmdbd)
        E, ("images", "mgmt", "repositories", "slurm-site"),
        "image `mgmt`: `slurm-site` is not a site source of matrices/compat/package-sources.yaml",
        "site sources: none")]
    matrix = _matrices(tmp_path / "two", sources=("  - id: slurm-site\n", AA_SITE + "  - id: slurm-site\n"))
    lab["images"]["gpu-node"]["repositories"]["zz-ppa"] = "http://10.20.0.2/z/"
    assert _found(run(lab, matrix, tmp_path), "image-repository-unknown") == [(
        E, ("images", "gpu-node", "repositories", "zz-ppa"),
        "image `gpu-node`: `zz-ppa` is not a site source of matrices/compat/package-sources.yaml",
        "site sources: aa-site, slurm-site")]


AA_SITE = """\
  - id: aa-site
    kind: site
    components:
      slurm: {packages: [aa-slurmd], pin: "{version}-*"}
    releases:
      ubuntu: {noble: any}
    versions: {from: "23.11"}
    source: "a second site source (tests/test_checks_images.py)"
"""


def test_an_image_of_an_unknown_release_or_set_is_left_to_other_checks(lab, matrix, tmp_path):
    """image-release-unknown and matrix-unknown-set report those; this check says nothing more."""
    img = lab["images"]["gpu-node"]
    img["repositories"]["zz-ppa"] = "http://10.20.0.2/z/"
    img["packages"] = ["slurmctld"]
    unknown_release = copy.deepcopy(lab)
    unknown_release["images"]["gpu-node"]["release"] = "focal"
    result = run(unknown_release, matrix, tmp_path)
    assert _none_of_these(result) == [] and "image-release-unknown" in {f.code for f in result.findings}
    # an image after it is still checked
    unknown_release["images"] = {"old": unknown_release["images"].pop("gpu-node"), "gpu-node": lab["images"]["gpu-node"]}
    assert sorted(c for c, _ in _none_of_these(run(unknown_release, matrix, tmp_path))) == [
        "image-package-from-set", "image-repository-unknown"]
    lab["cluster"]["matrix"] = "2099.01-r999"
    result = run(lab, matrix, tmp_path)
    assert _none_of_these(result) == [] and "matrix-unknown-set" in {f.code for f in result.findings}


# ---------------------------------------------------------------- images: a source for every pinned component


def test_a_component_the_set_does_not_pin(lab, tmp_path):
    """Both missing pins are reported (one does not stop the next), and neither is looked up in a source."""
    matrix = _matrices(tmp_path, set_=('  doca: "3.2.1-044413"\n', "", '  mft: "4.34.1-12"\n', ""))
    assert _found(run(lab, matrix, tmp_path), "image-source-missing") == [
        (E, ("images", "gpu-node", "release"),
         "image `gpu-node`: hardware `hgx-h100` has ConnectX/BlueField HCAs (DOCA-OFED), but set 2026.07-r580 "
         "pins no doca version",
         "use a set that pins doca, or boot this image on nodes that do not need it"),
        (E, ("images", "gpu-node", "release"),
         "image `gpu-node`: hardware `hgx-h100` has ConnectX/BlueField HCAs (MFT: mlxfwmanager reads and flashes "
         "their firmware), but set 2026.07-r580 pins no mft version",
         "use a set that pins mft, or boot this image on nodes that do not need it"),
        # the service hosts' image carries them for OpenSM (docs/services.md)
        (E, ("images", "mgmt", "release"),
         "image `mgmt`: service subnet-manager: OpenSM drives the host's HCA (DOCA-OFED), but set 2026.07-r580 "
         "pins no doca version", "use a set that pins doca, or boot this image on nodes that do not need it"),
        (E, ("images", "mgmt", "release"),
         "image `mgmt`: service subnet-manager: MFT reads and flashes the HCA's firmware, but set 2026.07-r580 "
         "pins no mft version", "use a set that pins mft, or boot this image on nodes that do not need it")]


def test_a_declared_site_source_too_old_for_the_set(lab, tmp_path):
    """The hint says what the declared site repository provides (not how to declare it)."""
    matrix = _matrices(tmp_path, set_=('slurm: "25.11.7"', 'slurm: "23.02.8"'))
    message = ("image `gpu-node`: no package source provides slurm 23.02.8 (set 2026.07-r580) for ubuntu noble "
               "(amd64); a Slurm node group boots it (slurmd at the set's Slurm release)")
    mgmt = (E, ("images", "mgmt", "release"),
            "image `mgmt`: no package source provides slurm 23.02.8 (set 2026.07-r580) for ubuntu noble (amd64); "
            "service slurmctld runs the set's Slurm release",
            "ubuntu noble's archive carries 23.11.4; slurm-site provides 23.11 or later")
    assert _found(run(lab, matrix, tmp_path), "image-source-missing") == [(
        E, ("images", "gpu-node", "release"), message,
        "ubuntu noble's archive carries 23.11.4; slurm-site provides 23.11 or later"), mgmt]
    lab["images"]["gpu-node"]["repositories"] = {}
    assert _found(run(lab, matrix, tmp_path), "image-source-missing") == [(
        E, ("images", "gpu-node", "release"), message,
        "ubuntu noble's archive carries 23.11.4; a site repository `slurm-site` (declare "
        "images.<name>.repositories.slurm-site: URL) would provide 23.11 or later"), mgmt]


def test_a_release_without_the_vendors_build(lab, matrix, tmp_path):
    lab["images"]["gpu-node"].update(distribution="debian", release="trixie")
    assert _found(run(lab, matrix, tmp_path), "image-source-missing") == [
        (E, ("images", "gpu-node", "release"),
         "image `gpu-node`: no package source provides doca 3.2.1-044413 (set 2026.07-r580) for debian trixie "
         "(amd64); hardware `hgx-h100` has ConnectX/BlueField HCAs (DOCA-OFED)",
         "doca has no debian trixie build"),
        (E, ("images", "gpu-node", "release"),
         "image `gpu-node`: no package source provides mft 4.34.1-12 (set 2026.07-r580) for debian trixie "
         "(amd64); hardware `hgx-h100` has ConnectX/BlueField HCAs (MFT: mlxfwmanager reads and flashes their "
         "firmware)",
         "doca has no debian trixie build")]


def test_the_images_architecture_decides_the_source(lab, tmp_path):
    """A source laid out per architecture without arm64: an amd64 image finds it, an arm64 one does not."""
    matrix = _matrices(tmp_path, sources=("architectures: {amd64: x86_64, arm64: arm64-sbsa}",
                                          "architectures: {amd64: x86_64}"))
    assert _none_of_these(run(lab, matrix, tmp_path)) == []
    lab["images"]["gpu-node"]["architecture"] = "arm64"
    assert _found(run(lab, matrix, tmp_path), "image-source-missing") == [
        (E, ("images", "gpu-node", "release"),
         "image `gpu-node`: no package source provides doca 3.2.1-044413 (set 2026.07-r580) for ubuntu noble "
         "(arm64); hardware `hgx-h100` has ConnectX/BlueField HCAs (DOCA-OFED)",
         "doca has no arm64 repository (it has amd64)"),
        (E, ("images", "gpu-node", "release"),
         "image `gpu-node`: no package source provides mft 4.34.1-12 (set 2026.07-r580) for ubuntu noble "
         "(arm64); hardware `hgx-h100` has ConnectX/BlueField HCAs (MFT: mlxfwmanager reads and flashes their "
         "firmware)",
         "doca has no arm64 repository (it has amd64)")]


# ---------------------------------------------------------------- gpu-layer-owner: DOCA-OFED

OFED = {"version": "3.2.1-044413"}
OFED_MESSAGE = ("the Network Operator deploys its DOCA driver container (ofed_driver), and image(s) {} of Kubernetes "
                "groups install the set's DOCA-OFED too (Slurm groups boot them as well)")
OFED_HINT = ("remove ofed_driver (the Kubernetes nodes use the image's DOCA-OFED: host MOFED), or give the "
             "Kubernetes groups an image of their own")


def test_the_lab_has_one_owner_per_layer(lab, matrix, tmp_path):
    assert _none_of_these(run(lab, matrix, tmp_path)) == []


def test_ofed_driver_beside_an_image_shared_with_slurm(lab, matrix, tmp_path):
    lab["kubernetes"]["network_operator"]["ofed_driver"] = OFED
    assert _found(run(lab, matrix, tmp_path), "gpu-layer-two-owners") == [(
        E, ("kubernetes", "network_operator", "ofed_driver"), OFED_MESSAGE.format("`gpu-node`"), OFED_HINT)]
    # two Kubernetes groups on it: the image is named once
    lab["nodes"]["secure"]["control_plane"] = "kubernetes"
    assert _found(run(lab, matrix, tmp_path), "gpu-layer-two-owners") == [(
        E, ("kubernetes", "network_operator", "ofed_driver"), OFED_MESSAGE.format("`gpu-node`"), OFED_HINT)]


def test_ofed_driver_beside_two_shared_images(lab, matrix, tmp_path):
    lab["kubernetes"]["network_operator"]["ofed_driver"] = OFED
    lab["nodes"]["extra"] = copy.deepcopy(lab["nodes"]["secure"])
    lab["nodes"]["extra"].update(hosts="cpu[1-2]")
    lab["nodes"]["extra"]["addressing"] = {"ipv4_start": "10.20.0.51",
                                           "mac": {"source": "list", "macs": ["52:54:00:20:00:51", "52:54:00:20:00:52"]}}
    lab["nodes"]["extra"].pop("placement")
    _own_image(lab, "extra", "cpu-node")  # a Slurm group
    lab["nodes"]["secure"].update(image="cpu-node", control_plane="kubernetes")
    assert _found(run(lab, matrix, tmp_path), "gpu-layer-two-owners") == [(
        E, ("kubernetes", "network_operator", "ofed_driver"), OFED_MESSAGE.format("`cpu-node`, `gpu-node`"),
        OFED_HINT)]


def test_ofed_driver_without_a_second_owner(lab, matrix, tmp_path):
    lab["kubernetes"]["network_operator"]["ofed_driver"] = OFED
    # the Network Operator disabled: its ofed_driver deploys nothing
    off = copy.deepcopy(lab)
    off["kubernetes"]["network_operator"]["enabled"] = False
    assert _found(run(off, matrix, tmp_path), "gpu-layer-two-owners") == []
    # the Kubernetes group on an image of its own: that image carries no DOCA-OFED, and the Slurm
    # groups' image is no Kubernetes group's
    own = copy.deepcopy(lab)
    _own_image(own, "infer", "k8s-node")
    assert _none_of_these(run(own, matrix, tmp_path)) == []
    # hardware without ConnectX/BlueField HCAs: no image carries DOCA-OFED
    plain = copy.deepcopy(lab)
    hw = plain["hardware"]["hgx-h100"]
    hw["nics"] = [n for n in hw["nics"] if n["kind"] == "ethernet"]
    hw["firmware"] = ["bmc", "sbios", "gpu_vbios"]
    assert _found(run(plain, matrix, tmp_path), "gpu-layer-two-owners") == []
    # an image the definition does not have (ref-image reports it)
    dangling = copy.deepcopy(lab)
    dangling["nodes"]["infer"]["image"] = dangling["nodes"]["train"]["image"] = "nope"
    result = run(dangling, matrix, tmp_path)
    assert _found(result, "gpu-layer-two-owners") == [] and "ref-image" in {f.code for f in result.findings}


def test_no_kubernetes_no_layer_owner(lab, matrix, tmp_path):
    lab["kubernetes"] = None
    assert _found(run(lab, matrix, tmp_path), "gpu-layer-two-owners") == []


# ---------------------------------------------------------------- gpu-layer-owner: driver and toolkit

POOL_HINT = ("remove the driver pool (a canary boots a new image instead), or set "
             "kubernetes.gpu_operator.driver_owner: operator")
OPERATOR_HINT = ("give the Kubernetes GPU groups an image of their own, or set "
                 "kubernetes.gpu_operator.driver_owner: image")


def test_every_driver_pool_of_an_image_owned_driver(lab, matrix, tmp_path):
    """Each pool in definition order; nothing about the groups' images (the image owns the driver)."""
    lab["kubernetes"]["gpu_operator"]["driver_pools"] = {
        "b": {"node_groups": ["infer"], "matrix": "2025.10-r580"},
        "a": {"node_groups": ["nope"], "matrix": "2025.10-r580"}}
    assert _found(run(lab, matrix, tmp_path), "gpu-layer-two-owners") == [
        (E, ("kubernetes", "gpu_operator", "driver_pools", p),
         f"driver pool `{p}` makes the GPU Operator deploy a driver, but driver_owner is `image`: the nodes' image "
         "already installs the set's driver", POOL_HINT) for p in ("b", "a")]


def _operator_message(group: str, image: str, others: str, verb: str) -> str:
    return (f"node group `{group}`: the GPU Operator deploys driver and container toolkit (driver_owner: operator), "
            f"and image `{image}` installs them too, because {others} {verb} it")


def test_an_operator_owned_driver_on_a_shared_image(lab, matrix, tmp_path):
    lab["kubernetes"]["gpu_operator"]["driver_owner"] = "operator"
    assert _found(run(lab, matrix, tmp_path), "gpu-layer-two-owners") == [(
        E, ("nodes", "infer", "image"), _operator_message("infer", "gpu-node", "`secure`, `train`", "boot"),
        OPERATOR_HINT)]
    _own_image(lab, "secure", "sec")
    assert _found(run(lab, matrix, tmp_path), "gpu-layer-two-owners") == [(
        E, ("nodes", "infer", "image"), _operator_message("infer", "gpu-node", "`train`", "boots"), OPERATOR_HINT)]


def test_a_cpu_kubernetes_group_shares_the_gpu_groups_image(lab, matrix, tmp_path):
    """A Kubernetes group without GPUs is not one the GPU Operator serves: its image keeps the driver."""
    lab["kubernetes"]["gpu_operator"]["driver_owner"] = "operator"
    lab["hardware"]["cpu-box"] = {k: v for k, v in copy.deepcopy(lab["hardware"]["hgx-h100"]).items() if k != "gpu"}
    _own_image(lab, "infer", "k8s-node")
    lab["nodes"]["secure"].update(image="k8s-node", control_plane="kubernetes", hardware="cpu-box")
    assert _found(run(lab, matrix, tmp_path), "gpu-layer-two-owners") == [(
        E, ("nodes", "infer", "image"), _operator_message("infer", "k8s-node", "`secure`", "boots"), OPERATOR_HINT)]


def test_an_operator_owned_driver_without_a_second_owner(lab, matrix, tmp_path):
    lab["kubernetes"]["gpu_operator"]["driver_owner"] = "operator"
    own = copy.deepcopy(lab)
    _own_image(own, "infer", "k8s-node")
    assert _none_of_these(run(own, matrix, tmp_path)) == []
    # an image or hardware the definition does not have (ref-image, ref-hardware report them)
    dangling = copy.deepcopy(lab)
    dangling["nodes"]["infer"]["image"] = dangling["nodes"]["train"]["image"] = "nope"
    result = run(dangling, matrix, tmp_path)
    assert _found(result, "gpu-layer-two-owners") == [] and "ref-image" in {f.code for f in result.findings}
    lab["nodes"]["infer"]["hardware"] = "nope"
    result = run(lab, matrix, tmp_path)
    assert _found(result, "gpu-layer-two-owners") == [] and "ref-hardware" in {f.code for f in result.findings}


# ---------------------------------------------------------------- image-group-files


def _group_files_warning(group: str, image: str, others: str, what: str):
    return (W, ("nodes", group, "image"),
            f"node group `{group}` boots stateless from image `{image}`, which it shares with {others}: its {what} "
            "cannot be in the image, and what roles/tenant_isolation installs is gone at the next boot",
            f"give `{group}` an image of its own (images.<name>, then nodes.{group}.image), or make it "
            "`provisioning: stateful`")


def _vlan(lab, *groups):
    """The dedicated tenant `secure` isolated by VLAN; `groups` on hardware with two RoCE storage ports."""
    hw = copy.deepcopy(lab["hardware"]["hgx-h100"])
    hw["nics"].append({"name": "ens1f", "kind": "roce", "speed_gbps": 200, "count": 2, "role": "storage"})
    lab["hardware"]["hgx-h100-roce"] = hw
    for g in groups:
        lab["nodes"][g]["hardware"] = "hgx-h100-roce"
    lab["tenants"]["secure"]["isolation"].update(network="vlan", vlan=2101)


def test_a_vlan_tenants_group_on_a_shared_image(lab, matrix, tmp_path):
    """The VLAN files are the owning tenant's group's only, though another group has the ports too."""
    without_governed_data(lab)  # the lab's dataset mounts differ by group too: these tests are about the rest
    _vlan(lab, "train", "secure")
    lab["nodes"]["secure"]["provisioning"] = "stateless"
    assert _found(run(lab, matrix, tmp_path), "image-group-files") == [
        _group_files_warning("secure", "gpu-node", "`infer`, `train`", "tenant secure's VLAN")]


def test_a_vlan_tenant_without_vlan_ports_or_a_stateful_group(lab, matrix, tmp_path):
    without_governed_data(lab)  # the lab's dataset mounts differ by group too: these tests are about the rest
    _vlan(lab)  # no group has Ethernet/RoCE compute or storage ports
    lab["nodes"]["secure"]["provisioning"] = "stateless"
    assert _found(run(lab, matrix, tmp_path), "image-group-files") == []
    _vlan(lab, "secure")
    lab["nodes"]["secure"]["provisioning"] = "stateful"
    assert _found(run(lab, matrix, tmp_path), "image-group-files") == []


def test_mounts_and_vlan_files_together(lab, matrix, tmp_path):
    without_governed_data(lab)  # the lab's dataset mounts differ by group too: these tests are about the rest
    _vlan(lab, "train", "secure")
    lab["nodes"]["secure"]["provisioning"] = "stateless"
    lab["filesystems"]["scratch"].update(source="/dev/disk/by-label/scratch", node_groups=["train", "secure"])
    lab["filesystems"] = {"work": {"kind": "xfs", "mount": "/work", "node_groups": ["secure"],
                                   "source": "/dev/disk/by-label/work"}, **lab["filesystems"]}
    assert _found(run(lab, matrix, tmp_path), "image-group-files") == [
        _group_files_warning("train", "gpu-node", "`infer`, `secure`", "filesystem scratch"),
        _group_files_warning("secure", "gpu-node", "`infer`, `train`",
                             "filesystem scratch, filesystem work, tenant secure's VLAN")]


def test_only_groups_with_other_files_are_named(lab, matrix, tmp_path):
    """train and secure mount scratch, infer mounts nothing: each is named by the other kind only, and
    infer, stateless with nothing to carry, is not warned."""
    without_governed_data(lab)  # the lab's dataset mounts differ by group too: these tests are about the rest
    lab["filesystems"]["scratch"].update(source="/dev/disk/by-label/scratch", node_groups=["train", "secure"])
    for g in ("secure", "infer"):
        lab["nodes"][g]["provisioning"] = "stateless"
    assert _found(run(lab, matrix, tmp_path), "image-group-files") == [
        _group_files_warning("train", "gpu-node", "`infer`", "filesystem scratch"),
        _group_files_warning("secure", "gpu-node", "`infer`", "filesystem scratch")]
    # stateful groups are not warned, though their files differ
    for g in ("train", "secure"):
        lab["nodes"][g]["provisioning"] = "stateful"
    assert _found(run(lab, matrix, tmp_path), "image-group-files") == []


def test_an_image_of_two_groups_with_different_files(lab, matrix, tmp_path):
    """gpu-node of infer and secure, after train's image of its own (nothing to compare there)."""
    without_governed_data(lab)  # the lab's dataset mounts differ by group too: these tests are about the rest
    _own_image(lab, "train", "solo")
    lab["nodes"]["secure"]["provisioning"] = "stateless"
    lab["filesystems"]["scratch"].update(source="/dev/disk/by-label/scratch", node_groups=["secure", "train"])
    assert _found(run(lab, matrix, tmp_path), "image-group-files") == [
        _group_files_warning("secure", "gpu-node", "`infer`", "filesystem scratch")]


def test_groups_that_agree_or_boot_alone_are_fine(lab, matrix, tmp_path):
    without_governed_data(lab)  # the lab's dataset mounts differ by group too: these tests are about the rest
    # every group mounts scratch: the image carries its mount unit
    lab["filesystems"]["scratch"]["source"] = "/dev/disk/by-label/scratch"
    assert _found(run(lab, matrix, tmp_path), "image-group-files") == []
    # a filesystem without a source gets no mount unit, so mounting it on one group differs in nothing
    no_source = copy.deepcopy(lab)
    del no_source["filesystems"]["scratch"]["source"]
    no_source["filesystems"]["scratch"]["node_groups"] = ["train"]
    assert _found(run(no_source, matrix, tmp_path), "image-group-files") == []
    # a stateless group alone on its image with a mount of its own
    _own_image(lab, "infer", "k8s-node")
    lab["nodes"]["infer"]["provisioning"] = "stateless"
    lab["filesystems"]["scratch"]["node_groups"] = ["infer"]
    assert _found(run(lab, matrix, tmp_path), "image-group-files") == []
