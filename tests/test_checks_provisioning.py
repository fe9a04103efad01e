"""The provisioning checks (validate/checks_provisioning.py: `provisioning` and `images-boot`) finding
by finding: code, path, message and hint written out by hand, for the branches the bad-input corpus
does not take (a Debian release, console tails at the first argument and at the edges of the speed
pattern, reserved arguments and near misses, a gateway absent or inside the subnet, several groups
discovering their MACs with and without a dynamic range, a version reused for the same set, boot
pointers in a discovering group, at the current or a published build, or with an undefined image,
roles on stateful and stateless groups). The mutants of these checks that the corpus and
test_checks.py let through."""

from __future__ import annotations

import copy

from clusterdef.errors import Severity
from test_checks import run

E = Severity.ERROR
SPLIT_CODES = ("image-cmdline-split", "image-cmdline-reserved")
RESERVED_HINT = "remove it: the PXE target adds initrd=, clusterdef.image/set/group/server"
PXE_CODES = ("pxe-discover-without-range", "pxe-discover-ambiguous")
BOOT_CODES = ("boot-pointer-host", "boot-pointer-unpublished")
DISCOVER_HINT = "list the group's MACs (addressing.mac: {source: list, ...}) or use an inventory"


def _found(result, *codes):
    return [(f.code, f.severity, f.path, f.message, f.hint) for f in result.findings if f.code in codes]


def _discover(lab: dict, group: str) -> None:
    lab["nodes"][group]["addressing"]["mac"] = {"source": "discover"}


def _second_image(lab: dict, name: str = "cpu-node") -> dict:
    img = copy.deepcopy(lab["images"]["gpu-node"])
    lab["images"][name] = img
    return img


# --------------------------------------------------------------------------- provisioning: images

def test_a_debian_release_unknown_lists_the_debian_releases(lab, matrix, tmp_path):
    img = _second_image(lab)
    img.update(distribution="debian", release="bullseye")
    assert _found(run(lab, matrix, tmp_path), "image-release-unknown") == [(
        "image-release-unknown", E, ("images", "cpu-node", "release"),
        "image `cpu-node`: there is no base recipe for debian `bullseye`",
        "known debian releases: bookworm, trixie")]
    img["release"] = "trixie"
    assert _found(run(lab, matrix, tmp_path), "image-release-unknown") == []


def test_a_console_tail_first_in_the_list_is_no_split(lab, matrix, tmp_path):
    # a tail needs a console= before it: the first argument has none, even with one at the end
    lab["images"]["gpu-node"]["kernel_cmdline"] = ["115200n8", "iommu=pt", "console=ttyS0"]
    assert _found(run(lab, matrix, tmp_path), *SPLIT_CODES) == []
    # a tail after another argument than console= is no split either
    lab["images"]["gpu-node"]["kernel_cmdline"] = ["console=ttyS0", "iommu=pt", "115200n8"]
    assert _found(run(lab, matrix, tmp_path), *SPLIT_CODES) == []


def test_console_tails_at_the_edges_of_the_speed_pattern(lab, matrix, tmp_path):
    tails = ["960", "1152000", "115200n", "115200e7", "115200o8r", "9600r", "96", "11520000", "115200x8",
             "115200n8rr", "n8", "115200n88"]
    cmdline = []
    for tail in tails:
        cmdline += ["console=ttyS1", tail]
    lab["images"]["gpu-node"]["kernel_cmdline"] = cmdline
    found = _found(run(lab, matrix, tmp_path), *SPLIT_CODES)
    split = ["960", "1152000", "115200n", "115200e7", "115200o8r"]  # r only after a parity
    assert found == [
        ("image-cmdline-split", E, ("images", "gpu-node", "kernel_cmdline", 2 * k + 1),
         f"image `gpu-node`: kernel argument `{tail}` is the tail of `console=ttyS1,{tail}`, split at the comma",
         f'quote it in the YAML list: ["console=ttyS1,{tail}", ...]')
        for k, tail in enumerate(split)]


def test_the_tail_names_the_console_argument_just_before_it(lab, matrix, tmp_path):
    lab["images"]["gpu-node"]["kernel_cmdline"] = ["console=tty0", "iommu=pt", "console=ttyS2", "57600n8"]
    assert _found(run(lab, matrix, tmp_path), *SPLIT_CODES) == [(
        "image-cmdline-split", E, ("images", "gpu-node", "kernel_cmdline", 3),
        "image `gpu-node`: kernel argument `57600n8` is the tail of `console=ttyS2,57600n8`, split at the comma",
        'quote it in the YAML list: ["console=ttyS2,57600n8", ...]')]


def test_reserved_arguments_and_near_misses(lab, matrix, tmp_path):
    lab["images"]["gpu-node"]["kernel_cmdline"] = [
        "initrd=verify.img", "clusterdef.image=gpu-node", "clusterdef.group=train", "clusterdef.boot_server=x",
        "initrd", "xinitrd=a", "clusterdef.=x", "clusterdef.Image=x", "clusterdef.image", "myclusterdef.set=x",
        "clusterdefXset=x", "INITRD=x"]
    assert _found(run(lab, matrix, tmp_path), *SPLIT_CODES) == [
        ("image-cmdline-reserved", E, ("images", "gpu-node", "kernel_cmdline", i),
         f"image `gpu-node`: kernel argument `{argument}` is set by clusterdef for every node", RESERVED_HINT)
        for i, argument in enumerate(["initrd=verify.img", "clusterdef.image=gpu-node", "clusterdef.group=train",
                                      "clusterdef.boot_server=x"])]


def test_every_image_is_checked_and_named(lab, matrix, tmp_path):
    lab["images"]["gpu-node"]["kernel_cmdline"] = ["console=ttyS0", "115200"]
    img = _second_image(lab)
    img["kernel_cmdline"] = ["iommu=pt", "clusterdef.set=2025.10-r580"]
    assert _found(run(lab, matrix, tmp_path), *SPLIT_CODES) == [
        ("image-cmdline-split", E, ("images", "gpu-node", "kernel_cmdline", 1),
         "image `gpu-node`: kernel argument `115200` is the tail of `console=ttyS0,115200`, split at the comma",
         'quote it in the YAML list: ["console=ttyS0,115200", ...]'),
        ("image-cmdline-reserved", E, ("images", "cpu-node", "kernel_cmdline", 1),
         "image `cpu-node`: kernel argument `clusterdef.set=2025.10-r580` is set by clusterdef for every node",
         RESERVED_HINT)]


# --------------------------------------------------------------------------- provisioning: network

def test_a_gateway_inside_the_subnet_or_none_is_fine(lab, matrix, tmp_path):
    lab["network"]["provisioning"]["gateway"] = "10.20.0.254"
    assert _found(run(lab, matrix, tmp_path), "ip-outside-subnet") == []
    del lab["network"]["provisioning"]["gateway"]
    assert _found(run(lab, matrix, tmp_path), "ip-outside-subnet") == []
    lab["network"]["provisioning"]["gateway"] = "10.20.1.0"
    assert _found(run(lab, matrix, tmp_path), "ip-outside-subnet") == [(
        "ip-outside-subnet", E, ("network", "provisioning", "gateway"),
        "gateway 10.20.1.0 is outside the provisioning subnet 10.20.0.0/24",
        "nodes reach the gateway directly: use an address inside 10.20.0.0/24")]


def test_one_discovering_group_with_a_range_is_fine(lab, matrix, tmp_path):
    _discover(lab, "infer")
    assert _found(run(lab, matrix, tmp_path), *PXE_CODES) == []


def test_every_discovering_group_without_a_range_is_named(lab, matrix, tmp_path):
    for g in ("train", "infer", "secure"):
        _discover(lab, g)
    del lab["network"]["provisioning"]["dynamic_range"]
    hint = "add network.provisioning.dynamic_range so unknown nodes get an address to boot from"
    found = _found(run(lab, matrix, tmp_path), *PXE_CODES)
    assert found == [
        ("pxe-discover-without-range", E, ("nodes", "train", "addressing", "mac", "source"),
         "node group `train` discovers its MACs, but the provisioning network has no dynamic range", hint),
        ("pxe-discover-ambiguous", E, ("nodes", "infer", "addressing", "mac", "source"),
         "node groups `train`, `infer`, `secure` all discover their MACs: an unknown node cannot be told which "
         "group to boot", "let one group discover and list or inventory the MACs of the others"),
        ("pxe-discover-without-range", E, ("nodes", "infer", "addressing", "mac", "source"),
         "node group `infer` discovers its MACs, but the provisioning network has no dynamic range", hint),
        ("pxe-discover-without-range", E, ("nodes", "secure", "addressing", "mac", "source"),
         "node group `secure` discovers its MACs, but the provisioning network has no dynamic range", hint)]


def test_the_ambiguity_points_at_the_second_discovering_group(lab, matrix, tmp_path):
    _discover(lab, "infer")
    _discover(lab, "secure")
    assert _found(run(lab, matrix, tmp_path), *PXE_CODES) == [(
        "pxe-discover-ambiguous", E, ("nodes", "secure", "addressing", "mac", "source"),
        "node groups `infer`, `secure` all discover their MACs: an unknown node cannot be told which group to boot",
        "let one group discover and list or inventory the MACs of the others")]


# --------------------------------------------------------------------------- images-boot: versions

def test_a_current_version_published_for_the_same_set(lab, matrix, tmp_path):
    lab["images"]["gpu-node"]["published"] = {
        "2026.07.1": {"set": "2026.07-r580", "digest": "5d157735af31"},
        "2025.10.1": {"set": "2025.10-r580", "digest": "0123456789ab"}}
    assert _found(run(lab, matrix, tmp_path), "image-version-reused") == [(
        "image-version-reused", E, ("images", "gpu-node", "published", "2026.07.1"),
        "image `gpu-node`: version 2026.07.1 is the current build (set 2026.07-r580) and is also listed as "
        "published for set 2026.07-r580",
        "remove 2026.07.1 from images.gpu-node.published: the current build is always published")]


def test_earlier_builds_are_no_reuse(lab, matrix, tmp_path):
    lab["images"]["gpu-node"]["published"] = {"2025.10.1": {"set": "2025.10-r580", "digest": "0123456789ab"}}
    assert _found(run(lab, matrix, tmp_path), "image-version-reused") == []


# --------------------------------------------------------------------------- images-boot: boot pointers

def test_a_pointer_at_the_current_or_a_published_build_is_fine(lab, matrix, tmp_path):
    lab["images"]["gpu-node"]["published"] = {"2025.10.1": {"set": "2025.10-r580", "digest": "0123456789ab"}}
    lab["nodes"]["train"]["boot"] = {"gpu001": "2026.07.1", "gpu002": "2025.10.1"}
    assert _found(run(lab, matrix, tmp_path), *BOOT_CODES) == []


def test_an_unpublished_pointer_lists_every_kept_build(lab, matrix, tmp_path):
    lab["images"]["gpu-node"]["published"] = {"2025.10.1": {"set": "2025.10-r580", "digest": "0123456789ab"},
                                              "2025.04.1": {"set": "2025.10-r580", "digest": "ba9876543210"}}
    lab["nodes"]["train"]["boot"] = {"gpu003": "2024.01.1"}
    assert _found(run(lab, matrix, tmp_path), *BOOT_CODES) == [(
        "boot-pointer-unpublished", E, ("nodes", "train", "boot", "gpu003"),
        "node group `train`: host `gpu003` points at image `gpu-node` version 2024.01.1, which the boot server "
        "does not keep",
        "point it at a published build (2026.07.1, 2025.10.1, 2025.04.1), or add 2024.01.1 with its set and "
        "digest to images.gpu-node.published")]


def test_a_pointer_in_a_discovering_group(lab, matrix, tmp_path):
    _discover(lab, "infer")
    # its own host, at the current build: the pointer cannot be found without the host's MAC
    lab["nodes"]["infer"]["boot"] = {"kgpu02": "2026.07.1", "gpu001": "2026.07.1", "kgpu01": "1999.1"}
    assert _found(run(lab, matrix, tmp_path), *BOOT_CODES) == [
        ("boot-pointer-host", E, ("nodes", "infer", "boot", "kgpu02"),
         "node group `infer`: boot pointer for `kgpu02`, but the group discovers its MACs, and a pointer is found "
         "by the host's MAC", DISCOVER_HINT),
        ("boot-pointer-host", E, ("nodes", "infer", "boot", "gpu001"),
         "node group `infer`: boot pointer for `gpu001`, which is not one of its hosts (kgpu[01-02])",
         "point a host of this group, or move the pointer to the group that has the host"),
        # an unpublished version in a discovering group is reported once, as the MAC problem
        ("boot-pointer-host", E, ("nodes", "infer", "boot", "kgpu01"),
         "node group `infer`: boot pointer for `kgpu01`, but the group discovers its MACs, and a pointer is found "
         "by the host's MAC", DISCOVER_HINT)]


def test_a_pointer_of_a_group_whose_image_is_undefined(lab, matrix, tmp_path):
    lab["nodes"]["train"]["image"] = "no-such-image"
    lab["nodes"]["train"]["boot"] = {"gpu001": "2024.01.1"}
    result = run(lab, matrix, tmp_path)
    assert [f.code for f in result.findings if f.path == ("nodes", "train", "image")] == ["ref-image"]
    assert _found(result, *BOOT_CODES) == []


def test_pointers_of_every_group_are_checked(lab, matrix, tmp_path):
    lab["nodes"]["train"]["boot"] = {"gpu001": "2026.07.1"}
    lab["nodes"]["secure"]["boot"] = {"sgpu02": "2024.01.1"}
    assert [f[2] for f in _found(run(lab, matrix, tmp_path), *BOOT_CODES)] == [("nodes", "secure", "boot", "sgpu02")]


# --------------------------------------------------------------------------- images-boot: roles

def test_roles_of_a_stateless_group_one_by_one(lab, matrix, tmp_path):
    lab["nodes"]["train"]["roles"] = ["gpu_facts", "gpu_fact", "nvidia_driver", "node_drain", "slurm_node_access"]
    roles = ("backup, boot_server, container_toolkit, cuda_userspace, deliver, firmware, gpu_facts, identity, "
             "node_admission, node_drain, nvidia_driver, slurm_control_plane, slurm_node, slurm_node_access, "
             "slurm_nodecheck, tenant_isolation")

    def apt(role):
        return ("stateless-apt-role", E, ("nodes", "train", "roles", {"nvidia_driver": 2, "slurm_node_access": 4}[role]),
                f"node group `train` is stateless, but role `{role}` installs packages with apt on its hosts: they "
                "would be lost at the next reboot, and the node would run something other than its image `gpu-node`",
                "put the packages in image `gpu-node` (images.gpu-node.packages) and drop the role, or make the "
                "group `provisioning: stateful`")

    assert _found(run(lab, matrix, tmp_path), "role-unknown", "stateless-apt-role") == [
        ("role-unknown", E, ("nodes", "train", "roles", 1), "node group `train`: there is no role `gpu_fact`",
         f"roles: {roles}"),
        apt("nvidia_driver"), apt("slurm_node_access")]


def test_package_roles_on_a_stateful_group_are_fine(lab, matrix, tmp_path):
    lab["nodes"]["secure"]["roles"] = ["nvidia_driver", "cuda_userspace"]
    lab["nodes"]["train"]["provisioning"] = "stateful"
    lab["nodes"]["train"]["roles"] = ["container_toolkit"]
    result = run(lab, matrix, tmp_path)
    assert _found(result, "role-unknown", "stateless-apt-role") == []
    # an unknown role of a stateless group is only unknown, and later groups are still checked
    lab["nodes"]["train"]["provisioning"] = "stateless"
    lab["nodes"]["train"]["roles"] = ["zz_role"]
    lab["nodes"]["secure"]["provisioning"] = "stateless"
    found = _found(run(lab, matrix, tmp_path), "role-unknown", "stateless-apt-role")
    assert [(f[0], f[2]) for f in found] == [
        ("role-unknown", ("nodes", "train", "roles", 0)),
        ("stateless-apt-role", ("nodes", "secure", "roles", 0)),
        ("stateless-apt-role", ("nodes", "secure", "roles", 1))]


def test_a_gateway_on_the_subnets_network_or_broadcast_address_is_outside(lab, matrix, tmp_path):
    for gateway in ("10.20.0.0", "10.20.0.255"):
        lab["network"]["provisioning"]["gateway"] = gateway
        assert [f.path for f in run(lab, matrix, tmp_path).findings if f.code == "ip-outside-subnet"] == [
            ("network", "provisioning", "gateway")], gateway
