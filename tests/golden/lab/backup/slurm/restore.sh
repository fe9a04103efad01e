#!/bin/sh
# Restore of the Slurm controller's StateSaveLocation, role slurm on host slurmctl01, cluster lab; rendered by clusterdef (docs/backup.md).
# Stop slurmctld first (and restore the accounting database, backup/slurmdbd, before it starts).
set -eu
umask 077
ETC=${CLUSTERDEF_BACKUP_ETC:-/etc/clusterdef/backup}
STAGE=${CLUSTERDEF_BACKUP_STAGE:-/var/lib/clusterdef/backup}/slurm
RESTIC_REPOSITORY=${RESTIC_REPOSITORY:-sftp:restic@backup01.lab.example:/srv/restic/lab}
RESTIC_PASSWORD_FILE=${RESTIC_PASSWORD_FILE:-$ETC/restic.password}
export RESTIC_REPOSITORY RESTIC_PASSWORD_FILE
HOST=slurmctl01
TAG=clusterdef-lab-slurm
# Replaces StateSaveLocation. Asks for --yes (or CLUSTERDEF_RESTORE_CONFIRM=yes).
if [ "${1:-}" != --yes ] && [ "${CLUSTERDEF_RESTORE_CONFIRM:-}" != yes ]; then
  echo "clusterdef: this replaces StateSaveLocation; run it again with --yes" >&2
  exit 2
fi
SNAPSHOT=${CLUSTERDEF_RESTORE_SNAPSHOT:-latest}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/clusterdef-restore.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
restic restore "$SNAPSHOT" --host "$HOST" --tag "$TAG" --target "$TMP"
SRC="$TMP$STAGE"
STATE=${CLUSTERDEF_SLURM_STATE:-/var/lib/slurm/slurmctld}
[ -d "$SRC/state" ] || { echo "clusterdef: the snapshot has no $STAGE/state" >&2; exit 1; }
aside() { [ ! -e "$1" ] || mv "$1" "$1.pre-restore.$(date -u +%Y%m%dT%H%M%SZ)"; }
aside "$STATE"
mkdir -p "$(dirname "$STATE")"
cp -a "$SRC/state" "$STATE"
echo "clusterdef: restored $SNAPSHOT of $TAG"
