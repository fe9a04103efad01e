# Tenancy proofs (tests/test_tenancy.py): btrfs project quotas on a loop device, OpenSM partitions on
# the simulated fabric (ibsim/opensm come from 30-fabric.sh), setpriv (util-linux) to ask Slurm as
# another user; acl (setfacl/getfacl) for the datasets' ACL scripts (tests/test_data.py). Sourced by scripts/install-test-deps (bash, as root, with apt_install).
# Nothing is mounted or started here: the test makes, mounts and unmounts its own loop image.

apt_install btrfs-progs util-linux acl
