"""Every CLI verb that takes a path, given a folder, a FIFO, /dev/zero or a path under a missing
folder: exit 2 (or the verb's documented code) with a message naming the path, no traceback,
and never a hang (each run has a subprocess timeout) or a replaced FIFO/device.

The CLI runs as a subprocess, as a user would run it; all runs start at once in a thread
pool (a module fixture) so the ~70 runs take seconds."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAB = str(REPO / "clusters" / "lab.yaml")
FACTS = str(REPO / "tests" / "fixtures" / "facts" / "lab.json")
IBNET = str(REPO / "tests" / "fixtures" / "ibnetdiscover" / "lab-clean.txt")
LOG = str(REPO / "tests" / "fixtures" / "nccl-tests" / "h200-2node-np2-g8-v2.18.3-ucxwarn.log")
SET = "2026.07-r580"
TODAY = ("--today", "2026-11-30")
KINDS = ("folder", "fifo", "devzero", "missing")


def bad_paths(root: Path) -> dict[str, str]:
    """One bad path of each kind under `root` (fresh per case, so outputs cannot collide)."""
    root.mkdir(parents=True)
    (root / "folder").mkdir()
    (root / "folder" / "notes.txt").write_text("mine")  # a non-empty folder clusterdef did not write
    os.mkfifo(root / "fifo")
    return {"folder": str(root / "folder"), "fifo": str(root / "fifo"), "devzero": "/dev/zero",
            "missing": str(root / "no" / "such" / "file")}


# (name, argv with {} for the bad path, expected exit per kind); an output under a missing
# folder is created (documented), so it exits as the verb does on success.
CASES = [
    ("validate", ["validate", "{}"], {}),
    ("validate --matrices", ["validate", LAB, "--matrices", "{}"], {}),
    ("render DEF", ["render", "{}", "-o", "{tmp}/out"], {}),
    ("render -o", ["render", LAB, "-o", "{}"], {"missing": 0}),
    ("schema -o", ["schema", "-o", "{}"], {"missing": 0}),
    ("plan --from", ["plan", "--from", "{}", "--to", LAB], {}),
    ("plan --to", ["plan", "--from", LAB, "--to", "{}"], {}),
    ("plan -o", ["plan", "--from", LAB, "--to", LAB, "-o", "{}"], {"missing": 0}),
    ("drift DEF", ["drift", "{}", "--facts", FACTS], {}),
    ("drift --facts", ["drift", LAB, "--facts", "{}"], {}),  # a folder without *.json is refused too
    ("drift --drain", ["drift", LAB, "--facts", FACTS, "--drain", "{}"], {"missing": 1}),
    ("drift --prometheus", ["drift", LAB, "--facts", FACTS, "--prometheus", "{}"], {"missing": 1}),
    ("fabric check DEF", ["fabric", "check", "{}", "--ibnetdiscover", IBNET], {}),
    ("fabric check --ibnetdiscover", ["fabric", "check", LAB, "--ibnetdiscover", "{}"], {}),
    # the captured fixture predates the lab's `secure` nodes, so the check reports them missing: exit 1
    ("fabric check --drain", ["fabric", "check", LAB, "--ibnetdiscover", IBNET, "--drain", "{}"], {"missing": 1}),
    ("fabric check --prometheus", ["fabric", "check", LAB, "--ibnetdiscover", IBNET, "--prometheus", "{}"],
     {"missing": 1}),
    ("baseline parse", ["baseline", "parse", "{}"], {}),
    ("baseline record LOG", ["baseline", "record", "{}", "--set", SET, "-o", "{tmp}/b.yaml"], {}),
    ("baseline record -o", ["baseline", "record", LOG, "--set", SET, "-o", "{}"], {"missing": 0}),
    ("baseline compare LOG", ["baseline", "compare", "{}", "--baseline", "{tmp}/good.yaml"], {}),
    ("baseline compare --baseline", ["baseline", "compare", LOG, "--baseline", "{}"], {}),
    ("matrix list --matrices", ["matrix", "list", "--matrices", "{}"], {}),
    ("matrix show --matrices", ["matrix", "show", SET, "--matrices", "{}"], {}),
    ("apply PLAN", ["apply", "{}", "--playbooks", str(REPO / "playbooks")], {}),
    ("approve PLAN", ["approve", "{}", "--class", "reboot", "--group", "hpc-admins", "--by", "alice", "--why", "ok"],
     {}),
]


def run(case, kind: str, root: Path) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    name, argv, _ = case
    paths = bad_paths(root)
    if "{tmp}/good.yaml" in argv:
        shutil.copy(REPO / "matrices" / "baselines" / f"{SET}.yaml", root / "good.yaml")
    args = [a.replace("{}", paths[kind]).replace("{tmp}", str(root)) for a in argv]
    env = {**os.environ, "CLUSTERDEF_MATRICES": str(REPO / "matrices")}
    if args[0] in ("validate", "render", "plan", "drift", "fabric"):
        args += TODAY
    r = subprocess.run([sys.executable, "-m", "clusterdef", *args], cwd=root, env=env,
                       capture_output=True, text=True, timeout=60)
    return r, paths


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("paths")
    jobs = [(case, kind, root / f"{i}-{kind}") for i, case in enumerate(CASES) for kind in KINDS]
    with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 2) * 2)) as pool:
        done = list(pool.map(lambda job: run(*job), jobs))
    return {(case[0], kind): (r, where, paths) for (case, kind, where), (r, paths) in zip(jobs, done)}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_path(case, kind, results):
    name, _, expected = case
    r, root, paths = results[(name, kind)]
    output = r.stdout + r.stderr
    assert "Traceback" not in output, output
    want = expected.get(kind, 2)
    assert r.returncode == want, f"exit {r.returncode}, want {want}\n{output}"
    if want == 2:
        assert paths[kind] in output, f"{paths[kind]} not named:\n{output}"
    else:  # an output under missing folders is created
        assert Path(paths[kind]).exists()
    # nothing replaced a FIFO or the user's folder, and no temporary file is left behind
    assert stat.S_ISFIFO(os.stat(root / "fifo").st_mode)
    assert (root / "folder" / "notes.txt").read_text() == "mine"
    assert not [p for p in root.rglob(".*")], list(root.rglob(".*"))
