#!/bin/sh
# Backup of the Slurm controller's StateSaveLocation, role slurm on host slurmctl01, cluster lab; rendered by clusterdef (docs/backup.md).
set -eu
umask 077
ETC=${CLUSTERDEF_BACKUP_ETC:-/etc/clusterdef/backup}
STAGE=${CLUSTERDEF_BACKUP_STAGE:-/var/lib/clusterdef/backup}/slurm
RESTIC_REPOSITORY=${RESTIC_REPOSITORY:-sftp:restic@backup01.lab.example:/srv/restic/lab}
RESTIC_PASSWORD_FILE=${RESTIC_PASSWORD_FILE:-$ETC/restic.password}
export RESTIC_REPOSITORY RESTIC_PASSWORD_FILE
HOST=slurmctl01
TAG=clusterdef-lab-slurm
STATE=${CLUSTERDEF_SLURM_STATE:-/var/lib/slurm/slurmctld}
mkdir -p "$STAGE"
# StateSaveLocation (queued jobs, their scripts, reservations): slurmctld replaces each state
# file by a rename, so every copied file is whole.
rm -rf "$STAGE/state.tmp"
cp -a "$STATE" "$STAGE/state.tmp"
rm -rf "$STAGE/state"
mv "$STAGE/state.tmp" "$STAGE/state"
# The repository is created on the first run (a wrong password fails here, it never re-creates).
restic cat config >/dev/null 2>&1 || restic init
restic backup --host "$HOST" --tag "$TAG" --exclude /scratch --exclude /var/cache/apt --exclude /var/lib/containerd "$STAGE"
# Retention (backup.retention), for this role's snapshots only.
restic forget --host "$HOST" --tag "$TAG" --keep-within 2d --keep-within-daily 14d --keep-within-weekly 56d --keep-within-monthly 365d --prune
