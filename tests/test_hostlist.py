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


def test_canonical_refolds_an_expression():
    assert hostlist.canonical("gpu[001-002],gpu003") == "gpu[001-003]"
    assert hostlist.canonical("b5,a[1-3,7]") == "a[1-3,7],b5"
