# Slurm target tests (tests/test_slurm_*.py): real Slurm daemons.
# Sourced by scripts/install-test-deps (bash, as root, with apt_install and $CLUSTERDEF_CACHE).
#
# - bookworm's Slurm 22.05 on the host: slurmctld, slurmd, slurmdbd, client tools, munge,
#   and MariaDB for accounting (services are not started; tests start their own daemons);
# - newer Slurm from debootstrap roots, cached under $CLUSTERDEF_CACHE/slurm-roots/<suite>:
#   trixie (24.11) and sid (26.05). Each root is built once (~40 s) into a temporary
#   directory and moved into place only when complete, so a cached root is always whole.
#   Set CLUSTERDEF_SLURM_ROOTS="" to skip them (the tests then skip, or fail under CI).

apt_install slurmctld slurmd slurmdbd slurm-client munge mariadb-server debootstrap

slurm_root() {
  local suite=$1 root="$CLUSTERDEF_CACHE/slurm-roots/$1"
  if [ -x "$root/usr/sbin/slurmctld" ] && [ -x "$root/usr/sbin/munged" ]; then
    cp /etc/hosts "$root/etc/hosts"   # the host's names, refreshed each time (cheap)
    return 0
  fi
  local tmp="$root.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  echo "debootstrap $suite Slurm root into $root (once; cached)"
  if ! debootstrap --variant=minbase --include=slurmctld,slurm-client,munge \
       "$suite" "$tmp" >"$tmp.log" 2>&1; then  # debootstrap's own default mirror
    tail -n 20 "$tmp.log" >&2
    rm -rf "$tmp"
    return 1
  fi
  rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/* "$tmp.log"
  cp /etc/hosts "$tmp/etc/hosts"
  rm -rf "$root" && mv "$tmp" "$root"
}

for suite in ${CLUSTERDEF_SLURM_ROOTS-trixie sid}; do
  slurm_root "$suite"
done
