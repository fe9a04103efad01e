"""Hostlists go through ClusterShell; real Slurm's scontrol is the reference."""

from __future__ import annotations

import os
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdef import hostlist
from conftest import need_scontrol


@pytest.mark.parametrize("expr, hosts", [
    ("gpu[0001-0003]", ["gpu0001", "gpu0002", "gpu0003"]),
    ("a[1-3,7],b5", ["a1", "a2", "a3", "a7", "b5"]),
    ("r[1-2]n[01-02]", ["r1n01", "r1n02", "r2n01", "r2n02"]),
    ("node7", ["node7"]),
    ("gpu[009-011]", ["gpu009", "gpu010", "gpu011"]),
])
def test_expand(expr, hosts):
    assert hostlist.expand(expr) == hosts
    assert hostlist.count(expr) == len(hosts)


def test_fold_compresses_and_count_scales():
    assert hostlist.fold(["gpu0001", "gpu0002", "gpu0004"]) == "gpu[0001-0002,0004]"
    assert hostlist.count("gpu[00001-16384]") == 16384
    assert hostlist.fold(hostlist.expand("gpu[0001-4096]")) == "gpu[0001-4096]"


def test_overlap():
    assert str(hostlist.overlap("gpu[1-10]", "gpu[5-20]")) == "gpu[5-10]"
    assert len(hostlist.overlap("a[1-3]", "b[1-3]")) == 0


@pytest.mark.parametrize("bad", ["", "gpu[1-", "gpu[3-1]", "a b", "@group", "gpu[1-2]!gpu1"])
def test_rejects_bad_expressions(bad):
    with pytest.raises(hostlist.HostlistError):
        hostlist.parse(bad)


@pytest.fixture(scope="module")
def slurm_env(tmp_path_factory):
    need_scontrol()
    d = tmp_path_factory.mktemp("slurm")
    conf = d / "slurm.conf"
    # scontrol's hostlist verbs are local, but it insists on a configuration source.
    conf.write_text("ClusterName=hostlist\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n")
    return {**os.environ, "SLURM_CONF": str(conf)}


def scontrol(env, verb: str, expr: str) -> str:
    out = subprocess.run(["scontrol", "show", verb, expr], env=env, capture_output=True, text=True, check=True)
    return out.stdout


CASES = ["gpu[0001-0512]", "a[1-3,7],b5", "r[1-2]n[01-02]", "gpu[001-004],kgpu[01-02]",
         "node[1-9,10-12]", "x[0008-0011]", "gpu[0001-0003,0100-0102],login01"]


@pytest.mark.slurm
@pytest.mark.parametrize("expr", CASES)
def test_expand_matches_scontrol(slurm_env, expr):
    assert hostlist.expand(expr) == scontrol(slurm_env, "hostnames", expr).split()


@pytest.mark.slurm
@pytest.mark.parametrize("expr", CASES)
def test_slurm_reads_our_fold(slurm_env, expr):
    hosts = hostlist.expand(expr)
    folded = hostlist.fold(hosts)
    assert scontrol(slurm_env, "hostnames", folded).split() == hosts
    # and Slurm's own fold expands back to the same hosts here
    assert hostlist.expand(scontrol(slurm_env, "hostlist", ",".join(hosts)).strip()) == hosts


names = st.lists(
    st.tuples(st.sampled_from(["gpu", "node", "r1n", "kgpu"]), st.integers(0, 300), st.sampled_from([1, 3, 4])),
    min_size=1, max_size=40, unique=True,
)


@pytest.mark.slurm
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names)
def test_fold_roundtrip_through_scontrol(slurm_env, parts):
    hosts = sorted({f"{p}{i:0{w}d}" for p, i, w in parts})
    folded = hostlist.fold(hosts)
    assert sorted(scontrol(slurm_env, "hostnames", folded).split()) == hosts
    assert sorted(hostlist.expand(folded)) == hosts


@settings(max_examples=200, deadline=None)
@given(st.lists(st.from_regex(r"[a-z]{1,3}[0-9]{0,2}[a-z]?[0-9]{1,4}", fullmatch=True) | st.from_regex(r"[a-z]{1,6}", fullmatch=True),
                min_size=1, max_size=30))
def test_fast_fold_equals_clustershell_fold(hosts):
    from ClusterShell.NodeSet import NodeSet

    assert hostlist.fold(hosts) == str(NodeSet.fromlist(hosts))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.from_regex(r"[a-z][a-z-]{0,3}[0-9]{1,4}", fullmatch=True), min_size=1, max_size=40))
def test_fast_fold_path_equals_clustershell_fold(hosts):
    """Prefixes without digits take the fast path; it must print exactly what NodeSet prints."""
    from ClusterShell.NodeSet import NodeSet

    assert hostlist.fold(hosts) == str(NodeSet.fromlist(hosts))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.from_regex(r"[a-z][a-z-]{0,3}[0-9]{1,4}", fullmatch=True) | st.from_regex(r"[a-z]{1,2}[0-9][a-z][0-9]{1,2}", fullmatch=True),
                min_size=1, max_size=40))
def test_contiguous_equals_clustershell(hosts):
    from ClusterShell.NodeSet import NodeSet

    assert hostlist.contiguous(hosts) == [str(p) for p in NodeSet.fromlist(hosts).contiguous()]


def _range(start: int, length: int, width: int, step: int) -> str:
    """One range of a bracket: padded to `width` (both ends, as NodeSet wants) or not, with a step or not."""
    end = start + length
    if width and len(f"{end:0{width}d}") != width:
        end = start  # a padded range keeps one width
    text = f"{start:0{width}d}" if start == end else f"{start:0{width}d}-{end:0{width}d}"
    return text + (f"/{step}" if step > 1 and start != end else "")


_ONE_D_PART = (st.builds(lambda p, rs: f"{p}[{','.join(rs)}]", st.from_regex(r"[a-z-]{0,3}", fullmatch=True),
                         st.lists(st.builds(_range, st.integers(0, 120), st.integers(0, 20), st.sampled_from([0, 2, 3]),
                                            st.integers(1, 3)), min_size=1, max_size=3))
               | st.from_regex(r"[a-z][a-z-]{0,3}[0-9]{0,3}", fullmatch=True))


@settings(max_examples=300, deadline=None)
@given(st.lists(_ONE_D_PART, min_size=1, max_size=6))
def test_names_spelled_out_as_nodeset_iterates(parts):
    """One-dimensional expressions (the common case) are expanded by hostlist itself: the very names, in
    the very order, NodeSet's iterator gives (padding kept, duplicates once, patterns sorted)."""
    from ClusterShell.NodeSet import NodeSet

    expr = ",".join(parts)
    assert hostlist._expand_1d(expr) is not None, "a one-dimensional expression takes the fast path"
    hostlist.names.cache_clear()
    assert hostlist.names(expr) == tuple(NodeSet(expr))


@pytest.mark.parametrize("expr", ["a1b2,a[1-3]b2", "gpu[1-3]-ib", "rack1-gpu[1-4]", "r[1-2]n[1-2]", "x[1-2],x"])
def test_names_of_other_expressions_come_from_nodeset(expr):
    from ClusterShell.NodeSet import NodeSet

    assert hostlist.names(expr) == tuple(NodeSet(expr))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["gpu", "n", "rack-a"]), st.integers(1, 4),
       st.lists(st.integers(0, 12000), min_size=1, max_size=40))
def test_fold_of_padded_names_reaching_their_width_is_fast_and_nodesets(prefix, width, numbers):
    """gpu[0001-4096] spelled out: the indices from 1000 on have no leading zero, yet NodeSet keeps them in
    the padded run (same length). Those folds take the fast path and print what NodeSet prints."""
    from ClusterShell.NodeSet import NodeSet

    hosts = [f"{prefix}{n:0{width}d}" for n in numbers]
    if all(len(str(n)) == width for n in numbers) or any(n and len(str(n)) > width for n in numbers):
        pass  # no padded index, or an index wider than the padding: NodeSet decides (the slow path)
    else:
        assert hostlist._index_runs(hosts)[2], "one padded set per prefix takes the fast path"
    assert hostlist.fold(hosts) == str(NodeSet.fromlist(hosts))
    assert hostlist.contiguous(hosts) == [str(p) for p in NodeSet.fromlist(hosts).contiguous()]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["gpu", "n", "rack-a", "a1b", ""]), st.integers(1, 5),
       st.lists(st.integers(0, 99999), min_size=1, max_size=40))
def test_names_of_one_shape_fold_as_nodeset_folds_them(prefix, digits, numbers):
    """A list whose names are one prefix and the same number of digits (a group's, a leaf's, a wave's
    hosts) is indexed in one scan (_uniform_indices); fold and contiguous still print what NodeSet prints,
    padded (gpu0999 with gpu1000), unpadded, duplicated and out of order alike."""
    from ClusterShell.NodeSet import NodeSet

    hosts = [f"{prefix}{n % 10 ** digits:0{digits}d}" for n in numbers]
    if not prefix and any(h.startswith("0") for h in hosts):
        hosts = [f"x{h}" for h in hosts]
    assert hostlist._uniform_indices(hosts) is not None, "one shape takes the single scan"
    assert hostlist.fold(hosts) == str(NodeSet.fromlist(hosts))
    assert hostlist.contiguous(hosts) == [str(p) for p in NodeSet.fromlist(hosts).contiguous()]


def test_names_of_two_shapes_take_the_general_path():
    from ClusterShell.NodeSet import NodeSet

    assert hostlist._uniform_indices(["gpu01", "gpu1"]) is None
    assert hostlist._uniform_indices(["gpu01", "cpu01"]) is None
    assert hostlist._uniform_indices(["gpu01", "gpu01x"]) is None
    assert hostlist._uniform_indices(["gpu01", "gpu02\ngpu03"]) is None  # a newline in a name: not one shape
    mixed = ["gpu01", "gpu1", "cpu01"]
    assert hostlist.fold(mixed) == str(NodeSet.fromlist(mixed))


def test_canonical_refolds_an_expression():
    assert hostlist.canonical("gpu[001-002],gpu003") == "gpu[001-003]"
    assert hostlist.canonical("b5,a[1-3,7]") == "a[1-3,7],b5"


# ------------------------------------------------------------------ the size guard, exactly (issue #18)
@pytest.mark.parametrize("expr, bound", [
    ("gpu1", 1), ("gpu[1-4]", 4), ("gpu[1-4],cpu[1-2]", 6), ("a[1-3,7],b5", 5), ("r[1-2]n[01-03]", 6),
    ("g[1-10/3]", 4), ("g[1-9/3]", 3), ("g[0-0]", 1), ("x[1-2],y,z[5-9/2]", 6), ("n[1-2,4-5],m[1-3]k[1-2]", 10),
])
def test_size_bound_counts_without_expanding(expr, bound):
    assert hostlist.size_bound(expr) == bound
    assert hostlist.count(expr) == bound  # the bound is exact for expressions without duplicates


def test_size_bound_stops_past_the_limit_and_the_limit_is_inclusive():
    assert hostlist.size_bound("a[1-131072],b[1-5]") > hostlist.MAX_NAMES  # stops adding, still over
    assert hostlist.count("a[1-131072]") == hostlist.MAX_NAMES  # exactly the limit is allowed
    with pytest.raises(hostlist.HostlistError, match="more than 131,072 names"):
        hostlist.parse("a[1-131072],b1")
    with pytest.raises(hostlist.HostlistError, match="range '3-1' is empty or has step 0"):
        hostlist.size_bound("g[3-1]")
    with pytest.raises(hostlist.HostlistError, match="range '1-4/0' is empty or has step 0"):
        hostlist.size_bound("g[1-4/0]")
    with pytest.raises(hostlist.HostlistError, match=r"range '1x' is not N, N-M or N-M/STEP \(at most 9 digits"):
        hostlist.size_bound("g[1x]")


def test_split_top_splits_only_outside_brackets():
    assert hostlist._split_top("a[1,2],b,c[3-4,6]") == ["a[1,2]", "b", "c[3-4,6]"]
    assert hostlist._split_top("a") == ["a"]
    assert hostlist._split_top("r[1,2]n[3,4],x") == ["r[1,2]n[3,4]", "x"]


@pytest.mark.parametrize("expr, message", [
    ("gpu[1-2]", None), ("gpu[1-2] ", "has characters host names cannot have"), (" ", "empty hostlist"), ("gpu 1", "contains whitespace"),
    ("gpu[1-2]&gpu1", "uses set operators or groups"), ("gpu[1-2]^gpu1", "uses set operators or groups"),
    ("GPU1", "has characters host names cannot have"), ("gpu1;id", "has characters host names cannot have"),
])
def test_parse_messages(expr, message):
    if message is None:
        assert hostlist.expand(expr) == ["gpu1", "gpu2"]
        return
    with pytest.raises(hostlist.HostlistError, match=message):
        hostlist.parse(expr)


@pytest.mark.parametrize("expr, ok", [("gpu[1-2]", True), ("a-b1", True), ("-gpu1", False), ("gpu1-", False),
                                      ("g" * 63, True), ("g" * 64, False)])
def test_check_names_wants_rfc1123_labels(expr, ok):
    if ok:
        hostlist.check_names(expr)
    else:
        with pytest.raises(hostlist.HostlistError, match="which is not a host name"):
            hostlist.check_names(expr)


def test_check_names_message():
    with pytest.raises(hostlist.HostlistError) as exc:
        hostlist.check_names("-gpu1")
    assert str(exc.value) == ("hostlist '-gpu1' yields '-gpu1', which is not a host name: at most 63 lower-case "
                              "letters, digits and '-', starting and ending with a letter or digit")


def test_contiguous_and_fold_edge_forms():
    assert hostlist.contiguous(["gpu1", "gpu2", "gpu4"]) == ["gpu[1-2]", "gpu4"]
    assert hostlist.contiguous(["gpu01", "gpu02", "gpu04"], sep=":") == ["gpu[01:02]", "gpu04"]
    # a bare name takes the NodeSet path: the separator is applied there too
    assert hostlist.contiguous(["gpu01", "gpu02", "login"], sep=":") == ["gpu[01:02]", "login"]
    assert hostlist.fold(["gpu1"]) == "gpu1" and hostlist.fold("gpu7") == "gpu7"
    assert hostlist.fold(["b2", "a1", "a2", "a3"]) == "a[1-3],b2"
    assert hostlist.fold(["login", "gpu1"]) == "gpu1,login"  # a bare name goes through NodeSet
    assert hostlist.canonical("gpu[001-002],gpu003") == "gpu[001-003]"
    assert str(hostlist.union(["a[1-2]", hostlist.parse("a3")])) == "a[1-3]"


def _refusal(expr) -> str:
    with pytest.raises(hostlist.HostlistError) as exc:
        hostlist.parse(expr)
    return str(exc.value)


def test_each_refusal_says_what_is_wrong():
    """The messages users see for each way an expression is refused, word for word (the operators
    are also outside the alphabet: their own message is the one that says what to do instead)."""
    assert _refusal("") == _refusal("  ") == "empty hostlist"
    assert _refusal("gpu1 gpu2") == "hostlist 'gpu1 gpu2' contains whitespace"
    for op in "@!&^":
        assert _refusal(f"gpu1{op}gpu2") == (f"hostlist 'gpu1{op}gpu2' uses set operators or groups; "
                                             "list hosts and ranges only")
    alphabet = ("has characters host names cannot have: use lower-case letters, digits and '-', "
                "with ranges in [ ] (gpu[001-128],login1)")
    assert _refusal("GPU1") == f"hostlist 'GPU1' {alphabet}"
    long_bad = "Q" * 100
    assert _refusal(long_bad) == f"hostlist {'Q' * 80!r} {alphabet}"
    too_many = "n[" + ",".join(f"{i}-{i + 999}" for i in range(0, 200_000, 1000)) + "]"
    assert _refusal(too_many) == (f"hostlist {too_many[:80]!r} stands for more than 131,072 names, more than a "
                                  "definition can address; check the range bounds")
    assert _refusal("gpu[1-").startswith("hostlist 'gpu[1-' is not valid: ")


def test_the_longest_expression_read():
    """65,536 characters are parsed (parse checks the alphabet; check_names the label length), one
    more is refused before NodeSet sees it."""
    assert hostlist.parse("a" * 65536) is not None
    with pytest.raises(hostlist.HostlistError, match="has characters host names cannot have"):
        hostlist.parse("a" * 65537)


def test_a_name_that_is_not_a_label_is_named_and_the_expression_cut():
    expr = ",".join(f"node{i:03d}" for i in range(12)) + ",-bad"
    with pytest.raises(hostlist.HostlistError) as exc:
        hostlist.check_names(expr)
    assert str(exc.value) == (f"hostlist {expr[:80]!r} yields '-bad', which is not a host name: at most 63 "
                              "lower-case letters, digits and '-', starting and ending with a letter or digit")
