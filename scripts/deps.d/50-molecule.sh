# Molecule tests of the Ansible roles (tests/test_roles.py): rootful podman with runc and
# Debian 12 and Ubuntu 22.04 base images built with debootstrap (no registry), plus the containers.podman collection.
# Sourced by scripts/install-test-deps (bash, as root, with apt_install and $CLUSTERDEF_CACHE).
#
# Cached under $CLUSTERDEF_CACHE/molecule/:
#   containers.conf     host quirks (see TESTING.md); tests point CONTAINERS_CONF at it, and it is
#                       copied to /etc/containers/containers.conf when that file is absent or ours
#   bookworm.tar        the debootstrap root (python3 + python3-apt for Ansible, apt-utils for the
#                       scenarios' local apt repositories), imported as localhost/clusterdef-molecule:bookworm
#   jammy.tar           the same for Ubuntu 22.04, imported as localhost/clusterdef-molecule:jammy
#   ubuntu-keyring_*.deb  Debian's ubuntu-keyring package (sha256-checked): debootstrap verifies jammy with
#                       the Ubuntu archive key inside it
#   collections/        ansible_collections/containers/podman from the `ansible` wheel (no Galaxy here)
# Set CLUSTERDEF_MOLECULE=0 to skip all of it (the molecule tests then skip, or fail under CI).

if [ "${CLUSTERDEF_MOLECULE:-1}" != "0" ]; then
  apt_install podman runc conmon catatonit containernetworking-plugins iptables debootstrap unzip

  molecule_dir="$CLUSTERDEF_CACHE/molecule"
  mkdir -p "$molecule_dir"

  # Host quirks: root cannot raise rlimits; cgroups are hybrid, so runc + cgroupfs.
  conf="$molecule_dir/containers.conf"
  cat >"$conf.tmp" <<EOF
# written by clusterdef scripts/deps.d/50-molecule.sh
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=$(cat /proc/sys/kernel/pid_max):$(cat /proc/sys/kernel/pid_max)"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
  mv "$conf.tmp" "$conf"
  if [ ! -e /etc/containers/containers.conf ] || grep -q "written by clusterdef" /etc/containers/containers.conf; then
    mkdir -p /etc/containers && cp "$conf" /etc/containers/containers.conf
  fi

  # Base images: one debootstrap root per release, shared by every scenario (platforms name them by tag).
  # Ubuntu's archive key: the host is Debian and its apt sources carry no ubuntu-keyring, so take Debian's
  # ubuntu-keyring .deb from the pool, checked against the sha256 of Debian trixie's main/binary-all Packages
  # index (signed by Debian's archive key), and point debootstrap at the keyring inside it.
  ubuntu_keyring_deb="$molecule_dir/ubuntu-keyring_2023.11.28.1-0.2_all.deb"
  # The Debian mirror this machine's apt sources name (deb822 `URIs:` or one-line `deb URL`): the pool
  # path is Debian's, the host is whatever the machine is configured with.
  # (`|| true`: under pipefail a missing sources.list or no match must not end the script)
  apt_mirror=$( { cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ {print $2}';
                  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
                    awk '/^deb / {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; break}}'; } |
                awk '!/-security/ && !seen++' || true)
  [ -n "$apt_mirror" ] || { echo "no Debian mirror in this machine's apt sources" >&2; return 1; }
  ubuntu_keyring_url=${apt_mirror%/}/pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1-0.2_all.deb
  ubuntu_keyring_sha256=b2e7ed48431bf9e7978ae810bbdaf253093570d6e3f864e575b7c13554b81174
  for release in bookworm jammy; do
    molecule_image=localhost/clusterdef-molecule:$release
    molecule_tar="$molecule_dir/$release.tar"
    if [ ! -s "$molecule_tar" ]; then
      root="$molecule_dir/root.tmp.$$"
      rm -rf "$root" "$root.keyring" && mkdir -p "$root"
      debootstrap_opts=(--variant=minbase --include=python3,python3-apt,apt-utils,procps)
      case $release in
        bookworm) ;;  # debootstrap's default mirrors for both releases
        jammy)
          if ! echo "$ubuntu_keyring_sha256  $ubuntu_keyring_deb" | sha256sum -c --status 2>/dev/null; then
            if ! python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' \
                 "$ubuntu_keyring_url" "$ubuntu_keyring_deb.tmp" ||
               ! echo "$ubuntu_keyring_sha256  $ubuntu_keyring_deb.tmp" | sha256sum -c --status; then
              echo "refusing $ubuntu_keyring_url: download failed or its sha256 is not $ubuntu_keyring_sha256" >&2
              rm -f "$ubuntu_keyring_deb.tmp"; rm -rf "$root"; return 1
            fi
            mv "$ubuntu_keyring_deb.tmp" "$ubuntu_keyring_deb"
          fi
          dpkg-deb -x "$ubuntu_keyring_deb" "$root.keyring"
          debootstrap_opts+=("--keyring=$root.keyring/usr/share/keyrings/ubuntu-archive-keyring.gpg") ;;
      esac
      echo "debootstrap $release molecule base image (once; cached)"
      if ! debootstrap "${debootstrap_opts[@]}" "$release" "$root" >"$root.log" 2>&1; then
        tail -n 20 "$root.log" >&2; rm -rf "$root" "$root.keyring" "$root.log"; return 1
      fi
      rm -rf "$root.keyring"
      rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root.log"
      tar -C "$root" -cf "$molecule_tar.tmp" . && mv "$molecule_tar.tmp" "$molecule_tar"
      rm -rf "$root"
      CONTAINERS_CONF="$conf" podman rmi -f "$molecule_image" >/dev/null 2>&1 || true
    fi
    if ! CONTAINERS_CONF="$conf" podman image exists "$molecule_image"; then
      CONTAINERS_CONF="$conf" podman import --change 'CMD ["sleep", "infinity"]' \
        "$molecule_tar" "$molecule_image" >/dev/null
    fi
  done

  # containers.podman from the ansible wheel (the wheel is big; only the collection is kept).
  if [ ! -f "$molecule_dir/collections/ansible_collections/containers/podman/MANIFEST.json" ]; then
    wheel_dir="$molecule_dir/wheel.tmp.$$"
    rm -rf "$wheel_dir" && mkdir -p "$wheel_dir"
    python3 -m venv "$wheel_dir/venv"   # the host python may have no pip; a throwaway venv has one
    "$wheel_dir/venv/bin/pip" download -q --no-deps --disable-pip-version-check -d "$wheel_dir" "ansible>=12,<13"
    rm -rf "$molecule_dir/collections.tmp" && mkdir -p "$molecule_dir/collections.tmp"
    unzip -q "$wheel_dir"/ansible-*.whl 'ansible_collections/containers/podman/*' -d "$molecule_dir/collections.tmp"
    rm -rf "$molecule_dir/collections" && mv "$molecule_dir/collections.tmp" "$molecule_dir/collections"
    rm -rf "$wheel_dir"
  fi
fi
