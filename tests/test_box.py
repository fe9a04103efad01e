"""The box harness (tests/box_cluster.py, docs/box.md) itself: a killed run's leftovers are cleared and a failed
start leaves nothing. The lab's hosts reached by Ansible through the podman connection, carrying a real
multi-host Slurm 24.11, are proven by tests/test_box_bringup.py (the bring-up through plan and apply), which runs
beside the rest of the suite; this module uses other host names and another subnet, so it never meets it."""

from __future__ import annotations

import os
import subprocess

import pytest

from box_cluster import IMAGE, LABEL, PREFIX, BoxCluster, BoxError, owner_token, running_box

pytestmark = [pytest.mark.box, pytest.mark.slow]


def test_a_killed_runs_leftovers_are_cleared_and_a_failed_start_leaves_nothing(box_ready):
    """Beside the module's box (another name, another subnet): leftovers of a run whose process is gone are
    removed before a start; a start that fails still takes its network and containers down."""
    hosts = [{"name": "boxprobe01", "ip": "10.20.1.10"}]
    podman = BoxCluster(hosts, subnet="10.20.1.0/24")._podman
    gone = subprocess.Popen(["true"])
    gone.wait()   # a pid that no longer runs: the killed run's
    stale = f"{PREFIX}-{gone.pid}-stale"
    labels = ["--label", f"{LABEL}={owner_token(gone.pid)}", "--label", f"{LABEL}.network={stale}"]
    podman("network", "create", "--internal", "--subnet", "10.20.1.0/24", *labels, stale)
    podman("run", "-d", "--name", "boxprobe01", "--network", stale, "--ip", "10.20.1.10", *labels, IMAGE, "sleep", "infinity")
    try:
        with running_box(hosts, subnet="10.20.1.0/24", network=f"{PREFIX}-{os.getpid()}-probe") as b:
            assert b.exec("boxprobe01", ["hostname"], check=True).stdout.strip() == "boxprobe01"
            assert podman("network", "exists", stale, check=False).returncode != 0   # cleared before the start
        assert podman("network", "exists", b.network, check=False).returncode != 0
        assert podman("container", "exists", "boxprobe01", check=False).returncode != 0

        with pytest.raises(BoxError, match="no-such-tag"):
            with running_box(hosts, subnet="10.20.1.0/24", network=f"{PREFIX}-{os.getpid()}-failing",
                             image="localhost/clusterdef-box:no-such-tag"):
                pass
        assert podman("network", "exists", f"{PREFIX}-{os.getpid()}-failing", check=False).returncode != 0
        assert podman("container", "exists", "boxprobe01", check=False).returncode != 0
    finally:
        podman("rm", "-f", "-t", "0", "boxprobe01", check=False)
        podman("network", "rm", "-f", stale, check=False)
