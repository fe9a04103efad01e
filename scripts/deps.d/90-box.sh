# The box: a cluster of containers, one per host, systemd as PID 1 (tests/box_cluster.py, tests/test_box.py,
# docs/box.md). One image, Debian trixie (Slurm 24.11) with the Slurm daemons, munge, MariaDB and dnsmasq
# preinstalled and their services disabled, so the roles and playbooks install onto hosts that cannot reach
# any mirror (the box runs on an internal podman network).
# Sourced by scripts/install-test-deps (bash, as root, with apt_install and $CLUSTERDEF_CACHE), after
# 50-molecule.sh, whose containers.conf (host quirks) and containers.podman collection it reuses.
#
# Cached under $CLUSTERDEF_CACHE/box/:
#   trixie.tar      the debootstrap root, imported as localhost/clusterdef-box:trixie (re-imported when the
#                   image is missing; rebuilt when the recipe below changes)
#   trixie.recipe   the recipe the tarball was built from (packages, drop-ins): a different recipe rebuilds
#   trixie.versions `package version` of the image's main packages (e.g. `slurmctld 24.11.5-2`), read by tests
# Set CLUSTERDEF_BOX=0 to skip it (the box tests then skip, or fail under CI).

if [ "${CLUSTERDEF_BOX:-1}" != "0" ]; then
  apt_install podman runc conmon catatonit containernetworking-plugins iptables debootstrap

  box_dir="$CLUSTERDEF_CACHE/box"
  box_image=localhost/clusterdef-box:trixie
  box_tar="$box_dir/trixie.tar"
  box_conf="$CLUSTERDEF_CACHE/molecule/containers.conf"
  mkdir -p "$box_dir"
  if [ ! -s "$box_conf" ]; then
    echo "90-box needs 50-molecule.sh's containers.conf ($box_conf): run that part first" >&2
    return 1
  fi
  # systemd and what Ansible needs, the Slurm daemons and clients, munge, MariaDB, dnsmasq (the boot server),
  # pam_slurm_adopt and sudo (roles install them), procps/iproute2 for the tests' probes.
  box_packages=systemd,systemd-sysv,dbus,python3,python3-apt,iproute2,procps,slurmctld,slurmd,slurm-client,slurmdbd
  box_packages+=,munge,mariadb-server,dnsmasq,ipxe,busybox,prometheus,libpam-slurm-adopt,sudo
  # Services the postinst scripts enable; the roles (or the tests) start what each host runs.
  box_disabled="slurmctld slurmd slurmdbd mariadb dnsmasq prometheus"
  # Debian's slurmd.service has ConditionPathExists=/etc/slurm/slurm.conf; a configless node has none and
  # systemd would skip slurmd silently.
  box_dropin=$'[Unit]\nConditionPathExists=\n'
  box_recipe="debootstrap --variant=minbase --include=$box_packages trixie
disabled: $box_disabled
slurmd.service.d/configless.conf: $box_dropin"

  if [ ! -s "$box_tar" ] || [ ! -s "$box_dir/trixie.versions" ] ||
     ! printf '%s' "$box_recipe" | cmp -s - "$box_dir/trixie.recipe"; then
    box_root="$box_dir/root.tmp.$$"
    rm -rf "$box_root" && mkdir -p "$box_root"
    echo "debootstrap trixie box image (once; cached under $box_dir)"
    # debootstrap's own default mirror; no mirror named here.
    if ! debootstrap --variant=minbase "--include=$box_packages" trixie "$box_root" >"$box_root.log" 2>&1; then
      tail -n 20 "$box_root.log" >&2; rm -rf "$box_root" "$box_root.log"; return 1
    fi
    # enable/disable work offline in a chroot (they only edit symlinks); munge stays enabled: every host runs it.
    # shellcheck disable=SC2086
    chroot "$box_root" systemctl disable $box_disabled >/dev/null 2>&1
    # mariadb.socket where the release has one (socket activation would start mariadb on the first connection)
    chroot "$box_root" systemctl disable mariadb.socket >/dev/null 2>&1 || true
    mkdir -p "$box_root/etc/systemd/system/slurmd.service.d"
    printf '%s' "$box_dropin" >"$box_root/etc/systemd/system/slurmd.service.d/configless.conf"
    # One munge key for the whole image (munge's postinst makes one; make it if a release does not).
    if [ ! -s "$box_root/etc/munge/munge.key" ]; then
      dd if=/dev/urandom of="$box_root/etc/munge/munge.key" bs=1024 count=1 status=none
    fi
    chroot "$box_root" sh -c 'chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key'
    # Each container gets its own machine id at boot (systemd makes one when the file is empty).
    : >"$box_root/etc/machine-id"
    rm -f "$box_root/var/lib/dbus/machine-id"
    chroot "$box_root" dpkg-query -W -f '${Package} ${Version}\n' \
      slurmctld slurmd slurmdbd slurm-client munge mariadb-server dnsmasq systemd python3 >"$box_dir/trixie.versions.tmp"
    rm -rf "$box_root"/var/cache/apt/archives/*.deb "$box_root"/var/lib/apt/lists/* "$box_root.log"
    tar -C "$box_root" -cf "$box_tar.tmp" . && mv "$box_tar.tmp" "$box_tar"
    mv "$box_dir/trixie.versions.tmp" "$box_dir/trixie.versions"
    printf '%s' "$box_recipe" >"$box_dir/trixie.recipe"
    rm -rf "$box_root"
    CONTAINERS_CONF="$box_conf" podman rmi -f "$box_image" >/dev/null 2>&1 || true
  fi
  if ! CONTAINERS_CONF="$box_conf" podman image exists "$box_image"; then
    CONTAINERS_CONF="$box_conf" podman import --change 'CMD ["/sbin/init"]' "$box_tar" "$box_image" >/dev/null
  fi
fi
