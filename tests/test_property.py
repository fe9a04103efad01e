"""Property: type-aware mutations of the valid lab, run through the CLI's validate and render.

Each example applies one to three (mostly one) mutations that keep the definition's shape (issue #18): a name
replaced by a sibling key's name (`qos: normal` -> `large`), a number lowered to at most half or raised by one or two, a
boolean flipped, a hostlist re-ranged with its prefix and width, an optional key or list item
dropped, or a hostile string (tests/test_hostile_strings.py's payloads) appended to a string. So
most mutants are valid definitions that reach the renderer, and the rest fail in the checks rather
than in the schema. Oracles, on every example:
- `render` succeeds exactly when `validate` reports no error, and writes nothing when it fails;
- every finding has a line > 0, a column > 0 and a hint;
- the rendered folder holds exactly the files its manifest.json lists, with the listed sha256 and size.

The seed changes per run and is printed; CLUSTERDEF_FUZZ_SEED=N replays a run (CLUSTERDEF_FUZZ_EXAMPLES
sets how many examples: 16 by default, which keeps the test near 30 s in CI).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import random
import re
import secrets
import sys

from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from cli_runner import CliRunner

from clusterdef.cli import app
from conftest import CLUSTERS
from test_hostile_strings import PAYLOADS

LAB = YAML(typ="safe").load((CLUSTERS / "lab.yaml").read_text())
TODAY = "2026-11-30"  # fixed: the lab's sets stay supported whatever the date of the run
SEED = int(os.environ.get("CLUSTERDEF_FUZZ_SEED") or secrets.randbits(32))
EXAMPLES = int(os.environ.get("CLUSTERDEF_FUZZ_EXAMPLES") or 16)
HOSTLIST = re.compile(r"^([a-z]+)\[(\d+)-(\d+)\]$")
runner = CliRunner()


def leaves(node, prefix=()):
    """(path, value) of every scalar, list and mapping below the root."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield prefix + (k,), v
            yield from leaves(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield prefix + (i,), v
            yield from leaves(v, prefix + (i,))


def _keysets(node) -> list[list[str]]:
    """The names of each collection (nodes, partitions, qos, tenants, switches ...): a mapping of two or
    more mappings that share a field. A mapping of fields (a tenant's quota, isolation, slurm) is not one."""
    out = []
    for _, v in leaves(node):
        if isinstance(v, dict) and len(v) > 1 and all(isinstance(x, dict) for x in v.values()):
            shared = set.intersection(*(set(x) for x in v.values()))
            if shared:
                out.append([k for k in v if isinstance(k, str)])
    return out


KEYSETS = _keysets(LAB)
ALL = list(leaves(LAB))
# which kinds of mutation each path admits, fixed from the valid lab
NAMES = [(p, sorted({k for ks in KEYSETS if v in ks for k in ks} - {v})) for p, v in ALL if isinstance(v, str)]
NAMES = [(p, alts) for p, alts in NAMES if alts]
NUMBERS = [p for p, v in ALL if isinstance(v, int) and not isinstance(v, bool)]
BOOLS = [p for p, v in ALL if isinstance(v, bool)]
HOSTLISTS = [p for p, v in ALL if isinstance(v, str) and HOSTLIST.match(v)]
STRINGS = [p for p, v in ALL if isinstance(v, str)]
OPTIONAL = [p for p, v in ALL if len(p) >= 3 or isinstance(p[-1], int)]  # not whole sections


def _parent(data, path):
    node = data
    for p in path[:-1]:
        node = node[p]
    return node


def mutate(data: dict, rnd: random.Random) -> str:
    """One type-aware mutation in place; returns what it did (for the failure message)."""
    kind = rnd.choices(["name", "number", "bool", "hostlist", "drop", "hostile"], [3, 5, 2, 3, 1, 1])[0]
    if kind == "name":
        path, alts = rnd.choice(NAMES)
        value = rnd.choice(alts)
    elif kind == "number":
        path = rnd.choice(NUMBERS)
        old = _parent(LAB, path)[path[-1]]
        # mostly down to half (an upper bound or a capacity stays met), sometimes a little up
        value = rnd.randint((old + 1) // 2, old) if old and rnd.random() < 0.7 else old + rnd.randint(1, 2)
    elif kind == "bool":
        path = rnd.choice(BOOLS)
        value = not _parent(LAB, path)[path[-1]]
    elif kind == "hostlist":
        path = rnd.choice(HOSTLISTS)
        prefix, lo, hi = HOSTLIST.match(_parent(LAB, path)[path[-1]]).groups()
        names = [f"{prefix}{i:0{len(lo)}d}" for i in range(int(lo), int(hi) + 1)]
        if rnd.random() < 0.25:  # another range: the same prefix and width, one host fewer or more
            names = names[:-1] if rnd.random() < 0.5 and len(names) > 1 else names + [
                f"{prefix}{int(hi) + 1:0{len(lo)}d}"]
        # the same hosts, written another valid way: a list, split ranges, one bracket with a list
        cut = rnd.randint(1, len(names))
        value = rnd.choice([",".join(names), ",".join(names[:cut]) + ("," if cut < len(names) else "")
                            + (f"{prefix}[{','.join(n[len(prefix):] for n in names[cut:])}]" if cut < len(names) else ""),
                            f"{prefix}[{','.join(n[len(prefix):] for n in names)}]"])
    elif kind == "hostile":
        path = rnd.choice(STRINGS)
        value = str(_parent(LAB, path)[path[-1]]) + rnd.choice(PAYLOADS).format(m="/tmp/clusterdef-fuzz-marker")
    else:
        path = rnd.choice(OPTIONAL)
        value = None
    try:
        node = _parent(data, path)
        if kind == "drop":
            del node[path[-1]]
        else:
            node[path[-1]] = value
    except (KeyError, IndexError, TypeError):  # an earlier mutation removed the path
        return f"{kind} {'.'.join(map(str, path))}: gone"
    return f"{kind} {'.'.join(map(str, path))} = {value!r:.80}"


def _check_manifest(out) -> None:
    doc = json.loads((out / "manifest.json").read_text())
    on_disk = {p.relative_to(out).as_posix(): p for p in out.rglob("*") if p.is_file()}
    on_disk.pop("manifest.json")
    assert sorted(doc["files"]) == sorted(on_disk), set(doc["files"]) ^ set(on_disk)
    for rel, meta in doc["files"].items():
        data = on_disk[rel].read_bytes()
        assert hashlib.sha256(data).hexdigest() == meta["sha256"] and len(data) == meta["bytes"], rel


def run_example(index: int, tmp) -> tuple[bool, list[str]]:
    """Mutate, validate, render; assert the oracles. Returns (rendered, what was mutated)."""
    rnd = random.Random(f"{SEED}-{index}")
    data = copy.deepcopy(LAB)
    did = [mutate(data, rnd) for _ in range(rnd.choice([1, 1, 1, 2, 3]))]
    where = f"seed {SEED} example {index} (replay: CLUSTERDEF_FUZZ_SEED={SEED}): {did}"
    f = tmp / f"mutant{index}.yaml"
    with open(f, "w", encoding="utf-8") as fh:
        YAML().dump(data, fh)
    v = runner.invoke(app, ["validate", str(f), "--format", "json", "--today", TODAY])
    assert v.exception is None or isinstance(v.exception, SystemExit), f"{where}: {v.exception!r}"
    assert v.exit_code in (0, 2), f"{where}: validate exit {v.exit_code}\n{v.output}"
    report = json.loads(v.stdout)
    for finding in report["findings"]:
        assert finding["line"] > 0 and finding["column"] > 0, f"{where}: unlocated {finding}"
        assert finding["hint"].strip(), f"{where}: no hint {finding}"
    clean = not any(x["severity"] == "error" for x in report["findings"])
    assert clean == (v.exit_code == 0), where
    out = tmp / f"out{index}"
    r = runner.invoke(app, ["render", str(f), "-o", str(out), "--today", TODAY])
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{where}: {r.exception!r}"
    assert (r.exit_code == 0) == clean, f"{where}: validate clean={clean}, render exit {r.exit_code}\n{r.output}"
    if clean:
        _check_manifest(out)
    else:
        assert not out.exists(), where
    return clean, did


def test_mutants_reach_render_and_keep_the_oracles(tmp_path):
    print(f"fuzz seed {SEED} ({EXAMPLES} examples); replay with CLUSTERDEF_FUZZ_SEED={SEED}", file=sys.stderr)
    rendered = sum(run_example(i, tmp_path)[0] for i in range(EXAMPLES))
    print(f"fuzz seed {SEED}: {rendered}/{EXAMPLES} mutants rendered", file=sys.stderr)
    # type-aware mutations keep most mutants valid (about 60% render, tests/README.md); a run where
    # few render would test the renderer little: a quarter is far below that, so this never flakes
    assert rendered * 4 >= EXAMPLES, f"seed {SEED}: only {rendered}/{EXAMPLES} mutants reached render"


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
