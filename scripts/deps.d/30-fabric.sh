# Fabric tests (tests/test_fabric_check.py): a simulated InfiniBand fabric, all user space.
# Sourced by scripts/install-test-deps (bash, as root, with apt_install and $CLUSTERDEF_CACHE).
#
# - ibsim (ibsim-utils) runs the fabric of a rendered net file (clusterdef.fabric.ibsim);
# - infiniband-diags gives ibnetdiscover, whose output `clusterdef fabric check` reads;
# - opensm sweeps the simulated fabric (partition-key proofs).
# Nothing is started here: the tests start their own ibsim and end it by its pid.

apt_install ibsim-utils opensm infiniband-diags
