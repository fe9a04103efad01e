"""Property: whatever a mutation does to a valid definition, the CLI answers with a
verdict (exit 0, 1 or 2) and never an unhandled exception or traceback."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from cli_runner import CliRunner

from clusterdef.cli import app
from conftest import CLUSTERS

LAB = YAML(typ="safe").load((CLUSTERS / "lab.yaml").read_text())


def paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, prefix + (i,))


ALL_PATHS = [p for p in paths(LAB) if p]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=True), st.text(max_size=12),
    st.sampled_from(["gpu[001-", "10.20.0.999", "2026.07-r580", "slurm", "kubernetes", "hgx-h100", "gpu-node",
                     "", "UNLIMITED", "52:54:00:20:00:11", "gpu[001-004]", "training", "dedicated"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=6)

mutation = st.tuples(st.sampled_from(["set", "delete", "rename"]), st.sampled_from(ALL_PATHS), values)


def apply(data, op, path, value):
    node = data
    for p in path[:-1]:
        # an earlier mutation may have turned a mapping into a list: a name is then no index
        if isinstance(node, dict) and p in node or isinstance(node, list) and isinstance(p, int) and 0 <= p < len(node):
            node = node[p]
        else:
            return
    last = path[-1]
    if isinstance(node, dict) and last in node:
        if op == "set":
            node[last] = value
        elif op == "delete":
            del node[last]
        else:
            node[f"{last}x"] = node.pop(last)
    elif isinstance(node, list) and isinstance(last, int) and last < len(node):
        if op == "delete":
            node.pop(last)
        else:
            node[last] = value


runner = CliRunner()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(mutation, min_size=1, max_size=4))
def test_cli_never_crashes(tmp_path_factory, mutations):
    data = copy.deepcopy(LAB)
    for op, path, value in mutations:
        apply(data, op, path, value)
    d = tmp_path_factory.mktemp("prop")
    f = d / "mutant.yaml"
    with open(f, "w") as fh:
        YAML().dump(data, fh)
    for verb in (["validate", str(f), "--format", "json"], ["render", str(f), "-o", str(d / "out")]):
        r = runner.invoke(app, verb)
        assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
        assert r.exit_code in (0, 1, 2), r.output
        if r.exit_code == 2 and verb[0] == "render":
            assert not (d / "out").exists()


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_never_crashes(text):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "x.yaml"
        f.write_text(text)
        r = runner.invoke(app, ["validate", str(f)])
        assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
        assert r.exit_code == 2 or r.exit_code == 0
