#!/bin/sh
# Build image mgmt 2026.07.1 (cluster lab, set 2026.07-r580) and its PXE artefacts:
#   mgmt-2026.07.1-2026.07-r580-559494e4003d.vmlinuz   the kernel 6.8.0-60-generic from the image's /boot
#   mgmt-2026.07.1-2026.07-r580-559494e4003d.initrd    the whole image as a zstd-compressed cpio (diskless node; /init -> systemd)
# The provisioning server serves both under /images/. Rendered by clusterdef.
#
# Usage (root, mkosi 14 or later, cpio, zstd): sh build.sh [ARTEFACT_DIR]
#   MKOSI_ARGS   extra mkosi arguments (e.g. --cache=DIR, or --package=!PKG to leave one out)
#   KERNEL       a vmlinuz to use instead of the image's own (when the kernel package is left out)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/artefacts}
mkdir -p "$out"
cd "$here"
# Executables of mkosi.extra/ (the renderer writes plain files): the probe, the first-boot baseline, nodecheck.
chmod 0755 mkosi.extra/usr/lib/clusterdef/probe
chmod 0755 mkosi.extra/usr/lib/clusterdef/firstboot-baseline
# Files that sssd and sudo refuse at the renderer's 0644 (sssd.conf 0600, sudoers 0440).
chmod 0440 mkosi.extra/etc/sudoers.d/clusterdef-admins
# shellcheck disable=SC2086
mkosi --force ${MKOSI_ARGS:-} build
root=$here/mgmt-2026.07.1-2026.07-r580-559494e4003d
[ -d "$root" ] || root=$here/mkosi.output/mgmt-2026.07.1-2026.07-r580-559494e4003d
kernel=${KERNEL:-$root/boot/vmlinuz-6.8.0-60-generic}
cp "$kernel" "$out/mgmt-2026.07.1-2026.07-r580-559494e4003d.vmlinuz.tmp" && mv "$out/mgmt-2026.07.1-2026.07-r580-559494e4003d.vmlinuz.tmp" "$out/mgmt-2026.07.1-2026.07-r580-559494e4003d.vmlinuz"
ln -sfn usr/lib/systemd/systemd "$root/init"
# Left out of the initrd: /boot (served separately) and apt's package lists and cache (a diskless
# node is never updated in place; a change is a new image).
(cd "$root" && find . \( -path ./boot -o -path ./var/lib/apt/lists -o -path ./var/cache/apt \) -prune -o -print \
   | LC_ALL=C sort | cpio -o -H newc --quiet) \
  | zstd -q -3 -T0 > "$out/mgmt-2026.07.1-2026.07-r580-559494e4003d.initrd.tmp"
mv "$out/mgmt-2026.07.1-2026.07-r580-559494e4003d.initrd.tmp" "$out/mgmt-2026.07.1-2026.07-r580-559494e4003d.initrd"
echo "built $out/mgmt-2026.07.1-2026.07-r580-559494e4003d.vmlinuz $out/mgmt-2026.07.1-2026.07-r580-559494e4003d.initrd"
