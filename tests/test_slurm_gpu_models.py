"""A partition over two GPU models, on the real slurmctld (the host's Slurm 22.05) with one fake-GPU
slurmd per lab node: the rendered job_submit.lua keeps a multi-node job that names no constraint on
nodes of one model, and a job that asks for a mix may span them.

The lab is `mixed_generations` (tests/lab_variants.py): partition `train` over group `train`
(gpu001, gpu003: h100) and `train-h200` (gpu002, gpu004: h200). slurm.conf lists gpu001 and gpu003
first, so with gpu003 taken a 2-node job that Slurm places freely gets gpu001 and an h200 node
(cons_tres picks the first free nodes of equal Weight): the case job_submit.lua must prevent.
Without accounting (nothing here needs it), so the partitions' QOS are left out of the test copy."""

from __future__ import annotations

import re

import pytest

from clusterdef import hostlist
from lab_variants import mixed_generations
from slurm_helpers import Controller, Munge, Workdir, fake_gpu_slurmds, free_port, host_build, stop, wait_for
from test_slurm_daemons import _on_host_slurm, render

pytestmark = [pytest.mark.slurm, pytest.mark.slurm_live, pytest.mark.slow]


def test_a_job_without_constraint_stays_on_one_gpu_model(lab, matrix):
    build = host_build()
    data = mixed_generations(lab)
    d, tree = render(data, _on_host_slurm(matrix, data["cluster"]["matrix"], build.version))
    assert '["train"] = {"h100", "h200"}' in tree["slurm/job_submit.lua"]
    model = {h: d.hardware[g.hardware].gpu.type for g in d.groups_of("slurm").values() for h in hostlist.names(g.hosts)}
    hosts = list(model)
    work = Workdir(build, prefix="cdmodels-")
    munge = Munge(work)
    ctl = Controller(build, work, munge)
    slurmds = None
    try:
        munge.start()
        conf = ctl.write(tree, node_ports={h: free_port() for h in hosts})
        assert "JobSubmitPlugins=lua" in conf
        ctl.start()
        slurmds = fake_gpu_slurmds(build, ctl.env, work.host, hosts, 8)

        def idle():
            r = build.run("sinfo", "-h", "-N", "-o", "%N %T", env=ctl.env, check=False)
            states = dict(ln.split() for ln in r.stdout.splitlines() if ln.strip())
            return states and all(states.get(h, "").startswith("idle") for h in hosts)
        wait_for(idle, 60, "all lab nodes IDLE", slurmds, work.host / "slurmd.out")

        # gpu003 (h100) busy: one h100 node left free, two h200 nodes
        blocker = build.run("sbatch", "--parsable", "-p", "train", "-w", "gpu003", "--exclusive", "-t", "5",
                            "-o", "/dev/null", "--wrap", "sleep 120", env=ctl.env).stdout.strip()

        def running() -> bool:
            return "JobState=RUNNING" in ctl.scontrol("show", "job", blocker)
        wait_for(running, 30, f"job {blocker} on gpu003")

        def two_nodes(*extra: str) -> tuple[set[str], str]:
            r = build.run("srun", "-p", "train", "-N2", "--exclusive", "-t", "1", *extra, "sh", "-c",
                          'echo "$SLURMD_NODENAME $SLURM_JOB_ID"', env=ctl.env, timeout=90, check=False)
            assert r.returncode == 0, r.stdout + r.stderr + ctl.log()[-2000:]
            lines = [ln.split() for ln in r.stdout.splitlines() if ln.strip()]
            return {ln[0] for ln in lines}, lines[0][1]

        nodes, jid = two_nodes()
        assert len(nodes) == 2 and {model[n] for n in nodes} == {"h200"}, nodes
        # the constraint came from job_submit.lua (the job named none)
        assert re.search(r"\bFeatures=\[h100\|h200\]", ctl.scontrol("show", "job", jid)), ctl.scontrol("show", "job", jid)

        # asked for a mix (plain OR): the free h100 node and an h200 node
        nodes, _ = two_nodes("--constraint=h100|h200")
        assert {model[n] for n in nodes} == {"h100", "h200"}, nodes
        build.run("scancel", blocker, env=ctl.env, check=False)
    finally:
        stop(slurmds)
        ctl.stop()
        munge.stop()
        work.cleanup()

