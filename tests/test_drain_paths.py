"""No job is killed by a rollout (issue 28): every task under playbooks/ and roles/ that reboots a node or
unloads its driver (ansible.builtin.reboot, `reboot`/`shutdown -r`/`systemctl reboot`/kexec, `modprobe -r`,
`rmmod`) has a drain before it in the same play or task file (the node_drain role, state drained, or its
reboot_slurm entry: `scontrol reboot ASAP`, which slurmctld runs only once the node's jobs are done). A reboot
in a play whose hosts may be Slurm nodes leaves them to the scontrol path. Pure: reads the YAML only."""

from __future__ import annotations

import re
from pathlib import Path

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
REBOOTS = re.compile(r"(^|[\s/])(reboot|kexec|rmmod)\b|shutdown\s+-r|systemctl\s+(reboot|kexec)|modprobe\s+(-r|--remove)")
REBOOT_MODULES = {"ansible.builtin.reboot", "reboot", "community.general.shutdown"}


def _load(path: Path):
    return YAML(typ="safe", pure=True).load(path.read_text()) or []


def _flat(tasks: list) -> list[dict]:
    """Tasks in order, blocks opened (block, rescue, always)."""
    out = []
    for t in tasks or []:
        if not isinstance(t, dict):
            continue
        if "block" in t:
            out += _flat(t["block"]) + _flat(t.get("rescue")) + _flat(t.get("always"))
        else:
            out.append(t)
    return out


def _command(task: dict) -> str:
    for key in ("ansible.builtin.command", "command", "ansible.builtin.shell", "shell", "ansible.builtin.raw", "raw"):
        if key in task:
            v = task[key]
            if isinstance(v, dict):
                return " ".join(map(str, v.get("argv") or [v.get("cmd", "")]))
            return str(v)
    return ""


def reboots(task: dict) -> bool:
    if REBOOT_MODULES & set(task):
        return True
    cmd = _command(task)
    if re.match(r"^(\{\{\s*)?\S*scontrol\b", cmd.strip()):  # scontrol reboot ASAP: slurmctld's drain-then-reboot
        return False
    return bool(REBOOTS.search(cmd))


def drains(task: dict) -> bool:
    """An include/import of node_drain that drains (state drained) or its reboot_slurm entry."""
    for key in ("ansible.builtin.include_role", "include_role", "ansible.builtin.import_role", "import_role"):
        spec = task.get(key)
        if isinstance(spec, dict) and spec.get("name") == "node_drain":
            return spec.get("tasks_from") == "reboot_slurm" or (task.get("vars") or {}).get(
                "node_drain_state") == "drained"
    return False


def unguarded(tasks: list) -> list[str]:
    """Names of the reboot tasks with no drain before them in `tasks`."""
    out, drained = [], False
    for t in _flat(tasks):
        drained = drained or drains(t)
        if reboots(t) and not drained:
            out.append(t.get("name", "?"))
    return out


def _plays() -> list[tuple[str, dict]]:
    return [(f"{p.name}: {play.get('name', '?')}", play) for p in sorted((ROOT / "playbooks").glob("*.yml"))
            for play in _load(p) if isinstance(play, dict) and ("tasks" in play or "roles" in play)]


def _task_files() -> list[Path]:
    return sorted(p for sub in ("tasks", "handlers") for p in (ROOT / "roles").glob(f"*/{sub}/*.yml"))


def test_every_reboot_in_a_play_has_a_drain_before_it():
    found = []
    for where, play in _plays():
        tasks = [*(play.get("pre_tasks") or []), *(play.get("tasks") or [])]
        if any(reboots(t) for t in _flat(tasks)):
            found.append(where)
        assert unguarded(tasks) == [], where
    # reimage.yml (stateless) and reboot.yml (a new driver) are the two that reboot
    assert sorted(w.split(":")[0] for w in found) == ["reboot.yml", "reimage.yml"]


def test_no_role_task_reboots_or_unloads_the_driver_without_a_drain():
    files = _task_files()
    assert len(files) > 20
    for path in files:
        assert unguarded(_flat(_load(path))) == [], path.relative_to(ROOT)


def test_stateless_slurm_nodes_reboot_through_scontrol_reboot_asap():
    """reimage.yml: a Slurm node goes through node_drain's reboot_slurm (scontrol reboot ASAP nextstate=RESUME
    with the stage's reason), never through ansible.builtin.reboot; the reboot task skips cp_slurm hosts."""
    play = next(p for w, p in _plays() if w.startswith("reimage.yml: Reboot"))
    tasks = _flat(play["tasks"])
    slurm = next(t for t in tasks if (t.get("ansible.builtin.include_role") or {}).get("tasks_from") == "reboot_slurm")
    assert "'cp_slurm' in group_names" in slurm["when"]
    assert slurm["vars"]["node_drain_reason"].startswith("clusterdef:{{ clusterdef_plan")
    reboot = next(t for t in tasks if "ansible.builtin.reboot" in t)
    assert "'cp_slurm' not in group_names" in reboot["when"]
    role = _flat(_load(ROOT / "roles/node_drain/tasks/reboot_slurm.yml"))
    ask = next(t for t in role if "reboot" in _command(t).split())
    assert ask["ansible.builtin.command"]["argv"][1:4] == ["reboot", "ASAP", "nextstate=RESUME"]
    assert not any(reboots(t) for t in role)  # the node reboots itself through slurm.conf's RebootProgram


def test_the_walk_finds_a_reboot_without_a_drain():
    """The check can fail: a reboot, a driver unload, a kexec each without a drain are found; a drain first
    (or a query, which does not drain, first) is told apart."""
    bare = [{"name": "r", "ansible.builtin.reboot": {}}, {"name": "m", "ansible.builtin.command": "modprobe -r nvidia"},
            {"name": "k", "ansible.builtin.shell": "kexec -e"}, {"name": "s", "command": {"argv": ["/sbin/rmmod", "nv"]}},
            {"name": "c", "ansible.builtin.command": "systemctl reboot"}]
    assert unguarded(bare) == ["r", "m", "k", "s", "c"]
    query = {"ansible.builtin.include_role": {"name": "node_drain"}, "vars": {"node_drain_state": "query"}}
    assert unguarded([query, *bare]) == ["r", "m", "k", "s", "c"]
    drain = {"ansible.builtin.include_role": {"name": "node_drain"}, "vars": {"node_drain_state": "drained"}}
    assert unguarded([{"block": [drain]}, *bare]) == []
    assert unguarded([{"ansible.builtin.command": {"argv": ["scontrol", "reboot", "ASAP", "gpu001"]}}]) == []
