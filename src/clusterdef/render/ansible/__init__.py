"""Ansible target: the inputs of the roles in roles/ (pure; no disk, no network, no clock).

- ansible/inventory/hosts.yml: groups per node group (`group_<name>`), control plane
  (`cp_slurm`, `cp_kubernetes`), hardware type (`hw_<name>`), Slurm partition
  (`partition_<name>`), rack (`rack_<name>`), leaf switch or block (`switch_<name>`) and
  upgrade wave (`wave_000` is the canary, then `wave_001`...). Hosts are written as Ansible
  ranges (`gpu[0001:0128]`), so 4,096 nodes take a few hundred lines, not thousands.
- ansible/group_vars/all.yml: the validated set's pins (and the rollback target's pins).
- ansible/group_vars/hw_<hardware>.yml: the firmware baseline of that hardware type.
- ansible/group_vars/cp_<control plane>.yml: who drains and resumes the node.

Every variable carries the prefix of the one role that reads it; tests/test_ansible_render.py
checks them against each role's meta/argument_specs.yml."""

from __future__ import annotations

from .render import render, variables

__all__ = ["render", "variables"]
