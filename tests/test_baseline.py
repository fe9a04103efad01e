"""nccl-tests parsing on the ten real logs (2018..2026 formats), baselines and regression detection."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from cli_runner import CliRunner

from clusterdef.baseline import (Baseline, band, baseline_from_run, compare, load_baselines, parse, parse_file, pick,
                                 record)
from clusterdef.cli import app
from conftest import MATRICES

LOGS = Path(__file__).parent / "fixtures" / "nccl-tests"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "reference" / "nccl-tests"

# log -> [(test, status, rows, avg busbw, nodes, ranks, gpu model)] taken from the logs and their INDEX.md
EXPECTED = {
    "a100-p4d-2node-efa-oldformat-nccl-info.log": [("", "ok", 30, 11.2432, 2, 16, "A100-SXM4-40GB")],
    "b200-gke-a4-2node-16gpu-allgather.log": [("", "ok", 24, 59.3638, 2, 16, "NVIDIA B200")],
    "h100-1node-8gpu-5ops-v2.17.8.log": [
        ("all_reduce_perf", "ok", 10, 437.957, 1, 8, "NVIDIA H100 80GB HBM3"),
        ("all_gather_perf", "ok", 10, 328.618, 1, 8, "NVIDIA H100 80GB HBM3"),
        ("reduce_scatter_perf", "ok", 10, 330.721, 1, 8, "NVIDIA H100 80GB HBM3"),
        ("alltoall_perf", "ok", 10, 313.838, 1, 8, "NVIDIA H100 80GB HBM3"),
        ("sendrecv_perf", "ok", 10, 279.874, 1, 8, "NVIDIA H100 80GB HBM3")],
    "h100-2node-g4-alltoall-abort-sendrecv-degraded.log": [
        ("alltoall_perf", "failed", 0, None, 2, 8, "NVIDIA H100 80GB HBM3"),
        ("sendrecv_perf", "ok", 10, 5.9895, 2, 8, "NVIDIA H100 80GB HBM3")],
    "h100-a3mega-2node-16gpu-mangled-header.log": [("", "ok", 31, 70.742, 2, 16, "NVIDIA H100 80GB HBM3")],
    "h200-2node-np2-g8-v2.18.3-ucxwarn.log": [("all_reduce_perf", "ok", 25, 178.222, 2, 16, "NVIDIA H200")],
    "l40s-2node-2gpu-per-proc-ocp.log": [("", "ok", 31, 4.74277, 2, 4, "NVIDIA L40S")],
    "olivia-gh200-2node-v2.18.3.log": [("all_reduce_perf", "ok", 28, 17.8617, 2, 8, "NVIDIA GH200 120GB")],
    "p100-8gpu-nccl1-ancient-format-abort.log": [("", "failed", 0, None, 1, 8, "Tesla P100-PCIE-16GB")],
    "t4-3node-c0-validation-off-oldformat.log": [("", "ok", 11, 0.58536, 3, 3, "Tesla T4")],
}


def test_fixtures_match_the_shared_reference():
    logs = sorted(p.name for p in LOGS.glob("*.log"))
    assert logs == sorted(EXPECTED)
    for name in logs:
        assert (LOGS / f"{name}.source").is_file()
        if SHARED.is_dir():
            assert (LOGS / name).read_bytes() == (SHARED / name).read_bytes()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_real_log_parses_to_its_figures_or_a_reason(name):
    runs = parse_file(LOGS / name)
    got = [(r.test, r.status, len(r.rows), r.avg_busbw_gbps, r.nodes, r.ranks, r.gpu_models[0]) for r in runs]
    assert got == EXPECTED[name]
    for r in runs:
        if r.status != "ok":
            assert r.reason, "a failed run names its reason"
        else:
            assert r.wrong_total == 0 and r.reason == ""
            # avg busbw is the mean of both halves over all rows (to the log's printed precision)
            halves = [h.busbw_gbps for row in r.rows for h in (row.out_of_place, row.in_place)]
            assert sum(halves) / len(halves) == pytest.approx(r.avg_busbw_gbps, rel=0.02, abs=0.01)


def test_specific_figures():
    (h200,) = parse_file(LOGS / "h200-2node-np2-g8-v2.18.3-ucxwarn.log")
    assert h200.nccl_version == "2.30.4+cuda13.2" and h200.nccl_tests_version == "2.18.3"
    assert h200.hosts == ["nvidiatools-dell-h200-2-workload", "nvidiatools-dell-h200-3-workload"]
    assert h200.gpus_per_node == 8 and h200.gpus_per_process == 8
    assert h200.busbw()[(16777216, "float", "sum")] == (103.37, 151.52)
    assert h200.busbw()[(17179869184, "float", "sum")] == (485.66, 485.52)
    abort = parse_file(LOGS / "h100-2node-g4-alltoall-abort-sendrecv-degraded.log")
    assert "remote process exited" in abort[0].reason
    assert abort[1].rows[-1].out_of_place.time_us == 1.6e7 and abort[1].rows[0].in_place.wrong is None
    (p100,) = parse_file(LOGS / "p100-8gpu-nccl1-ancient-format-abort.log")
    assert "unhandled cuda error" in p100.reason and p100.nccl_version == "1.0" and p100.check_column == "res"
    (a100,) = parse_file(LOGS / "a100-p4d-2node-efa-oldformat-nccl-info.log")
    assert a100.check_column == "error" and a100.rows[0].out_of_place.error == 2e-7
    assert a100.nccl_version == "2.9.9+cuda11.2" and a100.busbw()[(4294967296, "float", "sum")][0] == 43.81
    (t4,) = parse_file(LOGS / "t4-3node-c0-validation-off-oldformat.log")
    assert t4.validation is False and t4.rows[0].out_of_place.wrong is None and t4.rows[0].size == 104857600


def test_matrices_baselines_match_their_logs():
    for path in sorted((MATRICES / "baselines").glob("*.yaml")):
        (b,) = load_baselines(path)
        log = b.source.split(" ")[0].split("/")[-1]
        (run,) = [r for r in parse_file(LOGS / log) if not r.test or r.test == b.test]
        assert b.legacy  # recorded before per-datatype keys: size -> out-of-place busbw
        assert {(k[0], "", ""): (v[0], None) for k, v in run.busbw().items()} == b.busbw, path.name
        assert run.avg_busbw_gbps == b.avg_busbw_gbps and run.nodes == b.nodes
        assert run.gpu_models == [b.gpu_model] and b.fabric in ("ethernet", "roce"), path.name  # what plan checks
        assert compare(run, b).ok


def _scaled(text: str, factor_from: int, factor: float) -> str:
    """The log with out-of-place busbw of every row of size >= factor_from multiplied by factor."""
    out = []
    for line in text.splitlines():
        tok = line.split()
        if len(tok) == 13 and tok[0].isdigit() and int(tok[0]) >= factor_from:
            tok[7] = f"{float(tok[7]) * factor:.2f}"
            line = " ".join(tok)
        out.append(line)
    return "\n".join(out) + "\n"


def _h200_baseline() -> Baseline:
    return load_baselines(MATRICES / "baselines" / "2026.07-r580.yaml")[0]


def test_regression_in_large_messages_fails_naming_sizes_and_percentages():
    text = (LOGS / "h200-2node-np2-g8-v2.18.3-ucxwarn.log").read_text()
    (run,) = parse(_scaled(text, 1 << 30, 0.9))
    assert run.status == "ok"  # nothing errored ...
    result = compare(run, _h200_baseline())
    assert not result.ok  # ... yet it is a regression
    bad = [s for s in result.sizes if not s.ok]
    assert [s.size for s in bad] == [1 << 30, 2 << 30, 4 << 30, 8 << 30, 16 << 30]
    assert all(9.9 <= s.drop_pct <= 10.1 and s.band == "large" for s in bad)
    assert any("1 GiB" in p and "10" in p and "%" in p for p in result.problems)
    # a 3% dip in large messages is inside the 5% band
    (ok_run,) = parse(_scaled(text, 1 << 30, 0.97))
    assert compare(ok_run, _h200_baseline()).ok
    # but a tighter tolerance catches it
    assert not compare(ok_run, _h200_baseline(), {"large": 2.0}).ok


def test_nonzero_wrong_fails_even_with_good_bandwidth():
    text = (LOGS / "h200-2node-np2-g8-v2.18.3-ucxwarn.log").read_text()
    lines = text.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.strip().startswith("1048576 "))
    tok = lines[i].split()
    tok[8] = "3"
    lines[i] = " ".join(tok)
    (run,) = parse("\n".join(lines))
    assert run.status == "failed" and "wrong" in run.reason and "1 MiB" in run.reason
    result = compare(run, _h200_baseline())
    assert not result.ok and all(s.ok for s in result.sizes)


def test_incomplete_run_is_reported_not_compared_as_good():
    text = (LOGS / "olivia-gh200-2node-v2.18.3.log").read_text()
    cut = text[: text.index("# Out of bounds")]
    cut = "\n".join(cut.splitlines()[:-5])
    (run,) = parse(cut)
    assert run.status == "incomplete" and "Avg bus bandwidth" in run.reason
    base = Baseline("x", "all_reduce_perf", 2, 4, run.busbw())
    assert not compare(run, base).ok


def test_bands():
    assert band(1024) == "small" and band(1 << 20) == "medium" and band(256 << 20) == "large"


def test_record_and_pick(tmp_path):
    (b200,) = parse_file(LOGS / "b200-gke-a4-2node-16gpu-allgather.log")
    b200.test = "all_gather_perf"
    f = tmp_path / "b.yaml"
    f.write_text((MATRICES / "baselines" / "2026.07-r580.yaml").read_text())
    f.write_text(record(f, baseline_from_run(b200, "2026.07-r580", "su01", "b200.log")))
    f.write_text(record(f, baseline_from_run(b200, "2026.07-r580", "su01", "b200.log")))  # replaces, not appends
    entries = load_baselines(f)
    assert [(e.test, e.node_group, e.nodes) for e in entries] == [("all_reduce_perf", "", 2),
                                                                  ("all_gather_perf", "su01", 2)]
    assert pick(entries, b200, "su01").node_group == "su01"
    assert "# Performance baseline" in f.read_text()  # comments kept


MANGLES = st.lists(st.sampled_from(["drop", "dup", "cut", "noise", "swap", "garbage"]), max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=MANGLES, seed=st.integers(0, 10_000), junk=st.text(max_size=80),
       name=st.sampled_from(sorted(EXPECTED)))
def test_parser_never_raises_on_mangled_logs(ops, seed, junk, name):
    import random

    rnd = random.Random(seed)
    lines = (LOGS / name).read_text().splitlines()
    for op in ops:
        if not lines:
            break
        i = rnd.randrange(len(lines))
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "cut":
            lines[i] = lines[i][: rnd.randrange(len(lines[i]) + 1)]
        elif op == "noise":
            lines.insert(i, "NCCL INFO " + junk)
        elif op == "swap":
            j = rnd.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        else:
            lines[i] = junk
    for run in parse("\n".join(lines)):
        assert run.status in ("ok", "failed", "incomplete")
        assert run.status == "ok" or run.reason


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_parser_never_raises_on_arbitrary_text(text):
    for run in parse(text):
        assert run.status in ("ok", "failed", "incomplete")


runner = CliRunner()


def test_cli_parse_and_compare():
    r = runner.invoke(app, ["baseline", "parse", str(LOGS / "h100-2node-g4-alltoall-abort-sendrecv-degraded.log")])
    assert r.exit_code == 1 and "remote process exited" in r.output
    r = runner.invoke(app, ["baseline", "compare", str(LOGS / "h200-2node-np2-g8-v2.18.3-ucxwarn.log"),
                            "--set", "2026.07-r580", "--matrices", str(MATRICES)])
    assert r.exit_code == 0, r.output
    assert "pass" in r.output


def test_cli_compare_regression_exit_1(tmp_path):
    log = tmp_path / "slow.log"
    log.write_text(_scaled((LOGS / "h200-2node-np2-g8-v2.18.3-ucxwarn.log").read_text(), 256 << 20, 0.8))
    r = runner.invoke(app, ["baseline", "compare", str(log), "--set", "2026.07-r580", "--matrices", str(MATRICES)])
    assert r.exit_code == 1
    assert "FAIL" in r.output
    # 394.69 GB/s in the baseline, 315.75 measured: the figures, the drop and the band's tolerance
    assert ("256 MiB out-of-place: busbw 315.75 GB/s is 20% below the baseline 394.69 GB/s "
            "(tolerance 5% for large messages)") in " ".join(r.output.split()), r.output


def test_cli_bad_inputs_exit_2(tmp_path):
    bad = tmp_path / "b.yaml"
    bad.write_text("- not a mapping\n")
    log = str(LOGS / "h200-2node-np2-g8-v2.18.3-ucxwarn.log")
    r = runner.invoke(app, ["baseline", "compare", log, "--baseline", str(bad)])
    assert r.exit_code == 2 and "b.yaml" in r.output
    for tol in ("huge=3", "large=inf", "large=nan", "small=150", "medium=-1", "large=1e400"):
        r = runner.invoke(app, ["baseline", "compare", log, "--set", "2026.07-r580", "--tolerance", tol,
                                "--matrices", str(MATRICES)])
        assert r.exit_code == 2 and "from 0 to 100" in r.output, (tol, r.output)
    r = runner.invoke(app, ["baseline", "record", str(LOGS / "p100-8gpu-nccl1-ancient-format-abort.log"),
                            "--set", "2026.07-r580", "-o", str(tmp_path / "x.yaml")])
    assert r.exit_code == 2 and "failed" in r.output and not (tmp_path / "x.yaml").exists()
    assert os.path.exists(log)


# --------------------------------------------------------------------------- per datatype and op

H200 = LOGS / "h200-2node-np2-g8-v2.18.3-ucxwarn.log"


def _all_types(text: str, int8_factor: float = 1.0) -> str:
    """A `-d all`-shaped log derived from the real H200 float log: after every float row an int8
    row of the same size (count = size) whose busbw is the float figure times int8_factor. The
    reference has no real `-d all` log, so the second datatype is made from the first."""
    out = []
    for line in text.splitlines():
        out.append(line)
        tok = line.split()
        if len(tok) == 13 and tok[0].isdigit() and tok[2] == "float":
            tok[1], tok[2] = tok[0], "int8"
            for i in (7, 11):
                tok[i] = f"{float(tok[i]) * int8_factor:.2f}"
            out.append(" ".join(tok))
    return "\n".join(out) + "\n"


def _record(tmp_path, text: str, name: str = "b.yaml") -> list[Baseline]:
    (run,) = parse(text)
    f = tmp_path / name
    f.write_text(record(f, baseline_from_run(run, "2026.07-r580", "", "derived.log")))
    return load_baselines(f)


def test_peaks_over_every_row_and_both_halves():
    # read by eye from the logs: the H200 log's highest busbw is the 16 GiB out-of-place row;
    # the B200 log's is an in-place figure (2 GiB row), above every out-of-place one (261.57)
    (h200,) = parse_file(H200)
    bw, row, half = h200.peak()
    assert (bw, row.size, half) == (485.66, 17179869184, "out-of-place")
    (b200,) = parse_file(LOGS / "b200-gke-a4-2node-16gpu-allgather.log")
    bw, row, half = b200.peak()
    assert (bw, row.size, half) == (268.59, 2147483648, "in-place")
    # the CLI prints that peak, not the out-of-place one
    r = runner.invoke(app, ["baseline", "parse", str(LOGS / "b200-gke-a4-2node-16gpu-allgather.log")])
    assert "peak busbw 268.59 GB/s (2 GiB float/none in-place)" in r.output, r.output
    # with a second datatype per size, the peak still comes from the row that has it
    (both,) = parse(_all_types(H200.read_text(), 0.5))
    assert both.peak()[0] == 485.66 and both.peak()[1].type == "float" and len(both.rows) == 50
    assert both.series() == [("float", "sum"), ("int8", "sum")]


def test_every_datatype_is_kept_and_a_slow_int8_fails(tmp_path):
    (base,) = _record(tmp_path, _all_types(H200.read_text()))
    assert not base.legacy and len(base.busbw) == 50
    assert base.busbw[(1 << 30, "int8", "sum")] == (458.75, 459.09)
    text = (tmp_path / "b.yaml").read_text()
    assert "float/sum:" in text and "int8/sum:" in text and "'1073741824': [458.75, 459.09]" in text
    (same,) = parse(_all_types(H200.read_text()))
    assert compare(same, base).ok
    (slow,) = parse(_all_types(H200.read_text(), 0.7))  # int8 rows 30% slower, float rows unchanged
    result = compare(slow, base)
    assert not result.ok
    bad = [s for s in result.sizes if not s.ok]
    assert bad and {s.type for s in bad} == {"int8"}
    assert {s.half for s in bad} == {"out-of-place", "in-place"}
    assert any(p.startswith("16 GiB int8/sum out-of-place: busbw") for p in result.problems), result.problems
    assert all("float" not in p for p in result.problems)


def test_small_and_medium_sizes_against_their_tolerances(tmp_path):
    base = _h200_baseline()  # small < 1 MiB tolerates 25%, medium < 256 MiB 10%
    text = H200.read_text()

    def slowed(lo: int, hi: int, factor: float):
        out = []
        for line in text.splitlines():
            tok = line.split()
            if len(tok) == 13 and tok[0].isdigit() and lo <= int(tok[0]) < hi:
                tok[7] = f"{float(tok[7]) * factor:.2f}"
                line = " ".join(tok)
            out.append(line)
        (run,) = parse("\n".join(out))
        return compare(run, base)

    # 64 KiB..512 KiB rows (busbw >= 1.75 GB/s, so rounding to 2 decimals stays far from the line)
    assert slowed(64 << 10, 1 << 20, 0.80).ok  # 20% is inside small's 25%
    r = slowed(64 << 10, 1 << 20, 0.70)
    assert not r.ok and {s.band for s in r.sizes if not s.ok} == {"small"}
    assert any("64 KiB" in p and "small messages" in p for p in r.problems)
    assert slowed(1 << 20, 256 << 20, 0.93).ok  # 7% inside medium's 10%
    r = slowed(1 << 20, 256 << 20, 0.85)
    assert not r.ok and {s.band for s in r.sizes if not s.ok} == {"medium"}
    assert [s.size for s in r.sizes if not s.ok] == [1 << k for k in range(20, 28)]


def test_a_baseline_for_another_node_count_or_test_is_refused(tmp_path):
    (run,) = parse_file(H200)
    base = _h200_baseline()
    other_nodes = Baseline(base.set, base.test, 4, base.gpus_per_node, base.busbw, legacy=True)
    r = compare(run, other_nodes)
    assert not r.ok and "run spans 2 nodes, baseline 4" in r.problems
    other_test = Baseline(base.set, "all_gather_perf", 2, 8, base.busbw, legacy=True)
    r = compare(run, other_test)
    assert not r.ok and "run is all_reduce_perf, baseline is all_gather_perf" in r.problems
    assert pick([other_nodes, other_test], run) is None
    f = tmp_path / "b.yaml"
    f.write_text("set: x\ntest: all_reduce_perf\nnodes: 4\nbusbw_gbps:\n  float/sum:\n    '1024': [0.04, 0.04]\n")
    r = runner.invoke(app, ["baseline", "compare", str(H200), "--baseline", str(f)])
    assert r.exit_code == 2 and "no baseline for all_reduce_perf on 2 node(s)" in r.output


def test_old_size_keyed_baseline_refuses_a_run_with_several_datatypes():
    (both,) = parse(_all_types(H200.read_text()))
    r = compare(both, _h200_baseline())
    assert not r.ok and "keyed by message size only" in r.problems[0] and "re-record" in r.problems[0]
    assert "float/sum, int8/sum" in r.problems[0]


def test_a_run_missing_baseline_rows_fails(tmp_path):
    (base,) = _record(tmp_path, _all_types(H200.read_text()))
    (float_only,) = parse_file(H200)
    r = compare(float_only, base)
    assert not r.ok and any("25 baseline row(s) not in the run (datatype/op int8/sum; sizes 1 KiB..16 GiB)" in p
                            for p in r.problems), r.problems


def test_size_range_has_one_unit_style():
    from clusterdef.baseline import size_range

    assert size_range([1024, 17179869184]) == "1 KiB..16 GiB"
    assert size_range([33553920, 17179868160]) == "33553920 B..17179868160 B"
    assert size_range([8, 8 << 30]) == "8 B..8 GiB"
    assert size_range([1000, 33553920]) == "1000 B..33553920 B"


def test_one_run_is_chosen_and_tolerances_are_bounded():
    """baseline record/compare take one run of a log (the only one, or --test) and tolerances
    within 0..100 per known band; anything else is a BaselineError naming the option."""
    from clusterdef.baseline import BaselineError, choose_run, parse_tolerance

    log = LOGS / "h100-1node-8gpu-5ops-v2.17.8.log"
    runs = parse_file(log)
    assert len(runs) > 1
    assert choose_run(runs, runs[1].test, log) is runs[1]
    with pytest.raises(BaselineError, match=r"holds \d+ runs .*choose one with --test"):
        choose_run(runs, None, log)
    with pytest.raises(BaselineError, match="no sendrecv_perf_x run in"):
        choose_run(runs, "sendrecv_perf_x", log)
    assert parse_tolerance(["small=30", "large=0"]) == {"small": 30.0, "large": 0.0}
    for bad in ("huge=5", "large=101", "large=nan", "large=inf", "large"):
        with pytest.raises(BaselineError, match=r"--tolerance .*PCT a number from 0 to 100"):
            parse_tolerance([bad])


# --------------------------------------------------------------------------- compare and pick, exactly


def _one_row_base(run, size: int, want_oop, want_ip=None, **kw) -> Baseline:
    return Baseline(kw.pop("set", "s"), kw.pop("test", run.test), kw.pop("nodes", run.nodes),
                    kw.pop("gpus", run.gpus_per_node), {(size, "float", "sum"): (want_oop, want_ip)}, **kw)


def test_a_drop_of_exactly_the_tolerance_passes_and_a_hair_more_fails():
    (run,) = parse_file(H200)
    got = run.busbw()[(1 << 20, "float", "sum")][0]  # medium: 10%
    r = compare(run, _one_row_base(run, 1 << 20, round(got / 0.9, 6)))
    assert [(s.size, s.band, s.drop_pct, s.tolerance_pct, s.ok, s.type, s.redop, s.half) for s in r.sizes] == [
        (1 << 20, "medium", 10.0, 10.0, True, "float", "sum", "out-of-place")]
    assert r.ok and r.problems == [] and r.test == "all_reduce_perf" and r.set == "s"
    r = compare(run, _one_row_base(run, 1 << 20, round(got / 0.8999, 6)))
    assert not r.ok and r.sizes[0].drop_pct == 10.01
    # a zero baseline figure cannot drop; both halves are compared when the baseline has both
    ip = run.busbw()[(1 << 20, "float", "sum")][1]
    r = compare(run, _one_row_base(run, 1 << 20, 0.0, ip * 2))
    assert [(s.half, s.drop_pct, s.ok) for s in r.sizes] == [("out-of-place", 0.0, True), ("in-place", 50.0, False)]
    assert r.problems == [f"1 MiB float/sum in-place: busbw {ip:g} GB/s is 50% below the baseline {ip * 2:g} GB/s "
                          "(tolerance 10% for medium messages)"]


def test_no_size_in_common_and_missing_rows_are_both_named():
    (run,) = parse_file(H200)
    r = compare(run, _one_row_base(run, 3, 1.0))
    assert not r.ok and r.sizes == []
    assert r.problems == ["1 baseline row(s) not in the run (datatype/op float/sum; sizes 3 B)",
                          "no message size in common with the baseline"]


def test_mismatch_problems_are_worded_exactly():
    (run,) = parse_file(H200)
    got = run.busbw()[(1 << 20, "float", "sum")][0]
    r = compare(run, _one_row_base(run, 1 << 20, got, gpus=4))
    assert r.problems == ["run has 8 GPUs per node, baseline 4"]
    assert compare(run, _one_row_base(run, 1 << 20, got, gpus=None)).ok  # unknown GPUs per node: not compared
    (failed, _) = parse_file(LOGS / "h100-2node-g4-alltoall-abort-sendrecv-degraded.log")
    r = compare(failed, _one_row_base(failed, 1 << 20, 1.0))
    assert r.problems[0] == f"run failed: {failed.reason}"


def test_pick_prefers_the_node_group_then_the_generic_entry():
    (run,) = parse_file(H200)
    generic = _one_row_base(run, 1, 1.0)
    su01 = _one_row_base(run, 1, 1.0, node_group="su01")
    su02 = _one_row_base(run, 1, 1.0, node_group="su02")
    other = _one_row_base(run, 1, 1.0, nodes=4)
    assert pick([su01, generic, su02, other], run, "su02") is su02
    assert pick([su01, generic, su02, other], run, "") is generic
    assert pick([su01, generic, su02, other], run, "su09") is generic
    assert pick([su01, su02, other], run, "") is su01  # no generic entry: the first of the right size
    assert pick([su01, su02], run, "su02") is su02
    assert pick([other], run) is None


# --------------------------------------------------------------------------- baseline files, field by field
TAIL = "; an entry needs test, nodes and busbw_gbps {datatype/op: {size: [out-of-place, in-place] GB/s}}"
GOOD = {"set": "s", "test": "all_reduce_perf", "nodes": 2, "busbw_gbps": {"float/sum": {"1024": [0.04, 0.05]}}}


def _dump(f, data) -> None:
    from ruamel.yaml import YAML

    with f.open("w") as fh:
        YAML(typ="safe").dump(data, fh)


@pytest.mark.parametrize("change, field, want, got", [
    ({"nodes": 0}, "nodes", "a positive whole number", "0"),
    ({"nodes": True}, "nodes", "a positive whole number", "True"),
    ({"nodes": 1 << 31}, "nodes", "a positive whole number", str(1 << 31)),
    ({"nodes": "2"}, "nodes", "a positive whole number", "'2'"),
    ({"gpus_per_node": 0}, "gpus_per_node", "a positive whole number", "0"),
    ({"test": 5}, "test", "the nccl-tests name (e.g. all_reduce_perf)", "5"),
    ({"busbw_gbps": {}}, "busbw_gbps",
     "a mapping of datatype/op to {size (bytes): [out-of-place, in-place] GB/s}", "{}"),
    ({"avg_busbw_gbps": -1}, "avg_busbw_gbps", "a finite, non-negative GB/s figure", "-1"),
])
def test_baseline_entry_fields_are_checked_with_a_message(tmp_path, change, field, want, got):
    f = tmp_path / "b.yaml"
    _dump(f, {**GOOD, **change})
    with pytest.raises(Exception) as exc:
        load_baselines(f)
    assert str(exc.value) == f"{f}: `{field}` must be {want} (got {got}){TAIL}"


@pytest.mark.parametrize("busbw", [
    {"float/sum": {"1024": [0.04]}}, {"float/sum": {"1024": [0.04, 0.1, 0.2]}}, {"float/sum": {"1024": 0.04,
                                                                                              "2048": {}}},
    {"float/sum": {"1024": [-0.1, 0.1]}}, {"float/sum": {"1024": [float("nan"), 0.1]}},
    {"float/sum": {"1024": [True, 0.1]}}, {"float/sum": {"-1": [0.1, 0.1]}}, {"float/sum": {str(1 << 62): [0.1, 0.1]}},
    {"float/sum": {}}, {"1024": True},
])
def test_malformed_busbw_is_refused(tmp_path, busbw):
    f = tmp_path / "b.yaml"
    _dump(f, {**GOOD, "busbw_gbps": busbw})
    with pytest.raises(Exception) as exc:
        load_baselines(f)
    assert str(exc.value).startswith(f"{f}: `busbw_gbps` must be datatype/op mapped to sizes in bytes")


def test_baseline_entry_limits_and_defaults(tmp_path):
    f = tmp_path / "b.yaml"
    _dump(f, {**GOOD, "nodes": 1, "gpus_per_node": (1 << 31) - 1, "node_group": None,
                           "busbw_gbps": {"float/sum": {"0": [0, None], str((1 << 62) - 1): [1, 2]},
                                          "int8": {"8": [1.5, 2]}}})
    (b,) = load_baselines(f)
    assert (b.set, b.test, b.nodes, b.gpus_per_node, b.node_group, b.avg_busbw_gbps, b.source, b.legacy) == (
        "s", "all_reduce_perf", 1, (1 << 31) - 1, "", None, "", False)
    assert b.busbw == {(0, "float", "sum"): (0.0, None), ((1 << 62) - 1, "float", "sum"): (1.0, 2.0),
                       (8, "int8", ""): (1.5, 2.0)}
    assert b.series() == [("float", "sum"), ("int8", "")] and b.key() == ("all_reduce_perf", "", 1)
    _dump(f, {"test": "t", "nodes": 3, "busbw_gbps": {"1024": 0.5}})
    (legacy,) = load_baselines(f)
    assert legacy.set == "b" and legacy.legacy and legacy.busbw == {(1024, "", ""): (0.5, None)}


def test_record_replaces_by_test_group_and_count(tmp_path):
    (run,) = parse_file(H200)
    f = tmp_path / "new.yaml"
    first = record(f, baseline_from_run(run, "2026.07-r580"))  # a new file: the entry at the top level
    f.write_text(first)
    assert "entries" not in first and first.startswith("set: 2026.07-r580\ntest: all_reduce_perf\nnode_group: ''\n")
    assert "'1024': [0.04, 0.04]" in first  # the pair in flow style, the rest block style
    assert record(f, baseline_from_run(run, "2026.07-r580")) == first  # the same key replaces the top entry
    f.write_text(record(f, baseline_from_run(run, "2026.07-r580", "su01")))
    f.write_text(record(f, baseline_from_run(run, "2026.07-r580", "su02")))
    four = baseline_from_run(run, "2026.07-r580", "su01")
    four["nodes"] = 4
    f.write_text(record(f, four))
    f.write_text(record(f, baseline_from_run(run, "2026.07-r580", "su01", "again.log")))  # replaces su01/2
    got = [(b.set, b.node_group, b.nodes, b.source) for b in load_baselines(f)]
    assert got == [("2026.07-r580", "", 2, ""), ("2026.07-r580", "su01", 2, "again.log"),
                   ("2026.07-r580", "su02", 2, ""), ("2026.07-r580", "su01", 4, "")]


def test_entries_take_the_file_set_and_name_their_index(tmp_path):
    f = tmp_path / "2030.01-x.yaml"
    _dump(f, {"entries": [{"test": "t", "nodes": 2, "busbw_gbps": {"1024": 1.0}},
                          {"set": "other", "test": "t", "nodes": 3, "busbw_gbps": {"1024": 1.0}}]})
    assert [(b.set, b.nodes) for b in load_baselines(f)] == [("2030.01-x", 2), ("other", 3)]
    _dump(f, {"set": "s", "entries": [{"test": "t", "nodes": 2, "busbw_gbps": {"1024": 1.0}},
                                      {"test": "t", "nodes": 0, "busbw_gbps": {"1024": 1.0}}]})
    with pytest.raises(Exception) as exc:
        load_baselines(f)
    assert str(exc.value).startswith(f"{f}: entries[1]: `nodes` must be a positive whole number (got 0)")
    for data, message in (([1], "a baseline file is a mapping with set, test, nodes and busbw_gbps"),
                          ({"entries": {"a": 1}}, "`entries` must be a list of baseline entries"),
                          ({"entries": [{"test": "t"}, 5]}, "entries[1] is not a mapping")):
        _dump(f, data)
        with pytest.raises(Exception) as exc:
            load_baselines(f)
        assert str(exc.value) == f"{f}: {message}"
