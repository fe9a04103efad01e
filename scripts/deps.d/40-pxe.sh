# PXE and node-image tests (tests/test_pxe_*.py, tests/test_images.py): QEMU (TCG), iPXE
# ROMs, iPXE's first stages (ipxe: undionly.kpxe, ipxe.efi), OVMF, dnsmasq, busybox, minisign (signed
# images, tests/test_image_signing.py), mkosi 14, and a Debian kernel cached under $CLUSTERDEF_CACHE.
# Sourced by scripts/install-test-deps (bash, as root, with apt_install and $CLUSTERDEF_CACHE).
#
# Cached pieces ($CLUSTERDEF_CACHE/pxe/):
#   vmlinuz-<kver>   bookworm's linux-image-<kver> kernel, extracted once from the .deb
#                    (the .deb itself is deleted: only the ~8 MiB kernel is kept)
#   modules-<kver>/  the few modules the mkosi image boot needs (virtio_net is built in,
#                    so this stays empty unless a test needs one)
# Everything else (the busybox initrd, the mkosi image) is built by the tests from
# these pieces, under their own temporary directories or $CLUSTERDEF_CACHE/pxe/.
# The daemons are not started; the tests start their own, inside network namespaces.

apt_install qemu-system-x86 qemu-utils ipxe-qemu ipxe ovmf dnsmasq-base busybox-static cpio socat zstd minisign \
  mkosi debootstrap systemd-container iproute2 python3

pxe_kernel() {
  local dir="$CLUSTERDEF_CACHE/pxe"
  mkdir -p "$dir"
  if compgen -G "$dir/vmlinuz-*" >/dev/null; then
    return 0
  fi
  local tmp
  tmp=$(mktemp -d "$dir/.kernel.XXXXXX") && chmod 755 "$tmp"
  # The newest signed-off bookworm kernel flavour: linux-image-amd64 names it.
  local kpkg
  kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  [ -n "$kpkg" ] || { echo "cannot find the bookworm kernel package" >&2; rm -rf "$tmp"; return 1; }
  echo "download $kpkg (once; cached under $dir)"
  (cd "$tmp" && apt-get download -q "$kpkg" >/dev/null) || { rm -rf "$tmp"; return 1; }
  dpkg-deb -x "$tmp"/*.deb "$tmp/x"
  local kver=${kpkg#linux-image-}
  kver=${kver%-unsigned}
  cp "$tmp"/x/boot/vmlinuz-* "$dir/vmlinuz-$kver.tmp" && mv "$dir/vmlinuz-$kver.tmp" "$dir/vmlinuz-$kver"
  rm -rf "$tmp"
}

pxe_kernel
