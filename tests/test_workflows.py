"""The CI workflow templates in .github/workflows/: they parse, have the expected triggers and
jobs, use the official actions the docs promise, and every `clusterdef ...` command line in
them is accepted by the real command line (parsed by the CLI's own argparse parser). The
molecule job's own shell runs here: its scenario discovery on this checkout, its base-image step (in
the mode that builds nothing) and its molecule command for one scenario (as `molecule syntax`)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from clusterdef.cli import parser

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
PR, MAIN = WORKFLOWS / "clusterdef-pull-request.yml", WORKFLOWS / "clusterdef-main.yml"
SHELL_OPS = {";", "|", "||", "&&", ">", ">>", "<", "&", "(", ")", "2>", "2>&1"}


def load(path: Path) -> dict:
    data = YAML(typ="safe", pure=True).load(path.read_text())
    if True in data:  # a YAML 1.1 reader takes the bare key `on` for true; GitHub reads "on"
        data["on"] = data.pop(True)
    return data


def steps(wf: dict):
    for job_name, job in wf["jobs"].items():
        for step in job.get("steps", []):
            yield job_name, step


def uses(wf: dict, job: str) -> dict[str, dict]:
    return {s["uses"].split("@")[0]: s.get("with", {}) for j, s in steps(wf) if j == job and "uses" in s}


def clusterdef_commands(wf: dict) -> list[list[str]]:
    """Every `clusterdef ...` invocation in the run: blocks, as argument lists (GitHub
    expressions replaced by a placeholder word, shell operators ending the command)."""
    out = []
    for _, step in steps(wf):
        script = re.sub(r"\$\{\{.*?\}\}", "EXPR", step.get("run", ""))
        for line in script.splitlines():
            lex = shlex.shlex(line, posix=True, punctuation_chars=True)
            lex.whitespace_split = True
            tokens = list(lex)
            for i, tok in enumerate(tokens):
                if tok == "clusterdef" and (i == 0 or tokens[i - 1] in SHELL_OPS | {"if", "!", "then", "do"}):
                    args = []
                    for t in tokens[i + 1:]:
                        if t in SHELL_OPS or t.startswith(">") or t.startswith("2>"):
                            break
                        args.append(t)
                    out.append(args)
    return out


class CommandLineError(Exception):
    pass


def check_command(args: list[str]):
    """Let the CLI's own argparse parser parse the verb, options and arguments exactly as the real
    command line would; raises CommandLineError on an unknown verb or option, a bad choice, a
    missing required option, or a group (`matrix`, `baseline`...) without its verb. Returns the
    verb's function."""
    import contextlib
    import io

    why = io.StringIO()
    try:
        with contextlib.redirect_stderr(why):
            ns = parser().parse_args(list(args))
    except SystemExit as exc:
        raise CommandLineError(f"`clusterdef {' '.join(args)}`: {why.getvalue().strip()}") from exc
    verb = getattr(ns, "_verb", None)
    if verb is None:
        raise CommandLineError(f"`clusterdef {' '.join(args)}` needs a verb")
    return verb


def test_workflows_parse_and_have_the_expected_triggers_and_jobs():
    assert sorted(p.name for p in WORKFLOWS.glob("*.yml")) == [MAIN.name, PR.name]
    pr, main = load(PR), load(MAIN)
    assert list(pr["on"]) == ["pull_request"] and pr["on"]["pull_request"]["branches"] == ["main"]
    assert list(main["on"]) == ["push"] and main["on"]["push"]["branches"] == ["main"]
    assert set(pr["jobs"]) == {"validate", "plan", "pulumi-preview", "changed-roles", "molecule"}
    assert set(main["jobs"]) == {"validate", "pulumi-up"}
    for wf in (pr, main):
        for name, job in wf["jobs"].items():
            assert job.get("runs-on") and job.get("steps"), name
            for need in [job["needs"]] if isinstance(job.get("needs"), str) else job.get("needs", []):
                assert need in wf["jobs"], f"{name} needs unknown job {need}"


def test_pull_request_posts_the_plan_and_previews_pulumi():
    pr = load(PR)
    plan = uses(pr, "plan")
    assert plan["marocchino/sticky-pull-request-comment"]["path"] == "plan.md"
    assert pr["jobs"]["plan"]["permissions"]["pull-requests"] == "write"
    checkout = plan["actions/checkout"]
    assert checkout["fetch-depth"] == 0, "--base origin/main needs the main branch fetched"
    assert any(a[:1] == ["plan"] and "--base" in a and a[a.index("--base") + 1] == "origin/main"
               and a[a.index("--format") + 1] == "markdown" for a in clusterdef_commands(pr))
    preview = uses(pr, "pulumi-preview")["pulumi/actions"]
    assert preview["command"] == "preview" and preview["comment-on-pr"] is True
    assert "roles/**" in uses(pr, "changed-roles")["dorny/paths-filter"]["filters"]
    mol = pr["jobs"]["molecule"]
    assert mol["needs"] == "changed-roles"
    assert mol["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.changed-roles.outputs.scenarios) }}"


def step(wf: dict, job: str, name: str) -> dict:
    return next(s for j, s in steps(wf) if j == job and s.get("name") == name)


def expand(text: str, values: dict[str, str]) -> str:
    """GitHub's ${{ expr }} for the expressions given; any other one fails the test."""
    def one(m):
        assert m.group(1) in values, f"no value for ${{{{ {m.group(1)} }}}}"
        return values[m.group(1)]
    return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", one, text)


def run_step(wf: dict, job: str, name: str, env: dict[str, str], tmp_path: Path, values: dict[str, str],
             cwd: Path = ROOT) -> tuple[subprocess.CompletedProcess, str]:
    """The step's `run:` with bash -e (as GitHub runs it), its env: block expanded; returns the
    process and what it wrote to $GITHUB_OUTPUT."""
    if shutil.which("jq") is None:  # GitHub's runners have it; scripts/install-test-deps installs it here
        if os.environ.get("CI"):
            pytest.fail("jq is missing in CI: scripts/install-test-deps must install it")
        pytest.skip("jq is not installed (scripts/install-test-deps installs it)")
    s = step(wf, job, name)
    out = tmp_path / "github_output"
    out.write_text("")
    step_env = {k: expand(str(v), values) for k, v in s.get("env", {}).items()}
    proc = subprocess.run(["bash", "-e", "-c", s["run"]], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env, **step_env, "GITHUB_OUTPUT": str(out)})
    return proc, out.read_text()


SCENARIOS = sorted((p.parents[2].name, p.parent.name) for p in (ROOT / "roles").glob("*/molecule/*/molecule.yml"))


@pytest.mark.parametrize("files, want", [
    (["roles/nvidia_driver/tasks/main.yml", "roles/cuda_userspace/defaults/main.yml", "README.md"],
     [("cuda_userspace", "userspace"), ("nvidia_driver", "default"), ("nvidia_driver", "rollout")]),
    (["roles/gpu_facts/tasks/main.yml"], []),  # a role without scenarios
    (["tests/molecule/prepare.yml"], SCENARIOS),  # the scenarios' shared files: every scenario
    ([], []),
], ids=["two-roles", "no-scenario", "shared-files", "none"])
def test_changed_roles_step_discovers_every_scenario(files, want, tmp_path):
    """The discovery step's own shell on this checkout: every scenario directory of each changed role,
    not just `default` (cuda_userspace has none; nvidia_driver also has `rollout`)."""
    assert ("nvidia_driver", "rollout") in SCENARIOS and ("cuda_userspace", "userspace") in SCENARIOS
    proc, output = run_step(load(PR), "changed-roles", "Every molecule scenario of the roles the pull request changes",
                            {}, tmp_path, {"steps.filter.outputs.roles_files || '[]'": json.dumps(files)})
    assert proc.returncode == 0, proc.stderr
    key, _, value = output.strip().partition("=")
    assert key == "scenarios"
    assert sorted((x["role"], x["scenario"]) for x in json.loads(value)) == want


def test_molecule_job_builds_its_images_with_the_projects_script(tmp_path):
    """The base-image step calls scripts/install-test-deps for 50-molecule only; run here with
    CLUSTERDEF_MOLECULE=0 (builds nothing) it sources exactly that part and installs no package."""
    s = step(load(PR), "molecule", "Build the molecule base images (podman, debootstrap roots, containers.podman)")
    argv = shlex.split(s["run"])
    assert argv[0] == "sudo" and argv[2:] == ["scripts/install-test-deps", "--only", "50-molecule"]
    assert (ROOT / "scripts" / "deps.d" / "50-molecule.sh").is_file()
    proc = subprocess.run(["bash", *argv[2:]], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "CLUSTERDEF_MOLECULE": "0", "CLUSTERDEF_CACHE": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["== test deps: 50-molecule.sh"]


def test_molecule_step_runs_for_one_scenario(tmp_path):
    """The molecule step's command, run here for nvidia_driver's rollout scenario with `syntax` in place
    of `test` (no containers): the job's working directory, roles path and scenario name reach a real
    molecule that finds the scenario and syntax-checks its playbooks."""
    pr = load(PR)
    s = step(pr, "molecule", "molecule test")
    assert s["run"].count("molecule test -s") == 1
    syntax = {**s, "run": s["run"].replace("molecule test -s", "molecule syntax -s")}
    wf = {"jobs": {"molecule": {"steps": [syntax]}}}
    values = {"github.workspace": str(ROOT), "matrix.role": "nvidia_driver", "matrix.scenario": "rollout"}
    cwd = ROOT / expand(s["working-directory"], values).removeprefix(str(ROOT)).lstrip("/")
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ.get('PATH', '')}", "HOME": str(home), "NO_COLOR": "1"}
    proc, _ = run_step(wf, "molecule", "molecule test", env, tmp_path, values, cwd=cwd)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # ansible-playbook --syntax-check names the playbook it checked: the scenario's converge
    assert f"playbook: {ROOT}/roles/nvidia_driver/molecule/rollout/converge.yml" in proc.stdout + proc.stderr


def test_merge_runs_pulumi_up_behind_a_reviewed_environment():
    main = load(MAIN)
    job = main["jobs"]["pulumi-up"]
    assert job["environment"] == "production" and job["needs"] == "validate"
    assert uses(main, "pulumi-up")["pulumi/actions"]["command"] == "up"
    assert main["concurrency"]["cancel-in-progress"] is False


def test_every_clusterdef_command_line_exists_in_the_cli():
    seen = set()
    for path in (PR, MAIN):
        commands = clusterdef_commands(load(path))
        assert commands, f"no clusterdef command found in {path.name}"
        for args in commands:
            seen.add(check_command(args).__name__)
    assert {"validate", "plan"} <= seen


@pytest.mark.parametrize("args", [["plna", "--to", "x.yaml"], ["plan", "--to", "x.yaml", "--bsae", "origin/main"],
                                  ["plan", "--to", "x.yaml", "--format", "html"], ["plan"], ["matrix", "lst"]])
def test_the_command_check_catches_mistakes(args):
    with pytest.raises(CommandLineError):
        check_command(args)
