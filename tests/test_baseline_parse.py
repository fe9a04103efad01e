"""The nccl-tests parser field by field: every real log's whole parse against a reviewed golden
(tests/golden_baseline/, `CLUSTERDEF_REFRESH_GOLDEN=1` rewrites it: review the diff), and small
hand-written logs for the branches no real log takes, each with its expected figures written out
by hand. Issue #18: the parser's mutants that the figure tests of test_baseline.py let through."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clusterdef.baseline.parse import BaselineError, choose_run, parse, parse_file, size_range

LOGS = Path(__file__).parent / "fixtures" / "nccl-tests"
GOLDEN = Path(__file__).parent / "golden_baseline"
REFRESH = os.environ.get("CLUSTERDEF_REFRESH_GOLDEN") == "1"

HEAD = """\
# nccl-tests version 2.18.3 nccl-headers=22703 nccl-library=22703
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1001 on     gpu01 device  0 [0000:18:00] NVIDIA H200
#  Rank  1 Group  0 Pid   1002 on     gpu02 device  0 [0000:18:00] NVIDIA H200
#
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
"""
ROW_1K = "        1024           256     float     sum      -1    10.00    0.10    0.10       0    11.00    0.09    0.09       0"
ROW_2K = "        2048           512     float     sum      -1    12.00    0.17    0.17       0    13.00    0.16    0.16       0"
FOOT = """\
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.13
#
# Collective test concluded: all_reduce_perf
"""


def log(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def only(text: str):
    (run,) = parse(text)
    return run


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("*.log")))
def test_every_real_log_parses_to_its_reviewed_golden(name):
    got = [r.to_json() for r in parse_file(LOGS / name)]
    golden = GOLDEN / f"{name}.json"
    if REFRESH:
        golden.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert got == json.loads(golden.read_text()), f"refresh with CLUSTERDEF_REFRESH_GOLDEN=1 and review {golden}"


def test_golden_figures_read_off_the_logs():
    """A few figures of the goldens checked against the log text by eye, so the goldens are not
    only what the parser once said."""
    h200 = json.loads((GOLDEN / "h200-2node-np2-g8-v2.18.3-ucxwarn.log.json").read_text())[0]
    assert (h200["threads"], h200["gpus_per_process"], h200["min_bytes"], h200["max_bytes"]) == (1, 8, 1024, 17179869184)
    assert h200["validation"] is True and h200["check_column"] == "#wrong"
    assert h200["nodes"] == 2 and h200["gpus_per_node"] == 8 and h200["wrong_total"] == 0
    first = h200["rows"][0]
    assert (first["size"], first["count"], first["type"], first["redop"], first["root"]) == (1024, 256, "float", "sum", -1)


def test_a_whole_synthetic_run_field_by_field():
    run = only(HEAD + log(ROW_1K, ROW_2K) + FOOT)
    assert (run.test, run.status, run.reason, run.first_line) == ("all_reduce_perf", "ok", "", 1)
    assert run.nccl_tests_version == "2.18.3" and run.nccl_version == "2.27.3"  # from nccl-library=22703
    assert (run.threads, run.gpus_per_process, run.min_bytes, run.max_bytes, run.validation) == (1, 1, 1024, 2048, True)
    assert (run.ranks, run.hosts, run.gpu_models, run.check_column) == (2, ["gpu01", "gpu02"], ["NVIDIA H200"], "#wrong")
    assert (run.avg_busbw_gbps, run.out_of_bounds, run.failures) == (0.13, 0, [])
    r = run.rows[0]
    assert (r.size, r.count, r.type, r.redop, r.root) == (1024, 256, "float", "sum", -1)
    assert (r.out_of_place.time_us, r.out_of_place.algbw_gbps, r.out_of_place.busbw_gbps, r.out_of_place.wrong) == (
        10.0, 0.1, 0.1, 0)
    assert (r.in_place.time_us, r.in_place.algbw_gbps, r.in_place.busbw_gbps, r.in_place.wrong) == (11.0, 0.09, 0.09, 0)
    assert r.out_of_place.error is None
    assert run.busbw() == {(1024, "float", "sum"): (0.1, 0.09), (2048, "float", "sum"): (0.17, 0.16)}


def test_library_code_and_the_nccl_version_line():
    assert only(HEAD.replace("22703", "30402") + log(ROW_1K) + FOOT).nccl_version == "3.4.2"
    with_line = HEAD + log("gpu01:1:1 [0] NCCL INFO NCCL version 2.27.3+cuda12.9", "NCCL version 2.27.5+cuda12.9",
                           ROW_1K) + FOOT
    assert only(with_line).nccl_version == "2.27.5+cuda12.9"  # the NCCL INFO line is skipped, the plain one read
    assert only(HEAD + log("NCCL version 2.27.5", ROW_1K) + FOOT).nccl_version == "2.27.5"
    # an earlier version line wins over the library code of a later header of the same run
    early = log("NCCL version 2.21.5+cuda12.4") + HEAD.split("\n", 1)[0]
    (run,) = [r for r in parse(early + "\n" + HEAD.split("\n", 1)[1] + log(ROW_1K) + FOOT) if r.rows]
    assert run.nccl_version == "2.27.3"


def test_launcher_prefixes_are_stripped():
    srun = "".join(f"0: {line}\n" for line in (HEAD + log(ROW_1K, ROW_2K) + FOOT).splitlines())
    mpi = "".join(f"[1,0]<stdout>:{line}\n" for line in (HEAD + log(ROW_1K, ROW_2K) + FOOT).splitlines())
    for text in (srun, mpi):
        run = only(text)
        assert (run.status, len(run.rows), run.rows[0].size, run.hosts) == ("ok", 2, 1024, ["gpu01", "gpu02"])


def test_rows_that_are_not_rows():
    bad = [
        ROW_1K.replace("0.10    0.10", "0.10    inf", 1),  # a non-finite figure
        ROW_1K.replace("float", "FLOAT"),  # not a datatype name
        ROW_1K.replace("     sum      -1", " sum -1 x9 y9"),  # too many leading fields
        ROW_1K.replace("10.00", "fast", 1),  # a time that is not a number
        ROW_1K.replace("    0.10    0.10       0    11.00", "    0.10    0.10       z    11.00"),  # bad #wrong
        "1024 256 float",  # too short
        "1024 x256 float sum -1 1 1 1 0 1 1 1 0",  # a count that is not a number
    ]
    for line in bad:
        run = only(HEAD + log(ROW_2K, line) + FOOT)
        assert [r.size for r in run.rows] == [2048], line


def test_row_variants_that_are_rows():
    eleven = "        1024           256     float    10.00    0.10    0.10       0    11.00    0.09    0.09       0"
    na_time = "        1024           256     float     sum      -1      N/A    0.10    0.10     N/A      N/A    0.09    0.09     N/A"
    new_type = ROW_1K.replace("float", "f8e4m3fnuz")  # not in the list, but a datatype's shape
    rooted = ROW_1K.replace("sum      -1", "sum       3")
    for line, want in [(eleven, (1024, "float", "", None)), (na_time, (1024, "float", "sum", -1)),
                       (new_type, (1024, "f8e4m3fnuz", "sum", -1)), (rooted, (1024, "float", "sum", 3))]:
        row = only(HEAD + log(line) + FOOT).rows[0]
        assert (row.size, row.type, row.redop, row.root) == want, line
    row = only(HEAD + log(na_time) + FOOT).rows[0]
    assert row.out_of_place.time_us is None and row.out_of_place.wrong is None and row.in_place.algbw_gbps == 0.09


def test_old_check_columns():
    for column, attr in (("error", "error"), ("res", "error")):
        text = HEAD.replace("#wrong     time   algbw   busbw  #wrong", f"{column}     time   algbw   busbw  {column}")
        run = only(text + log(ROW_1K.replace("       0    11.00", "   2e-07    11.00")) + FOOT)
        assert run.check_column == column
        assert getattr(run.rows[0].out_of_place, attr) == 2e-07 and run.rows[0].out_of_place.wrong is None
        assert run.status == "ok"


def test_wrong_elements_name_their_sizes():
    wrong_in_place = ROW_1K[:-1] + "1"  # the last field: in-place #wrong
    run = only(HEAD + log(wrong_in_place, ROW_2K) + FOOT)
    assert (run.status, run.reason) == ("failed", "1 wrong elements (#wrong) at sizes 1 KiB")
    wrong_out = ROW_2K.replace("0.17       0", "0.17       1")
    assert only(HEAD + log(ROW_1K, wrong_out) + FOOT).reason == "1 wrong elements (#wrong) at sizes 2 KiB"
    nine = [ROW_1K.replace("1024           256", f"{1024 << i:>12} {256 << i:>13}")[:-1] + "2" for i in range(9)]
    reason = only(HEAD + log(*nine) + FOOT).reason
    assert reason == ("18 wrong elements (#wrong) at sizes 1 KiB, 2 KiB, 4 KiB, 8 KiB, 16 KiB, 32 KiB, 64 KiB, "
                      "128 KiB...")
    eight = only(HEAD + log(*nine[:8]) + FOOT).reason
    assert eight.endswith("128 KiB") and "..." not in eight
    two_series = log(ROW_1K[:-1] + "1", ROW_1K.replace("float", " half"))
    assert only(HEAD + two_series + FOOT).reason == "1 wrong elements (#wrong) at sizes 1 KiB float/sum"


def test_footer_failures():
    oob = only(HEAD + log(ROW_1K) + FOOT.replace("values : 0 OK", "values : 3 OK"))
    assert (oob.status, oob.out_of_bounds, oob.reason) == ("failed", 3, "line 12: 3 out-of-bounds values")
    oob_failed = only(HEAD + log(ROW_1K) + FOOT.replace("values : 0 OK", "values : 0 FAILED"))
    assert (oob_failed.status, oob_failed.reason) == ("failed", "line 12: 0 out-of-bounds values")
    slow = only(HEAD + log(ROW_1K) + FOOT.replace("0.13", "0.13 FAILED"))
    assert (slow.status, slow.reason) == ("failed", "line 13: average bus bandwidth below NCCL_TESTS_MIN_BW")
    # a footer failure is the reason as it is: no "(after N result rows)"
    assert "after" not in slow.reason and "after" not in oob.reason


def test_crash_lines_are_failures_and_bounded():
    crash = "gpu01: Test NCCL failure common.cu:1 'unhandled system error'"
    run = only(HEAD + log(ROW_1K, crash))
    assert (run.status, run.reason) == ("failed", f"line 12: {crash} (after 1 result rows)")
    many = only(HEAD + log(*[f"{crash} {i}" for i in range(25)]))
    assert len(many.failures) == 20 and many.failures[-1].endswith(" 19") and many.status == "failed"
    long = "Test CUDA failure " + "x" * 4078  # 4096 characters: the longest line read
    assert len(long) == 4096
    (kept,) = parse(log(long))
    assert kept.failures == [f"line 1: {long[:200]}"]
    assert parse(log(long + "x")) == []  # longer: noise
    commented = parse(HEAD + log(ROW_1K, "# Test NCCL failure in a comment") + FOOT)
    assert [r.status for r in commented] == ["ok"]
    trace = only(HEAD + log(ROW_1K, "gpu01:1:1 [0] NCCL TRACE Test NCCL failure while tracing") + FOOT)
    info = only(HEAD + log(ROW_1K, "gpu01:1:1 [0] NCCL INFO Test NCCL failure, retrying") + FOOT)
    assert trace.status == info.status == "ok" and trace.failures == info.failures == []
    (alone,) = parse(log(crash))  # a crash before any header is a run of its own
    assert (alone.status, alone.first_line, alone.rows) == ("failed", 1, [])


def test_incomplete_runs_name_what_is_missing():
    no_rows = only(HEAD)
    assert (no_rows.status, no_rows.reason) == ("incomplete",
                                                "no result rows: the run stopped before its first message size")
    cut = only(HEAD + log(ROW_1K, ROW_2K))
    assert (cut.status, cut.reason) == ("incomplete", "no '# Avg bus bandwidth' line: the log ends after 2 rows "
                                                      "(last size 2 KiB)")


def test_validation_and_params():
    off = only(HEAD.replace("validation: 1", "validation: 0") + log(ROW_1K) + FOOT)
    assert off.validation is False
    unknown = only(HEAD.replace(" validation: 1", "") + log(ROW_1K) + FOOT)
    assert unknown.validation is None
    two = only(HEAD.replace("nThread 1 nGpus 1", "nThread 2 nGpus 4") + log(ROW_1K) + FOOT)
    assert (two.threads, two.gpus_per_process) == (2, 4)


def test_where_one_run_ends_and_the_next_begins():
    """Each header kind seen again after itself starts a new run; ranks, columns and rows after
    the rows or the footer do too; the footer's concluded line names a run that had no starting line."""
    version, starting, params = HEAD.splitlines()[:3]
    rank = HEAD.splitlines()[5]
    columns = HEAD.splitlines()[8]
    assert [r.nccl_tests_version for r in parse(log(version, params, version, params))] == ["2.18.3", "2.18.3"]
    assert [r.threads for r in parse(log(version, version, params))] == [1]  # a version-only run is not kept
    assert [r.test for r in parse(log(starting, starting.replace("all_reduce", "all_gather")))] == [
        "all_reduce_perf", "all_gather_perf"]
    assert [r.threads for r in parse(log(params, params.replace("nThread 1", "nThread 2")))] == [1, 2]
    assert [r.ranks for r in parse(log(params, rank, columns, ROW_1K, rank))] == [1, 1]
    assert [len(r.rows) for r in parse(log(params, rank, columns, ROW_1K, columns, ROW_2K))] == [1, 1]
    assert [len(r.rows) for r in parse(log(params, columns, ROW_1K, "# Avg bus bandwidth : 0.1", ROW_2K))] == [1, 1]
    same = parse(log(version, starting, params, rank, rank, columns, ROW_1K, ROW_2K))
    assert [(r.ranks, len(r.rows), r.test) for r in same] == [(2, 2, "all_reduce_perf")]
    # the version line begins a run, and the starting and params lines after it belong to it
    assert [(r.nccl_tests_version, r.test, r.threads) for r in parse(log(version, starting, params))] == [
        ("2.18.3", "all_reduce_perf", 1)]
    assert [(r.test, r.threads) for r in parse(log(starting, params))] == [("all_reduce_perf", 1)]
    concluded = only(log(params, columns, ROW_1K, "# Avg bus bandwidth : 0.1", "# Collective test concluded: x_perf"))
    assert concluded.test == "x_perf"
    named = only(log(starting, params, columns, ROW_1K, "# Collective test concluded: other_perf"))
    assert named.test == "all_reduce_perf"
    assert parse(log("# Collective test concluded: x_perf")) == []  # nothing to conclude
    # what is kept: a run with rows, failures, ranks, a test name or parameters; nothing else
    assert [r.first_line for r in parse(log(version, "", rank))] == [1]
    assert parse(log(version)) == []
    assert [r.test for r in parse(log(starting))] == ["all_reduce_perf"]
    assert [r.ranks for r in parse(log(rank))] == [1]
    assert [r.threads for r in parse(log(params))] == [1]
    assert [len(r.rows) for r in parse(log(ROW_1K))] == [1]


def test_a_log_with_bytes_that_are_not_utf8(tmp_path):
    path = tmp_path / "run.log"
    path.write_bytes(HEAD.encode() + b"\xff\xfe noise\n" + log(ROW_1K).encode() + FOOT.encode())
    (run,) = parse_file(path)
    assert (run.status, len(run.rows)) == ("ok", 1)
    with pytest.raises(BaselineError, match=r"missing\.log: file-not-found .* does not exist \(check the path\)"):
        parse_file(tmp_path / "missing.log")


def test_choosing_a_run_and_naming_sizes():
    runs = parse(HEAD + log(ROW_1K) + FOOT + HEAD.replace("all_reduce", "all_gather") + log(ROW_1K) + FOOT)
    assert [r.test for r in runs] == ["all_reduce_perf", "all_gather_perf"]
    assert choose_run(runs, "all_gather_perf", "x.log") is runs[1]
    assert choose_run(runs[:1], None, "x.log") is runs[0]
    with pytest.raises(BaselineError) as many:
        choose_run(runs, None, "x.log")
    assert str(many.value) == "x.log holds 2 runs (all_reduce_perf, all_gather_perf); choose one with --test"
    with pytest.raises(BaselineError) as none:
        choose_run(runs, "sendrecv_perf", "x.log")
    assert str(none.value) == "no sendrecv_perf run in x.log"
    with pytest.raises(BaselineError) as empty:
        choose_run([], None, "x.log")
    assert str(empty.value) == "no nccl-tests run in x.log"
    assert size_range([]) == "no sizes"
    assert size_range([1024, 1 << 30]) == "1 KiB..1 GiB"
    assert size_range([1025, 2048]) == "1025 B..2048 B"
    assert size_range([1000, 1023]) == "1000 B..1023 B"
    assert size_range([1024]) == "1 KiB"


def test_peak_keeps_the_first_of_equal_figures():
    tie = ROW_2K.replace("0.17    0.17       0    13.00    0.16    0.16", "0.17    0.17       0    13.00    0.17    0.17")
    peak = only(HEAD + log(ROW_1K, tie) + FOOT).peak()
    assert peak is not None and peak[0] == 0.17 and peak[2] == "out-of-place"


def test_branches_the_first_tests_let_through():
    """Each assertion here failed on a mutant of parse.py that the tests above let through."""
    version, starting, params = HEAD.splitlines()[:3]
    rank, columns = HEAD.splitlines()[5], HEAD.splitlines()[8]
    crash = "gpu01: Test NCCL failure common.cu:1 'unhandled system error'"
    # a size that begins with a digit but is not a number, and six leading fields: not rows
    for line in (ROW_1K.replace("        1024", "       10x24"), ROW_1K.replace("     sum      -1", " sum -1 x9")):
        assert [r.size for r in only(HEAD + log(ROW_2K, line) + FOOT).rows] == [2048], line
    # the crash line's run is still open (stage 0) for the headers after it
    (run,) = parse(log(crash, version, params))
    assert (run.threads, run.nccl_tests_version, len(run.failures)) == (1, "2.18.3", 1)
    # a version line seen after a version line and a crash begins the next run
    assert [(len(r.failures), r.threads) for r in parse(log(version, crash, version, params))] == [(1, None), (0, 1)]
    assert only(HEAD.replace("22703", "100005") + log(ROW_1K) + FOOT).nccl_version == "10.0.5"
    # the line a run begins at, whatever line begins it
    assert [r.first_line for r in parse(log("", starting))] == [2]
    assert [r.first_line for r in parse(log("", "", rank))] == [3]
    assert [r.first_line for r in parse(log("", columns, ROW_1K))] == [2]
    assert [r.first_line for r in parse(log("", "", "", ROW_1K))] == [4]
    assert [r.first_line for r in parse(log(params, columns, ROW_1K, FOOT.splitlines()[1], rank))] == [1, 5]
    # ranks listed after the column header still belong to the run
    assert [r.ranks for r in parse(log(params, columns, rank))] == [1]
    # without a column header, the last field of a row is a #wrong count
    for text in (log(ROW_1K[:-1] + "4"), log(params, ROW_1K[:-1] + "4")):
        (run,) = parse(text)
        assert (run.wrong_total, run.status, run.rows[0].in_place.error) == (4, "failed", None)


def test_gpus_per_node_only_when_ranks_divide_evenly_and_library_codes_never_overwrite():
    version, params = HEAD.splitlines()[0], HEAD.splitlines()[2]
    rank1, rank2 = HEAD.splitlines()[5], HEAD.splitlines()[6]
    rank3 = rank1.replace("Rank  0", "Rank  2")
    assert only(log(params, rank1, rank2, rank3)).gpus_per_node is None  # 3 ranks on 2 hosts
    assert only(log(params, rank1, rank2)).gpus_per_node == 1
    assert only(log(params)).gpus_per_node is None  # no hosts listed
    crash = "gpu01: Test NCCL failure common.cu:1 'unhandled system error'"
    (run,) = parse(log(crash, "NCCL version 2.21.5+cuda12.4", version, params))
    assert run.nccl_version == "2.21.5+cuda12.4"  # read from the library's own line, not the header's code
    (bare,) = parse(log(version.split(" nccl-headers")[0], params))
    assert (bare.nccl_tests_version, bare.nccl_version) == ("2.18.3", "")


# digits nccl-tests never prints: int() reads the first three, isdigit() passes the superscript that int() then
# refuses (the traceback of issue 30), and float() reads underscores and padded text
NOT_ASCII_NUMBERS = ["١٠٢٤", "１０２４", "1024\u00b2", "\u00b9024", "1_024"]


@pytest.mark.parametrize("size", NOT_ASCII_NUMBERS)
def test_a_row_whose_numbers_are_not_ascii_digits_is_not_a_row(size):
    for line in (ROW_1K.replace("1024", size, 1),  # the size
                 ROW_1K.replace("256", size.replace("1024", "256").replace("024", "56"), 1),  # the count
                 ROW_1K.replace("-1", "\u0663", 1),  # the root
                 ROW_1K.replace("10.00", "1\u0660.00", 1)):  # a figure
        assert line != ROW_1K
        run = only(HEAD + log(ROW_2K, line) + FOOT)
        assert [r.size for r in run.rows] == [2048], line


def test_a_log_of_unicode_digit_rows_is_reported_not_raised(tmp_path):
    from cli_runner import CliRunner

    from clusterdef.cli import app

    path = tmp_path / "unicode.log"
    path.write_text(HEAD + log(ROW_1K.replace("1024", "1024\u00b2", 1), ROW_1K.replace("1024", "\u0661\u0660\u0662\u0664", 1))
                    + FOOT)
    result = CliRunner().invoke(app, ["baseline", "parse", path])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "incomplete" in result.output and "no result rows" in result.output


def test_a_log_is_parsed_line_by_line_in_bounded_memory(tmp_path):
    """Issue 30: a 200 MB NCCL_DEBUG=INFO log was refused by a 64 MiB limit. The file is now streamed (there
    is no size limit: tests/test_limits.py), so the memory a parse takes does not grow with the file: here
    8 MiB of INFO lines around one run parse within 4 MiB (a 200 MB log: docs/input-safety.md)."""
    import tracemalloc

    info = b"[1,0]<stdout>:gpu01:1001:1001 [0] NCCL INFO Channel 00/32 : 0 1 2 3 4 5 6 7 via P2P/IPC/read\n"
    path = tmp_path / "big.log"
    block = info * 8192
    with path.open("wb") as fh:
        fh.write(HEAD.encode())
        for _ in range(int(8 * (1 << 20) / len(block)) + 1):
            fh.write(block)
        fh.write(log(ROW_1K, ROW_2K).encode() + FOOT.encode())
    assert path.stat().st_size > 8 << 20
    tracemalloc.start()
    try:
        (run,) = parse_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert run.status == "ok" and [r.size for r in run.rows] == [1024, 2048]
    assert peak < 4 << 20, peak  # bounded by the read buffer and a line, not the file


def test_rows_and_runs_past_the_caps_are_failures_not_memory(monkeypatch):
    import sys

    parse_module = sys.modules["clusterdef.baseline.parse"]

    monkeypatch.setattr(parse_module, "MAX_ROWS", 1)
    run = only(HEAD + log(ROW_1K, ROW_2K) + FOOT)
    assert [r.size for r in run.rows] == [1024] and run.status == "failed" and "more than 1 result rows" in run.reason
    monkeypatch.setattr(parse_module, "MAX_RUNS", 1)
    runs = parse(HEAD + log(ROW_1K) + FOOT + HEAD + log(ROW_1K) + FOOT + HEAD + log(ROW_1K) + FOOT)
    assert len(runs) == 2 and "more than 1 runs" in runs[1].reason
