"""The CI workflow templates in .github/workflows/: they parse, have the expected triggers and
jobs, use the official actions the docs promise, and every `clusterdef ...` command line in
them is accepted by the real command line (parsed by the CLI's own argparse parser)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from clusterdef.cli import parser

WORKFLOWS = Path(__file__).resolve().parent.parent / ".github" / "workflows"
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
    assert mol["needs"] == "changed-roles" and "fromJSON(needs.changed-roles.outputs.roles)" in mol["strategy"]["matrix"]["role"]
    assert any(s.get("run", "").strip() == "molecule test" for _, s in steps({"jobs": {"m": mol}}))


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
