"""Mixed Slurm versions during a rolling upgrade (render/slurm/transition.py): while slurmd of an
older major still run, the Slurm files in force are ones every running daemon parses, and what only
the newer majors know is held back until the last wave.

Real software: the lab on its set (Slurm 25.11) against the host's 22.05 (slurmctld and slurmd) and
trixie's 24.11 (slurmctld, chroot): each refuses the final slurm.conf and runs the transition file; a
22.05 slurmd with fake GPUs registers with it and goes IDLE; sid's 26.05 slurmctld (the controller
side, upgraded first) runs the same transition file and reads JobContainerType as NamespaceType.

Without daemons: for every bundled example and every (older, newer) pair of majors in Slurm's upgrade
windows, each key and plugin of the transition files is one every major in between parses, and every
setting of the final files is either in the transition files or held back with its reason."""

from __future__ import annotations

import copy
import re
import dataclasses

import pytest
from ruamel.yaml import YAML

from clusterdef import hostlist
from clusterdef.knowledge import slurm as keywords
from clusterdef.model import Definition
from clusterdef.render import slurm as slurm_target
from clusterdef.render.slurm import transition as tr
from clusterdef.resolve import resolve
from conftest import CLUSTERS, MATRICES
from slurm_helpers import Controller, Munge, Workdir, builds, fake_gpu_slurmds, free_port, missing, stop, wait_for

EXAMPLES = ("lab", "estate", "gb200")


def _definition(example: str, passthrough: dict | None = None) -> Definition:
    data = YAML(typ="safe").load((CLUSTERS / f"{example}.yaml").read_text())
    if passthrough:
        data = copy.deepcopy(data)
        data["slurm"].setdefault("passthrough", {}).update(passthrough)
    return Definition.model_validate(data)


def _resolved(matrix, example: str, slurm: str | None = None, passthrough: dict | None = None):
    """The example resolved on its set, with the set's Slurm replaced by `slurm` when given."""
    d = _definition(example, passthrough)
    if slurm is not None:
        vs = matrix.sets[d.cluster.matrix]
        matrix = dataclasses.replace(matrix, sets={**matrix.sets, vs.name: vs.model_copy(
            update={"components": vs.components.model_copy(update={"slurm": slurm})})})
    return resolve(d, matrix, CLUSTERS)


def _pairs_in_windows() -> list[tuple[str, str]]:
    """(older release, newer release) for each newer major with a keyword list and each prior major its
    upgrade window accepts (matrices/compat/slurm-releases.yaml) that has a list."""
    from clusterdef.matrix.load import load_matrix

    matrix, _ = load_matrix(MATRICES)
    out = []
    for new in keywords.available():
        rel = matrix.compat.slurm_release(tr.major(new))
        for prior in rel.compatible_prior if rel else ():
            old = keywords.release_for(prior)
            if old is not None and tr.major(old) == prior:
                out.append((old, new))
    return out


# A stepped upgrade (plan/transition.py slurm_path) keeps one transition file from the oldest major to
# the newest, through the intermediate hops: it must be parsed by every major in between.
STEPPED = [("22.05.11", "26.05.3"), ("24.05.8", "26.05.3")]
PAIRS = _pairs_in_windows() + STEPPED


def _parsed_by_all(old: str, new: str, rel: str, text: str) -> list[str]:
    """What in a transition file some Slurm from `old` to `new` would refuse (empty when none): a key
    outside that release's list for the file (a record line's keys against its record's list) or a
    plugin it cannot load."""
    file = rel.rsplit("/", 1)[1]
    if file not in ("slurm.conf", "cgroup.conf", "gres.conf", "topology.conf"):
        return []
    problems = []
    for v in keywords.releases_between(old, new):
        kw = keywords.for_major(v)
        for ln in text.splitlines():
            kv = tr.pairs(ln)
            record = kv[0][0].lower() if len(kv) > 1 else None
            keys = [k for k, _ in kv if not (file == "slurm.conf" and k.lower() == record)]
            problems += [f"{file}: {k} unknown to Slurm {v}" for k in keys
                         if k.lower() not in tr._known(kw, file, record)]
            if file == "slurm.conf" and record is None:
                problems += [f"{file}: {k}={p}: no such plugin in Slurm {v}" for k, val in kv
                             for p in tr.plugin_names(val) if not keywords.reads_plugin(kw, p)]
    return problems


def test_window_pairs_cover_every_major():
    """The parametrisation below is not empty and reaches from 22.05 to 26.05."""
    olds, news = {tr.major(o) for o, _ in PAIRS}, {tr.major(n) for _, n in PAIRS}
    assert {"22.05", "24.11", "25.11"} <= olds and {"23.02", "25.11", "26.05"} <= news, PAIRS


@pytest.mark.parametrize("example", EXAMPLES)
@pytest.mark.parametrize("old, new", PAIRS, ids=[f"{o}-to-{n}" for o, n in PAIRS])
def test_transition_parsed_by_every_major_and_the_rest_held_back(matrix, example, old, new):
    resolved = _resolved(matrix, example, new)
    final = slurm_target.daemon_files(resolved, slurm_target.set_keywords(resolved))
    files = tr.transition_files(resolved, old)
    held = tr.held_back(resolved, old)
    assert files and "slurm/slurm.conf" in files
    for rel, text in files.items():
        assert _parsed_by_all(old, new, rel, text) == [], rel
        assert f"rolling upgrade from Slurm {old} to {resolved.set.components.slurm}" in text.splitlines()[0]
    named = {(h.file, h.key) for h in held}
    for rel, text in final.items():
        if rel not in files:
            assert (rel, rel.rsplit("/", 1)[1]) in named, f"{rel} is neither in the transition nor held back"
            continue
        if rel.endswith(".yaml"):
            continue
        theirs = tr.entries(files[rel])
        for name, value in tr.entries(text).items():
            assert theirs.get(name) == value or (rel, name) in named, (rel, name, value)
    for h in held:  # each held-back key is named at the top of the files, with its reason
        assert h.why and h.key in files["slurm/slurm.conf"] + files.get(h.file, ""), h
        if h.file in files and h.file.rsplit("/", 1)[1] != h.key:
            assert tr.entries(files[h.file]).get(h.key) != h.value, h


@pytest.mark.parametrize("example", EXAMPLES)
def test_final_files_name_only_plugins_their_major_has(matrix, example):
    """The renderer's plugin values exist in the set's own major (src/plugins of its tag)."""
    for new in keywords.available():
        resolved = _resolved(matrix, example, new)
        kw = keywords.for_major(new)
        conf = slurm_target.daemon_files(resolved, kw)["slurm/slurm.conf"]
        for name, value in tr.entries(conf).items():
            assert all(keywords.reads_plugin(kw, p) for p in tr.plugin_names(value)), (new, name, value)


def test_namespace_type_held_back_with_its_older_spelling(matrix):
    """The lab (tenants with a dedicated isolation: per-job /tmp) from 24.11 to its set's 25.11."""
    resolved = _resolved(matrix, "lab")
    assert resolved.set.slurm_major == "25.11"
    files = tr.transition_files(resolved, "24.11.5")
    conf = files["slurm/slurm.conf"]
    assert "\nJobContainerType=job_container/tmpfs\n" in conf and "\nNamespaceType=" not in conf
    assert "slurm/namespace.yaml" not in files and "BasePath=/var/lib/slurm/job_tmp" in files["slurm/job_container.conf"]
    held = {h.key: h for h in tr.held_back(resolved, "24.11.5")}
    assert set(held) == {"NamespaceType", "namespace.yaml"}
    assert held["NamespaceType"].value == "namespace/linux"
    assert "JobContainerType=job_container/tmpfs" in held["NamespaceType"].why
    head = conf.split("\nClusterName=", 1)[0]
    assert "#   NamespaceType=namespace/linux: " in head and "#   namespace.yaml (the whole file): " in head
    # from the set's own major nothing is held back, and the files are the final ones but for the header
    final = slurm_target.render(resolved)
    same = tr.transition_files(resolved, "25.11.0")
    assert tr.held_back(resolved, "25.11.0") == []
    assert {rel: re.split(r"\n(?:#|--) Nothing in this file is held back.\n", t, maxsplit=1)[1]
            for rel, t in same.items()} == \
        {rel: final[rel].split("\n", 1)[1] for rel in same}


def test_passthrough_and_plugin_values_held_back(matrix):
    """A passthrough key only the newer majors know, and a plugin value an older major lacks."""
    resolved = _resolved(matrix, "lab", "26.05.3", {"HealthCheckTimeout": 30, "MetricsType": "metrics/openmetrics"})
    held = {h.key: h.why for h in tr.held_back(resolved, "24.11.7")}
    assert held["HealthCheckTimeout"] == "not a slurm.conf key in Slurm 24.11, 25.05 and 25.11"
    assert held["MetricsType"] == "not a slurm.conf key in Slurm 24.11 and 25.05"
    conf = tr.transition_files(resolved, "24.11.7")["slurm/slurm.conf"]
    assert "\nHealthCheckTimeout=" not in conf and "\nMetricsType=" not in conf
    # block topology from 22.05, whose releases have no topology/block: TopologyPlugin and topology.conf wait
    gb = _resolved(matrix, "gb200", "23.11.11")
    held = {h.key: h.why for h in tr.held_back(gb, "22.05.11")}
    assert held["TopologyPlugin"] == "Slurm 22.05 and 23.02 have no plugin topology/block"
    assert held["topology.conf"] == "not read while TopologyPlugin is held back"
    assert "slurm/topology.conf" not in tr.transition_files(gb, "22.05.11")


def test_renamed_facts_agree_with_the_lists_and_the_renderer(matrix):
    """renamed.yaml against the plugin lists of the tags, and against what the renderer writes per major."""
    for r in keywords.renamed():
        since = keywords.for_major(r.since)
        before = keywords.for_major(keywords.available()[keywords.available().index(since.version) - 1])
        assert r.plugin in since.plugins and r.plugin not in before.plugins
        assert r.older_plugin in before.plugins and r.older_plugin not in since.plugins
        assert keywords.reads_plugin(since, r.older_plugin) and not keywords.reads_plugin(before, r.plugin)
        assert r.key.lower() in since.parameters and r.key.lower() not in before.parameters
        assert r.older_key.lower() in since.parameters  # the newer release still parses the older key
        for kw, key, plugin, file in ((since, r.key, r.plugin, r.file),
                                      (before, r.older_key, r.older_plugin, r.older_file)):
            files = slurm_target.daemon_files(_resolved(matrix, "lab", kw.version), kw)
            assert f"\n{key}={plugin}\n" in files["slurm/slurm.conf"] and f"slurm/{file}" in files


def test_plan_carries_the_transition(tmp_path):
    """`plan` lab 2025.10 (Slurm 25.05) -> 2026.07 (25.11): slurm_transition in the document, valid in a
    plan file, one line in each format; 2026.07 -> 2026.11 (26.05) holds nothing back."""
    from clusterdef.plan.formats import to_markdown, to_text
    from clusterdef.plan.planfile import schema_problems, seal
    from test_plan import CANDIDATE, CURRENT, OLD, plan_between

    doc = plan_between(tmp_path, "lab", OLD, CURRENT).doc
    st = doc["slurm_transition"]
    assert (st["from"], st["to"]) == ("25.05.0", "25.11.7")
    assert [(h["key"], h["file"]) for h in st["held_back"]] == [("NamespaceType", "slurm/slurm.conf"),
                                                               ("namespace.yaml", "slurm/namespace.yaml")]
    assert "JobContainerType=job_container/tmpfs" in st["files"]["slurm/slurm.conf"]
    assert schema_problems(seal(doc)) == []
    line = "arriving after the last wave: NamespaceType, namespace.yaml"
    assert line in to_markdown(doc) and line in to_text(doc)
    st = plan_between(tmp_path, "lab", CURRENT, CANDIDATE, allow_candidate=True).doc["slurm_transition"]
    assert st["held_back"] == [] and st["from"] == "25.11.7"


# --- real daemons -------------------------------------------------------------------------------


@pytest.fixture
def daemons():
    """Factory: daemons(build) -> a Controller with munged started. Everything stops at teardown."""
    started = []

    def make(build):
        work = Workdir(build, prefix="cdtrans-")
        munge = Munge(work)
        started.append((work, munge))
        munge.start()
        ctl = Controller(build, work, munge)
        started.append((work, ctl))
        return ctl

    yield make
    for work, thing in reversed(started):
        thing.stop()
        if isinstance(thing, Munge):
            work.cleanup()


def _build(major: str):
    for b in builds():
        if b.major == major:
            return b
    missing(f"Slurm {major}")


def _refused(ctl: Controller, daemon: str, *args: str) -> str:
    """Run a daemon on the written slurm.conf: it must exit non-zero at once; returns its output."""
    r = ctl.build.run(daemon, "-D", *args, "-f", ctl.conf, env=ctl.env, check=False, timeout=30)
    assert r.returncode != 0, f"{daemon} accepted the file\n{r.stdout}{r.stderr}"
    return r.stdout + r.stderr


def _config(ctl: Controller) -> dict[str, str]:
    out = {}
    for ln in ctl.scontrol("show", "config").splitlines():
        if " = " in ln:
            k, v = ln.split(" = ", 1)
            out[k.strip()] = v.strip()
    return out


@pytest.mark.slurm
@pytest.mark.slurm_live
def test_slurmd_22_05_refuses_the_final_file_and_registers_with_the_transition(matrix, daemons):
    """The host's 22.05: slurmd and slurmctld exit 1 on the lab's final slurm.conf (Slurm 25.11:
    NamespaceType); on the transition file slurmctld runs it and a slurmd with fake GPUs goes IDLE."""
    build = _build("22.05")
    if build.root is not None:
        missing("the host's Slurm 22.05 (slurmd)")
    resolved = _resolved(matrix, "lab")
    final, files = slurm_target.render(resolved), tr.transition_files(resolved, build.version)
    hosts = [h for g in resolved.definition.groups_of("slurm").values() for h in hostlist.names(g.hosts)]
    node, gpus = hosts[0], resolved.definition.hardware["hgx-h100"].gpu.count
    ports = {h: free_port() for h in hosts}
    ctl = daemons(build)
    ctl.write(final, node_ports=ports, job_container=True)
    for daemon, args in (("slurmd", ("-N", node)), ("slurmctld", ("-i",))):
        out = _refused(ctl, daemon, *args)
        assert "unrecognized key: NamespaceType" in out and "Unable to process configuration file" in out, out

    ctl.write(files, node_ports=ports, job_container=True,
              ctld_port=ctl.ctld_port, slurmd_port=ctl.slurmd_port)
    ctl.start()
    config = _config(ctl)
    assert config["JobContainerType"] == "job_container/tmpfs" and "Contain" in config["PrologFlags"].split(","), config
    assert config["SLURM_VERSION"].startswith("22.05")

    def idle() -> bool:
        rec = next(iter(ctl.records(f"node={node}")), {})
        return rec.get("State", "").startswith("IDLE")

    assert not idle()  # no slurmd has registered yet
    slurmd = fake_gpu_slurmds(build, ctl.env, ctl.work.host, [node], gpus)
    try:
        wait_for(idle, 60, f"{node} IDLE on the transition file", slurmd, ctl.work.host / f"slurmd-{node}.log")
        rec = ctl.records(f"node={node}")[0]
        assert rec["Gres"] == f"gpu:h100:{gpus}" and rec["Version"].startswith("22.05"), rec
    finally:
        stop(slurmd)


@pytest.mark.slurm
@pytest.mark.slurm_live
def test_slurmctld_24_11_and_26_05_run_one_transition_file(matrix, daemons):
    """24.11 (trixie) to the lab's 25.11, one of 25.11's upgrade window: 24.11 refuses the final file
    and runs the transition file; 26.05 (sid, standing in for the upgraded controller: the nearest build
    at least as new as 25.11) runs the same file and reads its JobContainerType as NamespaceType."""
    old, new = _build("24.11"), _build("26.05")
    resolved = _resolved(matrix, "lab")
    final, files = slurm_target.render(resolved), tr.transition_files(resolved, old.version)
    ctl = daemons(old)
    ctl.write(final, job_container=True)
    out = _refused(ctl, "slurmctld", "-i")
    assert "unrecognized key: NamespaceType" in out, out
    for build in (old, new):
        ctl = daemons(build)
        ctl.write(files, job_container=True)
        ctl.start()
        config = _config(ctl)
        assert config["SLURM_VERSION"].startswith(build.major), config
        if build is old:
            assert config["JobContainerType"] == "job_container/tmpfs", config
        else:  # 26.05 takes the older key as NamespaceType, and says so
            assert config["NamespaceType"] == "job_container/tmpfs" and "JobContainerType" not in config, config
            assert "JobContainerType has been replaced with NamespaceType" in ctl.log(), ctl.log()[-2000:]


def test_filtered_drops_what_an_older_major_does_not_parse():
    """Line by line: a top-level key or plugin it lacks drops the line, a record's unknown key only that key;
    values keep slurm.conf's quoting."""
    kw = keywords.common("22.05", "25.11")
    text = ('ClusterName=lab\nNamespaceType=namespace/linux\nTopologyPlugin=topology/block\n'
            'PartitionName=p Nodes=n Foo=bar AllowAccounts="a b" State=UP\n# NamespaceType=kept as a comment\n')
    assert tr.filtered(kw, "slurm.conf", text) == (
        'ClusterName=lab\nPartitionName=p Nodes=n AllowAccounts="a b" State=UP\n# NamespaceType=kept as a comment\n')
    assert tr.filtered(kw, "cgroup.conf", "CgroupSlice=x\nConstrainCores=yes\n") == "ConstrainCores=yes\n"
