#!/bin/sh
# Restore of the Slurm accounting database, role slurmdbd on host slurmdbd01, cluster lab; rendered by clusterdef (docs/backup.md).
# Stop slurmctld and slurmdbd first; afterwards start slurmdbd, then slurmctld.
set -eu
umask 077
ETC=${CLUSTERDEF_BACKUP_ETC:-/etc/clusterdef/backup}
STAGE=${CLUSTERDEF_BACKUP_STAGE:-/var/lib/clusterdef/backup}/slurmdbd
RESTIC_REPOSITORY=${RESTIC_REPOSITORY:-sftp:restic@backup01.lab.example:/srv/restic/lab}
RESTIC_PASSWORD_FILE=${RESTIC_PASSWORD_FILE:-$ETC/restic.password}
export RESTIC_REPOSITORY RESTIC_PASSWORD_FILE
HOST=slurmdbd01
TAG=clusterdef-lab-slurmdbd
# Replaces the accounting database. Asks for --yes (or CLUSTERDEF_RESTORE_CONFIRM=yes).
if [ "${1:-}" != --yes ] && [ "${CLUSTERDEF_RESTORE_CONFIRM:-}" != yes ]; then
  echo "clusterdef: this replaces the accounting database; run it again with --yes" >&2
  exit 2
fi
SNAPSHOT=${CLUSTERDEF_RESTORE_SNAPSHOT:-latest}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/clusterdef-restore.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
restic restore "$SNAPSHOT" --host "$HOST" --tag "$TAG" --target "$TMP"
SRC="$TMP$STAGE"
DB=${CLUSTERDEF_RESTORE_DB:-slurm_acct_db}
case "$DB" in ""|[0-9]*|*[!A-Za-z0-9_]*) echo "clusterdef: $DB is not a database name" >&2; exit 2;; esac
[ -f "$SRC/accounting.sql" ] || { echo "clusterdef: the snapshot has no accounting.sql" >&2; exit 1; }
sql() { mysql --defaults-extra-file="$ETC/slurmdbd/my.cnf" "$@"; }
sql -e "DROP DATABASE IF EXISTS \`$DB\`; CREATE DATABASE \`$DB\`"
sql "$DB" <"$SRC/accounting.sql"
echo "clusterdef: restored $SNAPSHOT of $TAG"
