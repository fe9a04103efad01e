#!/bin/sh
# Restore of model secure-weights, role data-secure-weights on host sgpu01, cluster lab; rendered by clusterdef (docs/backup.md).
set -eu
umask 077
ETC=${CLUSTERDEF_BACKUP_ETC:-/etc/clusterdef/backup}
STAGE=${CLUSTERDEF_BACKUP_STAGE:-/var/lib/clusterdef/backup}/data-secure-weights
RESTIC_REPOSITORY=${RESTIC_REPOSITORY:-sftp:restic@backup01.lab.example:/srv/restic/lab}
RESTIC_PASSWORD_FILE=${RESTIC_PASSWORD_FILE:-$ETC/restic.password}
export RESTIC_REPOSITORY RESTIC_PASSWORD_FILE
HOST=sgpu01
TAG=clusterdef-lab-data-secure-weights
# Restores the paths in place (CLUSTERDEF_RESTORE_TARGET=DIR restores under DIR instead).
if [ "${1:-}" != --yes ] && [ "${CLUSTERDEF_RESTORE_CONFIRM:-}" != yes ]; then
  echo "clusterdef: this overwrites the files of secure-weights; run it again with --yes" >&2
  exit 2
fi
SNAPSHOT=${CLUSTERDEF_RESTORE_SNAPSHOT:-latest}
restic restore "$SNAPSHOT" --host "$HOST" --tag "$TAG" --target "${CLUSTERDEF_RESTORE_TARGET:-/}"
echo "clusterdef: restored $SNAPSHOT of $TAG"
