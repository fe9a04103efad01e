"""A partition over two GPU models, on the real slurmctld (the host's Slurm 22.05) with one fake-GPU
slurmd per lab node: the rendered job_submit.lua keeps a multi-node job that names no constraint on
nodes of one model, and a job that asks for a mix may span them.

The lab is `roce_two_models` (tests/lab_variants.py: RoCE rails, HGX H100 and HGX B200; issue 29 item 7):
partition `train` over group `train` (gpu001, gpu003: h100) and `train-b200` (gpu002, gpu004: b200).
slurm.conf lists gpu001 and gpu003 first, so with gpu003 taken a 2-node job that Slurm places freely gets
gpu001 and a b200 node (cons_tres picks the first free nodes of equal Weight): the case job_submit.lua must
prevent. (`mixed_generations`, H100 with H200 on InfiniBand, renders the same table: test_gpu_models.py.)
Without accounting (nothing here needs it), so the partitions' QOS are left out of the test copy.
The RoCE rails put the rendered TaskProlog in slurm.conf: it runs from the work folder, reading a roce.env
there as it reads /run/clusterdef/roce.env on a node, and every task gets its NCCL settings."""

from __future__ import annotations

import re

import pytest

from clusterdef import hostlist
from clusterdef.render.slurm import configless
from lab_variants import roce_two_models
from slurm_helpers import Controller, Munge, Workdir, fake_gpu_slurmds, free_port, host_build, stop, wait_for
from test_slurm_daemons import _on_host_slurm, render

pytestmark = [pytest.mark.slurm, pytest.mark.slurm_live, pytest.mark.slow]


def test_a_job_without_constraint_stays_on_one_gpu_model(lab, matrix):
    build = host_build()
    data = roce_two_models(lab)
    d, tree = render(data, _on_host_slurm(matrix, data["cluster"]["matrix"], build.version))
    assert '["train"] = {"h100", "b200"}' in tree["slurm/job_submit.lua"]
    model = {h: d.hardware[g.hardware].gpu.type for g in d.groups_of("slurm").values() for h in hostlist.names(g.hosts)}
    hosts = list(model)
    work = Workdir(build, prefix="cdmodels-")
    munge = Munge(work)
    # the TaskProlog as rendered, its roce.env in the work folder (clusterdef-roce-qos.service writes it on a node)
    assert f"TaskProlog={configless.TASK_PROLOG}\n" in tree["slurm/slurm.conf"]
    prolog = work.host / "task-prolog.sh"
    prolog.write_text(configless.TASK_PROLOG_TEXT.replace("/run/clusterdef/roce.env", str(work.host / "roce.env")))
    prolog.chmod(0o755)
    (work.host / "roce.env").write_text("NCCL_IB_GID_INDEX=3\nNCCL_IB_TC=104\n")
    tree = {**tree, "slurm/slurm.conf": tree["slurm/slurm.conf"].replace(configless.TASK_PROLOG, str(prolog))}
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

        # gpu003 (h100) busy: one h100 node left free, two b200 nodes
        blocker = build.run("sbatch", "--parsable", "-p", "train", "-w", "gpu003", "--exclusive", "-t", "5",
                            "-o", "/dev/null", "--wrap", "sleep 120", env=ctl.env).stdout.strip()

        def running() -> bool:
            return "JobState=RUNNING" in ctl.scontrol("show", "job", blocker)
        wait_for(running, 30, f"job {blocker} on gpu003")

        def two_nodes(*extra: str) -> tuple[set[str], str]:
            r = build.run("srun", "-p", "train", "-N2", "--exclusive", "-t", "1", *extra, "sh", "-c",
                          'echo "$SLURMD_NODENAME $SLURM_JOB_ID $NCCL_IB_GID_INDEX/$NCCL_IB_TC"', env=ctl.env,
                          timeout=90, check=False)
            assert r.returncode == 0, r.stdout + r.stderr + ctl.log()[-2000:]
            lines = [ln.split() for ln in r.stdout.splitlines() if ln.strip()]
            assert {ln[2] for ln in lines} == {"3/104"}, r.stdout  # the rails' NCCL settings reached every task
            return {ln[0] for ln in lines}, lines[0][1]

        nodes, jid = two_nodes()
        assert len(nodes) == 2 and {model[n] for n in nodes} == {"b200"}, nodes
        # the constraint came from job_submit.lua (the job named none)
        assert re.search(r"\bFeatures=\[h100\|b200\]", ctl.scontrol("show", "job", jid)), ctl.scontrol("show", "job", jid)

        # asked for a mix (plain OR): the free h100 node and a b200 node
        nodes, _ = two_nodes("--constraint=h100|b200")
        assert {model[n] for n in nodes} == {"h100", "b200"}, nodes
        build.run("scancel", blocker, env=ctl.env, check=False)
    finally:
        stop(slurmds)
        ctl.stop()
        munge.stop()
        work.cleanup()

