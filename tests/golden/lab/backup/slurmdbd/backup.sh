#!/bin/sh
# Backup of the Slurm accounting database, role slurmdbd on host slurmdbd01, cluster lab; rendered by clusterdef (docs/backup.md).
set -eu
umask 077
ETC=${CLUSTERDEF_BACKUP_ETC:-/etc/clusterdef/backup}
STAGE=${CLUSTERDEF_BACKUP_STAGE:-/var/lib/clusterdef/backup}/slurmdbd
RESTIC_REPOSITORY=${RESTIC_REPOSITORY:-sftp:restic@backup01.lab.example:/srv/restic/lab}
RESTIC_PASSWORD_FILE=${RESTIC_PASSWORD_FILE:-$ETC/restic.password}
export RESTIC_REPOSITORY RESTIC_PASSWORD_FILE
HOST=slurmdbd01
TAG=clusterdef-lab-slurmdbd
mkdir -p "$STAGE"
# The accounting database slurm_acct_db on slurmdbd01: one consistent InnoDB transaction,
# no table locks; connected as slurmdbd's StorageUser from slurmdbd's host (my.cnf, from the vault).
mysqldump --defaults-extra-file="$ETC/slurmdbd/my.cnf" --single-transaction --quick slurm_acct_db >"$STAGE/accounting.sql.tmp"
mv "$STAGE/accounting.sql.tmp" "$STAGE/accounting.sql"
# The repository is created on the first run (a wrong password fails here, it never re-creates).
restic cat config >/dev/null 2>&1 || restic init
restic backup --host "$HOST" --tag "$TAG" --exclude /scratch --exclude /var/cache/apt --exclude /var/lib/containerd "$STAGE"
# Retention (backup.retention), for this role's snapshots only.
restic forget --host "$HOST" --tag "$TAG" --keep-within 2d --keep-within-daily 14d --keep-within-weekly 56d --keep-within-monthly 365d --prune
