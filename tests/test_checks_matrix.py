"""The matrix check (validate/checks_matrix.py) finding by finding: code, path, message and hint
written out by hand, for the branches the bad-input corpus does not take: an unknown set with no
close name and with no sets at all, a candidate set that is allowed, the set's own problems (an
error and a warning) passed through at cluster.matrix, firmware checked across several hardware
types (no firmware listed, a set pinning no platform at all, several unpinned components), and the
rollback target `previous`, a retired one and a validated one. Issue #18: the mutants of this check
that the corpus and test_matrix.py let through."""

from __future__ import annotations

import copy
import dataclasses

from clusterdef.errors import Severity
from conftest import MATRICES
from test_checks import run

PATH = ("cluster", "matrix")
ROLLBACK = ("upgrade", "rollback", "target")
SET = "2026.07-r580"


def _found(result, *codes):
    return [(f.code, f.severity, f.path, f.message, f.hint) for f in result.findings if f.code in codes]


def _with_set(matrix, **update):
    """The matrix with the lab's set changed (components: a dict of component changes)."""
    vs = matrix.sets[SET]
    if "components" in update:
        update["components"] = vs.components.model_copy(update=update["components"])
    return dataclasses.replace(matrix, sets={**matrix.sets, SET: vs.model_copy(update=update)})


MATRIX_CODES = ("matrix-unknown-set", "matrix-retired", "matrix-candidate")


def test_an_unknown_set_with_no_close_name_lists_the_known_sets(lab, matrix, tmp_path):
    lab["cluster"]["matrix"] = "zzz"
    assert _found(run(lab, matrix, tmp_path), *MATRIX_CODES) == [(
        "matrix-unknown-set", Severity.ERROR, PATH, f"validated set `zzz` is not in {MATRICES}/sets",
        "known sets: 2025.01-r550, 2025.10-r580, 2026.07-r580, 2026.11-r595-candidate")]


def test_an_unknown_set_in_a_matrix_without_sets(lab, matrix, tmp_path):
    lab["cluster"]["matrix"] = "zzz"
    empty = dataclasses.replace(matrix, sets={})
    assert _found(run(lab, empty, tmp_path), *MATRIX_CODES) == [(
        "matrix-unknown-set", Severity.ERROR, PATH, f"validated set `zzz` is not in {MATRICES}/sets",
        "known sets: none")]


def test_a_candidate_set_is_fine_when_allowed(lab, matrix, tmp_path):
    lab["cluster"].update(matrix="2026.11-r595-candidate", allow_candidate=True)
    assert _found(run(lab, matrix, tmp_path), *MATRIX_CODES) == []
    lab["cluster"].update(matrix=SET, allow_candidate=True)
    assert run(lab, matrix, tmp_path).findings == []


def test_a_retired_set_is_refused_even_with_candidates_allowed(lab, matrix, tmp_path):
    lab["cluster"].update(matrix="2025.01-r550", allow_candidate=True)
    assert _found(run(lab, matrix, tmp_path), *MATRIX_CODES) == [(
        "matrix-retired", Severity.ERROR, PATH, "set `2025.01-r550` is retired",
        "move the cluster to a validated set (`clusterdef matrix list`)")]


def test_the_sets_own_problems_are_findings_at_cluster_matrix(lab, matrix, tmp_path):
    broken = _with_set(matrix, components={"driver": "999.1.2", "nccl": "9.9.9"})
    result = run(lab, broken, tmp_path)
    assert [(f.code, f.severity, f.path, f.message, f.hint) for f in result.findings] == [
        ("matrix-nccl-unknown", Severity.ERROR, PATH, f"set {SET}: NCCL 9.9.9 is not in the compatibility facts",
         "use a release listed in matrices/compat/nccl-cuda.yaml"),
        ("matrix-driver-branch-unknown", Severity.WARNING, PATH,
         f"set {SET}: driver branch R999 has no lifecycle fact", "add it to matrices/compat/driver-branches.yaml")]


def test_firmware_across_hardware_types(lab, matrix, tmp_path):
    hw = lab["hardware"]
    odd = copy.deepcopy(hw["hgx-h100"])
    odd["platform"] = "hgx-h200"
    lab["hardware"] = {"bare": {**copy.deepcopy(odd), "firmware": []}, "odd": odd, "hgx-h100": hw["hgx-h100"]}
    hw["hgx-h100"]["firmware"] = ["bf3", "bmc", "cpld"]
    pinned = "pinned for hgx-h100: bmc, cx7, gpu_vbios, nvswitch, sbios"
    assert _found(run(lab, matrix, tmp_path), "firmware-platform-unpinned", "firmware-component-unpinned") == [
        ("firmware-platform-unpinned", Severity.ERROR, ("hardware", "odd", "platform"),
         f"set `{SET}` pins no firmware for platform `hgx-h200`",
         "platforms pinned: dgx-b200, dgx-h100, gb200-nvl72, gb300-nvl72, hgx-b200, hgx-h100"),
        ("firmware-component-unpinned", Severity.ERROR, ("hardware", "hgx-h100", "firmware", 0),
         f"set `{SET}` pins no `bf3` firmware for platform `hgx-h100`", pinned),
        ("firmware-component-unpinned", Severity.ERROR, ("hardware", "hgx-h100", "firmware", 2),
         f"set `{SET}` pins no `cpld` firmware for platform `hgx-h100`", pinned)]


def test_a_set_that_pins_no_firmware_at_all(lab, matrix, tmp_path):
    result = run(lab, _with_set(matrix, firmware={}), tmp_path)
    assert [(f.code, f.severity, f.path, f.message, f.hint) for f in result.findings] == [(
        "firmware-platform-unpinned", Severity.ERROR, ("hardware", "hgx-h100", "platform"),
        f"set `{SET}` pins no firmware for platform `hgx-h100`", "platforms pinned: none")]
    lab["hardware"]["hgx-h100"]["firmware"] = []
    # no firmware to check: only the warning that the NVSwitches' firmware (an HGX H100 has them) goes unchecked
    assert [(f.code, f.severity, f.path) for f in run(lab, _with_set(matrix, firmware={}), tmp_path).findings] == [
        ("hardware-nvswitch-firmware-unchecked", Severity.WARNING, ("hardware", "hgx-h100", "platform"))]


def test_rollback_targets(lab, matrix, tmp_path):
    codes = ("rollback-unknown-set", "rollback-not-validated")
    lab["upgrade"]["rollback"]["target"] = "previous"
    result = run(lab, matrix, tmp_path)
    assert _found(result, *codes) == [] and result.findings == []
    lab["upgrade"]["rollback"]["target"] = "2025.01-r550"
    assert _found(run(lab, matrix, tmp_path), *codes) == [(
        "rollback-not-validated", Severity.ERROR, ROLLBACK,
        "rollback target `2025.01-r550` is retired; under pressure return to a validated set",
        "point the rollback at a validated set")]
    lab["upgrade"]["rollback"]["target"] = SET  # validated (here: the set itself)
    assert _found(run(lab, matrix, tmp_path), *codes) == []
