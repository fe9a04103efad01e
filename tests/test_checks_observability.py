"""The observability checks (validate/checks_observability.py) finding by finding: code, path,
message and hint written out by hand, for the branches the bad-input corpus does not take: thresholds
for undefined hardware or hardware without a GPU followed by more entries, thresholds at, below and
above the GPU's limits (with a non-default temperature margin in the hint), thresholds for a GPU
whose limits are unknown, and gpu-limits-unknown with none, one or both thresholds set. Issue #18:
the mutants of these checks that the corpus and test_observability.py let through."""

from __future__ import annotations

import copy

from clusterdef.errors import Severity
from test_checks import run

BASE = ("observability", "hardware")
MODEL = "H100-SXM5-80GB"


def _found(result, code):
    return [(f.severity, f.path, f.message, f.hint) for f in result.findings if f.code == code]


def _thresholds(result):
    return [(f.code, f.severity, f.path, f.message, f.hint) for f in result.findings
            if f.code in ("ref-hardware", "alert-threshold-no-gpu", "alert-threshold-out-of-range")]


def _add(lab, name, model=None):
    """Another hardware type like the lab's, with GPU model `model` (None: no GPU at all)."""
    hw = copy.deepcopy(lab["hardware"]["hgx-h100"])
    if model is None:
        del hw["gpu"]
    else:
        hw["gpu"]["model"] = model
    lab["hardware"][name] = hw


def _temperature(value, limit=87, default=82):
    return ("alert-threshold-out-of-range", Severity.ERROR, BASE + ("hgx-h100", "temperature_c"),
            f"GPU temperature alert at {value} C is above the {MODEL}'s maximum operating temperature of "
            f"{limit} C: the GPU throttles before it fires",
            f"set temperature_c to at most {limit} (default: {default})")


def _power(value):
    return ("alert-threshold-out-of-range", Severity.ERROR, BASE + ("hgx-h100", "power_w"),
            f"GPU power alert at {value} W is above the {MODEL}'s TDP of 700 W: the power cap keeps the draw "
            "below it, so it never fires",
            "set power_w to at most 700")


def _unknown(hname, model):
    return (Severity.WARNING, ("hardware", hname, "gpu", "model"),
            f"no limits known for GPU model `{model}`: its temperature and power alerts are not rendered",
            "add the model to src/clusterdef/knowledge/gpu_limits.yaml with a source, or set "
            f"observability.hardware.{hname}.temperature_c and power_w")


def test_thresholds_for_undefined_hardware_then_the_next_entry(lab, matrix, tmp_path):
    _add(lab, "cpu-box")
    lab["observability"] = {"hardware": {"nope": {"power_w": 600}, "hgx-h100": {"temperature_c": 88}}}
    assert _thresholds(run(lab, matrix, tmp_path)) == [
        ("ref-hardware", Severity.ERROR, BASE + ("nope",),
         "observability thresholds for hardware `nope`, which is not defined", "use one of: hgx-h100, mgmt-server, cpu-box"),
        _temperature(88)]


def test_thresholds_for_hardware_without_a_gpu_then_the_next_entry(lab, matrix, tmp_path):
    _add(lab, "cpu-box")
    lab["observability"] = {"hardware": {"cpu-box": {"temperature_c": 80}, "hgx-h100": {"power_w": 701}}}
    assert _thresholds(run(lab, matrix, tmp_path)) == [
        ("alert-threshold-no-gpu", Severity.ERROR, BASE + ("cpu-box",),
         "hardware `cpu-box` has no GPU, so GPU alert thresholds mean nothing", "drop this entry"),
        _power(701)]


def test_both_thresholds_above_the_limits_with_the_margin_in_the_hint(lab, matrix, tmp_path):
    lab["observability"] = {"gpu_temperature_margin_c": 10,
                            "hardware": {"hgx-h100": {"temperature_c": 88, "power_w": 701}}}
    assert _thresholds(run(lab, matrix, tmp_path)) == [_temperature(88, default=77), _power(701)]


def test_thresholds_at_and_below_the_limits_are_fine(lab, matrix, tmp_path):
    lab["observability"] = {"hardware": {"hgx-h100": {"temperature_c": 87, "power_w": 700}}}
    result = run(lab, matrix, tmp_path)
    assert _thresholds(result) == [] and result.findings == []
    lab["observability"] = {"hardware": {"hgx-h100": {"temperature_c": 86, "power_w": 699}}}
    assert _thresholds(run(lab, matrix, tmp_path)) == []


def test_one_threshold_alone_is_checked_alone(lab, matrix, tmp_path):
    lab["observability"] = {"hardware": {"hgx-h100": {"temperature_c": 88}}}
    assert _thresholds(run(lab, matrix, tmp_path)) == [_temperature(88)]
    lab["observability"] = {"hardware": {"hgx-h100": {"power_w": 701}}}
    assert _thresholds(run(lab, matrix, tmp_path)) == [_power(701)]


def test_thresholds_of_a_gpu_with_unknown_limits_are_not_range_checked(lab, matrix, tmp_path):
    _add(lab, "x-box", "X9000-SXM")
    lab["observability"] = {"hardware": {"x-box": {"temperature_c": 110, "power_w": 3000},
                                         "hgx-h100": {"temperature_c": 88}}}
    result = run(lab, matrix, tmp_path)
    assert _thresholds(result) == [_temperature(88)]
    assert _found(result, "gpu-limits-unknown") == []  # both thresholds given


def test_an_unknown_gpu_model_after_a_known_one_is_warned(lab, matrix, tmp_path):
    _add(lab, "cpu-box")
    _add(lab, "x-box", "X9000-SXM")
    _add(lab, "y-box", "Y1")
    result = run(lab, matrix, tmp_path)
    assert _found(result, "gpu-limits-unknown") == [_unknown("x-box", "X9000-SXM"), _unknown("y-box", "Y1")]
    assert result.ok  # a warning only
    assert [f.code for f in result.findings] == ["gpu-limits-unknown", "gpu-limits-unknown"]


def test_an_unknown_gpu_model_is_warned_until_both_thresholds_are_set(lab, matrix, tmp_path):
    _add(lab, "x-box", "X9000-SXM")
    lab["observability"] = {"hardware": {"x-box": {"temperature_c": 80}}}
    assert _found(run(lab, matrix, tmp_path), "gpu-limits-unknown") == [_unknown("x-box", "X9000-SXM")]
    lab["observability"] = {"hardware": {"x-box": {"power_w": 900}}}
    assert _found(run(lab, matrix, tmp_path), "gpu-limits-unknown") == [_unknown("x-box", "X9000-SXM")]
    lab["observability"] = {"hardware": {"x-box": {"temperature_c": 80, "power_w": 900}}}
    assert _found(run(lab, matrix, tmp_path), "gpu-limits-unknown") == []
    lab["observability"] = {"hardware": {"hgx-h100": {"temperature_c": 80, "power_w": 600}}}
    assert _found(run(lab, matrix, tmp_path), "gpu-limits-unknown") == [_unknown("x-box", "X9000-SXM")]


def test_a_model_with_both_thresholds_set_does_not_end_the_check(lab, matrix, tmp_path):
    _add(lab, "x-box", "X9000-SXM")
    _add(lab, "y-box", "Y1")
    lab["observability"] = {"hardware": {"x-box": {"temperature_c": 80, "power_w": 900}}}
    assert _found(run(lab, matrix, tmp_path), "gpu-limits-unknown") == [_unknown("y-box", "Y1")]


def test_b300_limits_the_reference_lacks_are_said_not_guessed(lab, matrix, tmp_path):
    """B300 is known (gpu_limits.yaml) but the shared reference gives none of its limits: validation says which
    figures are missing and what is therefore not rendered; a threshold the definition sets takes that figure off
    the list; the NVLink link count cannot be set, so the warning stays (issue 29)."""
    from clusterdef.knowledge.gpu_limits import limits_for

    lim = limits_for("B300-SXM-288GB")
    assert lim.family == "B300" and lim.unknown() == ["tdp_w", "max_operating_c", "nvlink_links"] and lim.nvlink_gen == 5
    assert limits_for("GB300-X") is None  # not taken for the B300 by prefix
    _add(lab, "b300-box", "B300-SXM-288GB")
    lost = "nodecheck's NVLink link check and the link count in the NVLink alerts' runbooks"
    missing = ("the shared reference (/work/shared/reference) gives no B300 TDP, maximum operating temperature or "
               "NVLink link count")
    found = _found(run(lab, matrix, tmp_path), "gpu-limits-incomplete")
    assert found == [(Severity.WARNING, ("hardware", "b300-box", "gpu", "model"),
                      f"GPU model `B300-SXM-288GB` (B300): {missing}. Without its TDP, maximum operating temperature, "
                      f"NVLink link count, not rendered for hardware `b300-box`: the power alert; the temperature "
                      f"alert; {lost}",
                      "set observability.hardware.b300-box.power_w and observability.hardware.b300-box.temperature_c; "
                      "or add the figure with its source to src/clusterdef/knowledge/gpu_limits.yaml (B300)")]
    lab["observability"] = {"hardware": {"b300-box": {"temperature_c": 80, "power_w": 900}}}
    found = _found(run(lab, matrix, tmp_path), "gpu-limits-incomplete")
    assert [(f[2].split(". ")[1], f[3]) for f in found] == [
        (f"Without its NVLink link count, not rendered for hardware `b300-box`: {lost}",
         "nothing in the definition replaces it; or add the figure with its source to "
         "src/clusterdef/knowledge/gpu_limits.yaml (B300)")]
    # the thresholds are not compared against figures that are unknown
    assert not [f for f in run(lab, matrix, tmp_path).findings if f.code == "alert-threshold-out-of-range"]
