"""A run against its baseline (baseline/compare.py), problem by problem: tolerances and their bounds,
size bands at their edges, every mismatch compare() names (failed run, #wrong, test, node count, GPUs
per node), size-keyed (legacy) baselines, halves a baseline or run lacks, missing rows and the exact
SizeResult figures, and pick(). Problems are written out by hand. Issue #18: the mutants of
compare.py that tests/test_baseline.py lets through. Runs are built from their dataclasses (one row
per case), or parsed from the real H200 log with tests/test_baseline.py's helpers."""

from __future__ import annotations

import pytest

from clusterdef.baseline import Baseline, BaselineError, band, compare, parse, parse_file, parse_tolerance, pick
from clusterdef.baseline.parse import Half, Row, Run
from test_baseline import H200, _all_types, _h200_baseline, _one_row_base

MiB = 1 << 20


def _run(*rows, test="all_reduce_perf", nodes=2, ranks=16, status="ok", reason="") -> Run:
    """A run of `rows` given as (size, type, redop, out-of-place busbw, in-place busbw[, #wrong oop, #wrong ip])."""
    out = []
    for size, dtype, redop, oop, ip, *wrong in rows:
        w_oop, w_ip = (wrong + [0, 0])[:2]
        out.append(Row(size, size // 4, dtype, redop, None, Half(1.0, oop, oop, w_oop), Half(1.0, ip, ip, w_ip)))
    return Run(test=test, status=status, reason=reason, ranks=ranks, hosts=[f"h{i}" for i in range(nodes)],
               rows=out, avg_busbw_gbps=1.0)


def _base(busbw, test="all_reduce_perf", nodes=2, gpus=8, legacy=False, set_="s") -> Baseline:
    return Baseline(set_, test, nodes, gpus, busbw, legacy=legacy)


def _sizes(result):
    return [(s.size, s.band, s.baseline_gbps, s.measured_gbps, s.drop_pct, s.tolerance_pct, s.ok, s.type, s.redop,
             s.half) for s in result.sizes]


# --------------------------------------------------------------------------- tolerances and bands

TOL_MSG = "use small=PCT, medium=PCT or large=PCT with PCT a number from 0 to 100"


def test_tolerances_parse_per_band_with_the_last_one_winning():
    assert parse_tolerance([]) == {}
    assert parse_tolerance(["medium=12.5", "small=100", "large=0", "medium=1e1"]) == {
        "medium": 10.0, "small": 100.0, "large": 0.0}


@pytest.mark.parametrize("bad", ["small=100.01", "large=-0.01", "medium=abc", "medium=", "=5", "medium", "Large=5",
                                 "small=5=5", "large=-inf", ""])
def test_a_tolerance_outside_0_to_100_or_of_no_band_is_refused(bad):
    with pytest.raises(BaselineError) as exc:
        parse_tolerance(["small=1", bad])
    assert str(exc.value) == f"--tolerance {bad!r}: {TOL_MSG}"


def test_bands_at_their_edges():
    assert [band(s) for s in (0, MiB - 1, MiB, (256 << 20) - 1, 256 << 20, (1 << 62) - 1)] == [
        "small", "small", "medium", "medium", "large", "large"]


def test_each_band_has_its_default_tolerance_and_an_override_replaces_one_band_only():
    run = _run((1024, "float", "sum", 70.0, None), (MiB, "float", "sum", 85.0, None), (256 << 20, "float", "sum", 94.0, None))
    base = _base({(1024, "float", "sum"): (100.0, None), (MiB, "float", "sum"): (100.0, None),
                  (256 << 20, "float", "sum"): (100.0, None)})
    r = compare(run, base)
    assert [(s.band, s.drop_pct, s.tolerance_pct, s.ok) for s in r.sizes] == [
        ("small", 30.0, 25.0, False), ("medium", 15.0, 10.0, False), ("large", 6.0, 5.0, False)]
    assert r.problems == [
        "1 KiB float/sum out-of-place: busbw 70 GB/s is 30% below the baseline 100 GB/s (tolerance 25% for small "
        "messages)",
        "1 MiB float/sum out-of-place: busbw 85 GB/s is 15% below the baseline 100 GB/s (tolerance 10% for medium "
        "messages)",
        "256 MiB float/sum out-of-place: busbw 94 GB/s is 6% below the baseline 100 GB/s (tolerance 5% for large "
        "messages)"]
    r = compare(run, base, {"medium": 15.0, "large": 6.0})
    assert [(s.tolerance_pct, s.ok) for s in r.sizes] == [(25.0, False), (15.0, True), (6.0, True)]
    assert len(r.problems) == 1 and r.problems[0].startswith("1 KiB float/sum out-of-place:")
    assert compare(run, base, {"small": 30.0, "medium": 15.0, "large": 6.0}).ok


# --------------------------------------------------------------------------- what compare() names


def test_a_clean_run_is_ok_with_every_row_and_half_exact():
    run = _run((MiB, "float", "sum", 90.0, 45.0), (1024, "float", "sum", 2.0, 2.5), (1024, "int8", "", 1.0, 1.0))
    base = _base({(MiB, "float", "sum"): (100.0, 50.0), (1024, "float", "sum"): (2.0, 2.0),
                  (1024, "int8", ""): (1.0, 1.0)}, set_="2026.07-r580")
    r = compare(run, base)
    assert (r.test, r.set, r.ok, r.problems) == ("all_reduce_perf", "2026.07-r580", True, [])
    assert _sizes(r) == [
        (1024, "small", 2.0, 2.0, 0.0, 25.0, True, "float", "sum", "out-of-place"),
        (1024, "small", 2.0, 2.5, -25.0, 25.0, True, "float", "sum", "in-place"),
        (1024, "small", 1.0, 1.0, 0.0, 25.0, True, "int8", "", "out-of-place"),
        (1024, "small", 1.0, 1.0, 0.0, 25.0, True, "int8", "", "in-place"),
        (MiB, "medium", 100.0, 90.0, 10.0, 10.0, True, "float", "sum", "out-of-place"),
        (MiB, "medium", 50.0, 45.0, 10.0, 10.0, True, "float", "sum", "in-place")]
    d = r.to_json()
    assert (d["test"], d["set"], d["ok"], d["problems"], len(d["sizes"])) == (
        "all_reduce_perf", "2026.07-r580", True, [], 6)
    assert d["sizes"][0] == {"size": 1024, "band": "small", "baseline_gbps": 2.0, "measured_gbps": 2.0,
                             "drop_pct": 0.0, "tolerance_pct": 25.0, "ok": True, "type": "float", "redop": "sum",
                             "half": "out-of-place"}


def test_drops_are_rounded_to_two_decimals_and_a_zero_baseline_cannot_drop():
    run = _run((1024, "float", "sum", 2.0, 5.0))
    r = compare(run, _base({(1024, "float", "sum"): (3.0, 0.0)}))
    assert [(s.half, s.drop_pct, s.ok) for s in r.sizes] == [("out-of-place", 33.33, False), ("in-place", 0.0, True)]
    assert r.problems == ["1 KiB float/sum out-of-place: busbw 2 GB/s is 33.33% below the baseline 3 GB/s "
                          "(tolerance 25% for small messages)"]


def test_a_half_the_baseline_or_the_run_lacks_is_not_compared():
    # no out-of-place figure in the baseline: the in-place one is still compared
    r = compare(_run((MiB, "float", "sum", 100.0, 50.0)), _base({(MiB, "float", "sum"): (None, 100.0)}))
    assert [(s.half, s.drop_pct, s.ok) for s in r.sizes] == [("in-place", 50.0, False)]
    assert r.problems == ["1 MiB float/sum in-place: busbw 50 GB/s is 50% below the baseline 100 GB/s "
                          "(tolerance 10% for medium messages)"]
    # no in-place figure in the run, nor in-place in the baseline
    r = compare(_run((MiB, "float", "sum", 100.0, None), (2 * MiB, "float", "sum", 100.0, 100.0)),
                _base({(MiB, "float", "sum"): (100.0, 100.0), (2 * MiB, "float", "sum"): (100.0, None)}))
    assert [(s.size, s.half) for s in r.sizes] == [(MiB, "out-of-place"), (2 * MiB, "out-of-place")] and r.ok


def test_a_failed_run_is_named_before_its_wrong_elements():
    row = (1024, "float", "sum", 1.0, 1.0, 1, 2)
    base = _base({(1024, "float", "sum"): (1.0, 1.0)})
    r = compare(_run(row, status="failed", reason="it broke"), base)
    assert r.problems == ["run failed: it broke"] and not r.ok and len(r.sizes) == 2
    r = compare(_run(row, status="incomplete", reason="cut short"), base)
    assert r.problems == ["run incomplete: cut short"]
    r = compare(_run(row), base)  # an ok status with #wrong in both halves
    assert r.problems == ["3 wrong elements (#wrong)"] and not r.ok
    r = compare(_run((1024, "float", "sum", 1.0, 1.0, 0.5, 0)), base)
    assert r.problems == ["0.5 wrong elements (#wrong)"]


def test_test_nodes_and_gpus_per_node_mismatches():
    row = (1024, "float", "sum", 1.0, 1.0)
    busbw = {(1024, "float", "sum"): (1.0, 1.0)}
    r = compare(_run(row, test="all_gather_perf", nodes=4, ranks=16), _base(busbw, nodes=2, gpus=8))
    assert r.problems == ["run is all_gather_perf, baseline is all_reduce_perf", "run spans 4 nodes, baseline 2",
                          "run has 4 GPUs per node, baseline 8"]
    assert compare(_run(row, test=""), _base(busbw)).ok  # an old log names no test: not compared
    assert compare(_run(row, nodes=3, ranks=16), _base(busbw, nodes=3)).ok  # GPUs per node unknown in the run
    assert compare(_run(row, ranks=8), _base(busbw, gpus=None)).ok  # ... or in the baseline
    assert compare(_run(row, ranks=8), _base(busbw, gpus=8)).problems == ["run has 4 GPUs per node, baseline 8"]


def test_missing_rows_are_counted_with_their_series_and_sizes():
    run = _run((1024, "float", "sum", 1.0, 1.0))
    busbw = {(1024, "float", "sum"): (1.0, 1.0), (2048, "float", "sum"): (1.0, 1.0)}
    for i, t in enumerate(("int8", "half", "bfloat16", "double", "int32", "uint8", "float")):
        busbw[(4096 << i, t, "max")] = (1.0, 1.0)
    busbw[(8, "int64", "")] = (1.0, None)
    r = compare(run, _base(busbw))
    assert [(s.size, s.half, s.ok) for s in r.sizes] == [(1024, "out-of-place", True), (1024, "in-place", True)]
    assert r.problems == ["9 baseline row(s) not in the run (datatype/op bfloat16/max, double/max, float/max, "
                          "float/sum, half/max, int32/max; sizes 8 B..256 KiB)"]


def test_no_row_in_common():
    r = compare(_run((1024, "float", "sum", 1.0, 1.0)), _base({(2048, "float", "sum"): (1.0, 1.0)}))
    assert (r.ok, r.sizes) == (False, [])
    assert r.problems == ["1 baseline row(s) not in the run (datatype/op float/sum; sizes 2 KiB)",
                          "no message size in common with the baseline"]
    # a run without figures: nothing measured, so no row is named missing
    r = compare(_run(status="failed", reason="no rows"), _base({(2048, "float", "sum"): (1.0, 1.0)}))
    assert r.problems == ["run failed: no rows", "no message size in common with the baseline"]


# --------------------------------------------------------------------------- size-keyed (legacy) baselines


def test_a_legacy_baseline_compares_out_of_place_of_a_one_series_run():
    run = _run((MiB, "float", "sum", 80.0, 1.0), (2 * MiB, "float", "sum", 100.0, 100.0))
    base = _base({(MiB, "", ""): (100.0, None), (4 * MiB, "", ""): (1.0, None)}, legacy=True, set_="old")
    r = compare(run, base)
    assert _sizes(r) == [(MiB, "medium", 100.0, 80.0, 20.0, 10.0, False, "", "", "out-of-place")]
    assert r.problems == ["1 MiB out-of-place: busbw 80 GB/s is 20% below the baseline 100 GB/s (tolerance 10% for "
                          "medium messages)",
                          "1 baseline row(s) not in the run (sizes 4 MiB)"]
    assert (r.set, r.ok) == ("old", False)


def test_a_legacy_baseline_refuses_a_run_of_several_series():
    types = ["float", "int8", "half", "double", "int32", "uint8", "bfloat16"]
    base = _base({(1024, "", ""): (1.0, None)}, legacy=True, set_="old")
    run = _run(*[(1024, t, "sum", 1.0, 1.0) for t in types[:2]], test="", nodes=3)
    r = compare(run, base)
    assert (r.test, r.set, r.ok, r.sizes) == ("", "old", False, [])
    assert r.problems == [
        "run spans 3 nodes, baseline 2",
        "the baseline is keyed by message size only (recorded before per-datatype baselines) and the run has 2 "
        "datatype/op series (float/sum, int8/sum); re-record it with `clusterdef baseline record`"]
    run = _run(*[(1024, t, "" if t == "int8" else "sum", 1.0, 1.0) for t in types])
    assert compare(run, base).problems == [
        "the baseline is keyed by message size only (recorded before per-datatype baselines) and the run has 7 "
        "datatype/op series (float/sum, int8, half/sum, double/sum, int32/sum, uint8/sum); re-record it with "
        "`clusterdef baseline record`"]


def test_the_real_h200_log_against_its_legacy_baseline_and_a_derived_one():
    (run,) = parse_file(H200)
    r = compare(run, _h200_baseline())
    assert r.ok and r.set == "2026.07-r580" and len(r.sizes) == 25
    assert {(s.type, s.redop, s.half) for s in r.sizes} == {("", "", "out-of-place")}
    (both,) = parse(_all_types(H200.read_text()))
    r = compare(both, _h200_baseline())
    assert r.sizes == [] and r.set == "2026.07-r580"
    got = run.busbw()[(MiB, "float", "sum")][0]
    r = compare(run, _one_row_base(run, MiB, got, set="x"))
    assert r.ok and r.set == "x" and _sizes(r) == [(MiB, "medium", got, got, 0.0, 10.0, True, "float", "sum",
                                                      "out-of-place")]


# --------------------------------------------------------------------------- pick


def test_pick_needs_the_same_test_and_node_count():
    run = _run((1024, "float", "sum", 1.0, 1.0))
    other_test = _base({}, test="all_gather_perf")
    other_test.node_group = "su01"
    other_nodes = _base({}, nodes=4)
    right = _base({})
    assert pick([], run) is None and pick([other_test, other_nodes], run, "su01") is None
    assert pick([other_test, other_nodes, right], run, "su01") is right
    grouped = _base({})
    grouped.node_group = "su01"
    assert pick([right, grouped], run, "su01") is grouped and pick([grouped, right], run, "") is right
    assert pick([grouped], run, "su02") is grouped


# --------------------------------------------------------------------------- GPU model and fabric kind

H100, H200_NAME = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


def _on(run: Run, *models: str) -> Run:
    run.gpu_models = list(models)
    return run


def test_another_gpu_model_or_fabric_kind_is_not_compared():
    row = (1024, "float", "sum", 1.0, 1.0)
    busbw = {(1024, "float", "sum"): (1.0, 1.0)}
    base = _base(busbw)
    base.gpu_model, base.fabric = H100, "infiniband"
    r = compare(_on(_run(row), H200_NAME), base)
    assert not r.ok and r.sizes == [] and r.problems == [
        f"run on {H200_NAME}, baseline recorded on {H100}: baselines are per GPU model, record one on {H200_NAME} "
        "(`clusterdef baseline record`)"]
    r = compare(_on(_run(row), H100, H200_NAME), base)
    assert r.problems == [f"run spans GPU models {H100}, {H200_NAME}: a baseline is per GPU model, so no baseline "
                          "compares; run the collective on nodes of one model"]
    assert compare(_on(_run(row), H100), base, fabric="roce").problems == [
        "run over roce, baseline recorded over infiniband: baselines are per fabric kind"]
    assert compare(_on(_run(row), H100), base, fabric="infiniband").ok
    assert compare(_run(row), base).ok  # the log names no GPU: nothing to refuse
    unknown = _base(busbw)
    assert compare(_on(_run(row), H200_NAME), unknown, fabric="roce").ok  # the baseline does not say


def test_pick_takes_the_baseline_of_the_runs_gpu_model_and_fabric():
    run = _on(_run((1024, "float", "sum", 1.0, 1.0)), H200_NAME)
    h100, h200, h200_roce = _base({}), _base({}), _base({})
    h100.gpu_model, h200.gpu_model, h200_roce.gpu_model = H100, H200_NAME, H200_NAME
    h100.fabric = h200.fabric = "infiniband"
    h200_roce.fabric = "roce"
    assert pick([h100, h200, h200_roce], run) is h200
    assert pick([h100, h200, h200_roce], run, fabric="roce") is h200_roce
    assert pick([h100], run) is h100  # none of its model: picked, and compare() refuses it
    assert not compare(run, h100).ok
