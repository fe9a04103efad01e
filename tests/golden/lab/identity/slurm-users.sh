#!/bin/sh
# Slurm users and administrators of cluster lab from directory groups; rendered by clusterdef.
# Run on a host that resolves the directory (SSSD) as a Slurm operator. Idempotent: run it
# after directory changes (the role does, at apply).
set -eu
SACCTMGR=${SACCTMGR:-sacctmgr}
LEVEL=Administrator
# members of a group, one per line; names that are not POSIX user names are refused, never run
members() {
  getent group "$1" | cut -d: -f4 | tr ',' '\n' | while IFS= read -r u; do
    case "$u" in
      '') ;;
      [a-z_]*) case "$u" in *[!a-z0-9_.-]*) echo "clusterdef: skipping user name $(printf %s "$u" | od -An -c | tr -s ' ') of group $1" >&2 ;; *) printf '%s\n' "$u" ;; esac ;;
      *) echo "clusterdef: skipping a user name of group $1 that does not start with a letter" >&2 ;;
    esac
  done
}
has_user() { [ -n "$($SACCTMGR -nP show user where name="$1" format=user)" ]; }
has_assoc() { [ -n "$($SACCTMGR -nP show assoc where user="$1" account="$2" format=user)" ]; }
admins=$(mktemp)
approved=$(mktemp)
trap 'rm -f "$admins" "$approved"' EXIT
members hpc-admins >>"$admins"
# privileged approval (debug-root by hpc-admins, CHG-2026-0121): members of hpc-debug get AdminLevel=Operator
members hpc-debug | while IFS= read -r u; do
  grep -qxF "$u" "$admins" && continue
  has_user "$u" || $SACCTMGR -i add user name="$u" account=root >/dev/null
  $SACCTMGR -i modify user where name="$u" set adminlevel=Operator >/dev/null || true
  printf '%s\n' "$u" >>"$approved"
done
# administrators get AdminLevel; anyone else holding one (but the approved above) is demoted
sort -u "$admins" | while IFS= read -r u; do
  has_user "$u" || $SACCTMGR -i add user name="$u" account=root >/dev/null
  $SACCTMGR -i modify user where name="$u" set adminlevel="$LEVEL" >/dev/null || true
done
$SACCTMGR -nP show user format=user,adminlevel | while IFS='|' read -r u level; do
  case "$level" in None|'') continue ;; esac
  case "$u" in root|slurm) continue ;; esac
  grep -qxF "$u" "$admins" || grep -qxF "$u" "$approved" || $SACCTMGR -i modify user where name="$u" set adminlevel=None >/dev/null
done
# tenant vision: members of vision-users are users of account vision
{ members vision-users; } | sort -u | while IFS= read -r u; do
  has_assoc "$u" vision || $SACCTMGR -i add user name="$u" account=vision >/dev/null
done
# tenant nlp: members of nlp-users are users of account nlp
{ members nlp-users; } | sort -u | while IFS= read -r u; do
  has_assoc "$u" nlp || $SACCTMGR -i add user name="$u" account=nlp >/dev/null
done
# tenant secure: members of secure-users are users of account secure
{ members secure-users; } | sort -u | while IFS= read -r u; do
  has_assoc "$u" secure || $SACCTMGR -i add user name="$u" account=secure >/dev/null
done
