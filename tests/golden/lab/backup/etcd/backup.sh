#!/bin/sh
# Backup of Kubernetes state (etcd), role etcd on host k8sctl01, cluster lab; rendered by clusterdef (docs/backup.md).
set -eu
umask 077
ETC=${CLUSTERDEF_BACKUP_ETC:-/etc/clusterdef/backup}
STAGE=${CLUSTERDEF_BACKUP_STAGE:-/var/lib/clusterdef/backup}/etcd
RESTIC_REPOSITORY=${RESTIC_REPOSITORY:-sftp:restic@backup01.lab.example:/srv/restic/lab}
RESTIC_PASSWORD_FILE=${RESTIC_PASSWORD_FILE:-$ETC/restic.password}
export RESTIC_REPOSITORY RESTIC_PASSWORD_FILE
HOST=k8sctl01
TAG=clusterdef-lab-etcd
export ETCDCTL_API=3
export ETCDCTL_ENDPOINTS=${ETCDCTL_ENDPOINTS-https://127.0.0.1:2379}
export ETCDCTL_CACERT=${ETCDCTL_CACERT-/etc/kubernetes/pki/etcd/ca.crt}
export ETCDCTL_CERT=${ETCDCTL_CERT-/etc/kubernetes/pki/etcd/healthcheck-client.crt}
export ETCDCTL_KEY=${ETCDCTL_KEY-/etc/kubernetes/pki/etcd/healthcheck-client.key}
mkdir -p "$STAGE"
# A point-in-time snapshot of the member's keyspace, checked before it replaces the last one.
rm -f "$STAGE/snapshot.db.tmp"
etcdctl snapshot save "$STAGE/snapshot.db.tmp" >/dev/null
etcdctl --write-out=table snapshot status "$STAGE/snapshot.db.tmp"
mv "$STAGE/snapshot.db.tmp" "$STAGE/snapshot.db"
# The repository is created on the first run (a wrong password fails here, it never re-creates).
restic cat config >/dev/null 2>&1 || restic init
restic backup --host "$HOST" --tag "$TAG" --exclude /scratch --exclude /var/cache/apt --exclude /var/lib/containerd "$STAGE"
# Retention (backup.retention), for this role's snapshots only.
restic forget --host "$HOST" --tag "$TAG" --keep-within 2d --keep-within-daily 14d --keep-within-weekly 56d --keep-within-monthly 365d --prune
