# Backup and restore drill (tests/test_backup.py): restic for the rendered backup plan, and a real
# etcd member (etcd-server, etcdctl from etcd-client) for the etcd snapshot/restore step. MariaDB,
# slurmdbd and slurmctld come from 20-slurm.sh. Sourced by scripts/install-test-deps (bash, as root,
# with apt_install). Nothing is started here: the tests start etcd on free loopback ports and stop it
# by its pid; the packaged etcd service is not used.

apt_install restic etcd-server etcd-client
systemctl disable --now etcd >/dev/null 2>&1 || true   # the package may start its own member; the tests need none
