"""Configless Slurm: slurmctld serves slurm.conf and its include files (SlurmctldParameters=enable_configless);
every slurmd fetches them at start and at each `scontrol reconfigure` from the controllers named by
`--conf-server`. The nodes therefore carry only these two files: the image for stateless groups, the
slurm_node role for stateful ones. Why configless: one copy of the files (on the controllers) means a
change reaches every node through one reconfigure, and no node can run with a stale slurm.conf
(slurmd(8) --conf-server; slurm.conf(5) SlurmctldParameters=enable_configless)."""

from __future__ import annotations

from ...resolve import Resolved
from ...fabric.rails import rail_ports

DEFAULTS = "/etc/default/slurmd"
DROPIN = "/etc/systemd/system/slurmd.service.d/clusterdef-configless.conf"
CTLD_PORT = 6817


def conf_server(resolved: Resolved) -> str:
    """`--conf-server`'s value: the controllers in order, primary first, each with slurmctld's port."""
    s = resolved.definition.slurm
    assert s is not None
    return ",".join(f"{c}:{CTLD_PORT}" for c in dict.fromkeys(s.controllers))


TASK_PROLOG = "/usr/lib/clusterdef/slurm/task-prolog.sh"

# slurmstepd runs TaskProlog as the job's user before each task, with the task's environment, and turns
# every line `export NAME=value` of its standard output into the task's environment (Slurm's Prolog and
# Epilog Guide, https://slurm.schedmd.com/prolog_epilog.html, "TaskProlog"). A variable the job already
# has (its own NCCL_IB_HCA, say) is left as the job set it. /run/clusterdef/roce.env is written at boot by
# clusterdef-roce-qos.service (render/network/roce.py); a node without it gets nothing.
TASK_PROLOG_TEXT = """#!/bin/sh
# Rendered by clusterdef: Slurm TaskProlog; the NCCL/UCX settings of this node's RoCE rails.
env=/run/clusterdef/roce.env
[ -r "$env" ] || exit 0
while IFS= read -r line; do
  name=${line%%=*}
  case $name in ''|*[!A-Za-z0-9_]*) continue ;; esac
  printenv "$name" >/dev/null 2>&1 || printf 'export %s\\n' "$line"
done < "$env"
exit 0
"""


def task_prolog(resolved: Resolved) -> bool:
    """A Slurm node group has RoCE rails: slurm.conf names TASK_PROLOG and every slurmd node carries it."""
    d = resolved.definition
    return any(rail_ports(d, g) for g in d.groups_of("slurm"))


def node_files(resolved: Resolved) -> dict[str, str]:
    """Absolute path -> text of what a configless slurmd node needs besides the packages."""
    extra = {TASK_PROLOG: TASK_PROLOG_TEXT} if task_prolog(resolved) else {}
    return {**extra,
        DEFAULTS: "# Rendered by clusterdef: slurmd fetches slurm.conf and its include files from the controllers\n"
                  "# (configless); Debian's slurmd.service passes $SLURMD_OPTIONS.\n"
                  f'SLURMD_OPTIONS="--conf-server {conf_server(resolved)}"\n',
        # Debian's unit skips slurmd silently without /etc/slurm/slurm.conf, which a configless node never has.
        DROPIN: "# Rendered by clusterdef: a configless node has no /etc/slurm/slurm.conf.\n[Unit]\nConditionPathExists=\n",
    }
