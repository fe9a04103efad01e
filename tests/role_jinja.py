"""A role's own Jinja evaluated by Ansible's templar against given host variables, without a host: its
defaults < the inventory's variables < its vars/main.yml, as Ansible orders them. For pure tests of what a
role would install or write with clusterdef's rendered group_vars."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from conftest import ROOT

ansible_template = pytest.importorskip("ansible.template")
from ansible.parsing.dataloader import DataLoader  # noqa: E402

ROLES = ROOT / "roles"
_yaml = YAML(typ="safe")
# ansible-core 2.19 templates only strings marked trusted (the files it loads itself are); older ones all
_trust = getattr(ansible_template, "trust_as_template", lambda s: s)


def trusted(value):
    if isinstance(value, str):
        return _trust(value)
    if isinstance(value, list):
        return [trusted(v) for v in value]
    if isinstance(value, dict):
        return {k: trusted(v) for k, v in value.items()}
    return value


def _load(path: Path):
    return _yaml.load(path.read_text()) if path.exists() else None


def templar(role: str, hostvars: dict):
    base = ROLES / role
    variables = {**(_load(base / "defaults" / "main.yml") or {}), "ansible_managed": "managed", **hostvars,
                 **trusted(_load(base / "vars" / "main.yml") or {})}
    return ansible_template.Templar(loader=DataLoader(), variables=variables)


def _true(t, when) -> bool:
    conds = when if isinstance(when, list) else [when]
    return all(c if isinstance(c, bool) else t.template(_trust("{{ " + c + " }}")) for c in conds)


def task_values(role: str, module: str, field: str, hostvars: dict, facts: dict | None = None) -> list:
    """`field` of every task of tasks/main.yml calling `module` whose `when` holds, templated (task vars and
    `facts`, the set_facts of earlier tasks the test stands in for, included)."""
    out = []
    for task in _load(ROLES / role / "tasks" / "main.yml"):
        if module not in task:
            continue
        t = templar(role, {**hostvars, **(facts or {}), **trusted(task.get("vars", {}))})
        if not _true(t, task.get("when", True)):
            continue
        out.append(t.template(trusted(task[module][field])))
    return out


def template_file(role: str, rel: str, hostvars: dict) -> str:
    return templar(role, hostvars).template(_trust((ROLES / role / "templates" / rel).read_text()))
