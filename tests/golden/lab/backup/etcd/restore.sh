#!/bin/sh
# Restore of Kubernetes state (etcd), role etcd on host k8sctl01, cluster lab; rendered by clusterdef (docs/backup.md).
# Stop kube-apiserver and etcd first (move their static pod manifests away); one member:
# a multi-member cluster is restored member by member with each one's name and peer URL.
set -eu
umask 077
ETC=${CLUSTERDEF_BACKUP_ETC:-/etc/clusterdef/backup}
STAGE=${CLUSTERDEF_BACKUP_STAGE:-/var/lib/clusterdef/backup}/etcd
RESTIC_REPOSITORY=${RESTIC_REPOSITORY:-sftp:restic@backup01.lab.example:/srv/restic/lab}
RESTIC_PASSWORD_FILE=${RESTIC_PASSWORD_FILE:-$ETC/restic.password}
export RESTIC_REPOSITORY RESTIC_PASSWORD_FILE
HOST=k8sctl01
TAG=clusterdef-lab-etcd
# Replaces the etcd member's data directory. Asks for --yes (or CLUSTERDEF_RESTORE_CONFIRM=yes).
if [ "${1:-}" != --yes ] && [ "${CLUSTERDEF_RESTORE_CONFIRM:-}" != yes ]; then
  echo "clusterdef: this replaces the etcd member's data directory; run it again with --yes" >&2
  exit 2
fi
SNAPSHOT=${CLUSTERDEF_RESTORE_SNAPSHOT:-latest}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/clusterdef-restore.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
restic restore "$SNAPSHOT" --host "$HOST" --tag "$TAG" --target "$TMP"
SRC="$TMP$STAGE"
DATA=${CLUSTERDEF_ETCD_DATA:-/var/lib/etcd}
NAME=${CLUSTERDEF_ETCD_NAME:-k8sctl01}
PEER=${CLUSTERDEF_ETCD_PEER:-https://k8sctl01:2380}
[ -f "$SRC/snapshot.db" ] || { echo "clusterdef: the snapshot has no snapshot.db" >&2; exit 1; }
rm -rf "$DATA.restoring"
# etcd 3.5+ ships the offline restore as etcdutl; etcd 3.4 (bookworm) has it in etcdctl.
if command -v etcdutl >/dev/null 2>&1; then RESTORE=etcdutl; else RESTORE=etcdctl; export ETCDCTL_API=3; fi
$RESTORE snapshot restore "$SRC/snapshot.db" --data-dir "$DATA.restoring" --name "$NAME" --initial-cluster "$NAME=$PEER" --initial-advertise-peer-urls "$PEER"
aside() { [ ! -e "$1" ] || mv "$1" "$1.pre-restore.$(date -u +%Y%m%dT%H%M%SZ)"; }
aside "$DATA"
mv "$DATA.restoring" "$DATA"
echo "clusterdef: restored $SNAPSHOT of $TAG"
