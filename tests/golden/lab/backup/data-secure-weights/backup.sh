#!/bin/sh
# Backup of model secure-weights (export-controlled), role data-secure-weights on host sgpu01, cluster lab; rendered by clusterdef (docs/backup.md).
set -eu
umask 077
ETC=${CLUSTERDEF_BACKUP_ETC:-/etc/clusterdef/backup}
STAGE=${CLUSTERDEF_BACKUP_STAGE:-/var/lib/clusterdef/backup}/data-secure-weights
RESTIC_REPOSITORY=${RESTIC_REPOSITORY:-sftp:restic@backup01.lab.example:/srv/restic/lab}
RESTIC_PASSWORD_FILE=${RESTIC_PASSWORD_FILE:-$ETC/restic.password}
export RESTIC_REPOSITORY RESTIC_PASSWORD_FILE
HOST=sgpu01
TAG=clusterdef-lab-data-secure-weights
# The repository is created on the first run (a wrong password fails here, it never re-creates).
restic cat config >/dev/null 2>&1 || restic init
restic backup --host "$HOST" --tag "$TAG" --exclude /scratch --exclude /var/cache/apt --exclude /var/lib/containerd /secure-data/models/secure-weights
# Retention (datasets.secure-weights.retention_days), for this role's snapshots only.
restic forget --host "$HOST" --tag "$TAG" --keep-within 90d --prune
