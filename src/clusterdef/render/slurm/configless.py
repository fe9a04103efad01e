"""Configless Slurm: slurmctld serves slurm.conf and its include files (SlurmctldParameters=enable_configless);
every slurmd fetches them at start and at each `scontrol reconfigure` from the controllers named by
`--conf-server`. The nodes therefore carry only these two files: the image for stateless groups, the
slurm_node role for stateful ones. Why configless: one copy of the files (on the controllers) means a
change reaches every node through one reconfigure, and no node can run with a stale slurm.conf
(slurmd(8) --conf-server; slurm.conf(5) SlurmctldParameters=enable_configless)."""

from __future__ import annotations

from ...resolve import Resolved

DEFAULTS = "/etc/default/slurmd"
DROPIN = "/etc/systemd/system/slurmd.service.d/clusterdef-configless.conf"
CTLD_PORT = 6817


def conf_server(resolved: Resolved) -> str:
    """`--conf-server`'s value: the controllers in order, primary first, each with slurmctld's port."""
    s = resolved.definition.slurm
    assert s is not None
    return ",".join(f"{c}:{CTLD_PORT}" for c in dict.fromkeys(s.controllers))


def node_files(resolved: Resolved) -> dict[str, str]:
    """Absolute path -> text of what a configless slurmd node needs besides the packages."""
    return {
        DEFAULTS: "# Rendered by clusterdef: slurmd fetches slurm.conf and its include files from the controllers\n"
                  "# (configless); Debian's slurmd.service passes $SLURMD_OPTIONS.\n"
                  f'SLURMD_OPTIONS="--conf-server {conf_server(resolved)}"\n',
        # Debian's unit skips slurmd silently without /etc/slurm/slurm.conf, which a configless node never has.
        DROPIN: "# Rendered by clusterdef: a configless node has no /etc/slurm/slurm.conf.\n[Unit]\nConditionPathExists=\n",
    }
