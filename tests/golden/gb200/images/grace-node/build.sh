#!/bin/sh
# Build image grace-node 2026.07.1 (cluster gb200, set 2026.07-r580) and its PXE artefacts:
#   grace-node-2026.07.1-2026.07-r580-4d2e449f7949.vmlinuz   the kernel 6.8.0-60-generic from the image's /boot
#   grace-node-2026.07.1-2026.07-r580-4d2e449f7949.initrd    the whole image as a zstd-compressed cpio (diskless node; /init -> systemd)
# The provisioning server serves both under /images/. Rendered by clusterdef.
#
# Usage (root, mkosi 14 or later, cpio, zstd): sh build.sh [ARTEFACT_DIR]
#   MKOSI_ARGS   extra mkosi arguments (e.g. --cache=DIR, or --package=!PKG to leave one out)
#   KERNEL       a vmlinuz to use instead of the image's own (when the kernel package is left out)
# Before a build with the NVIDIA stack, place NVIDIA's keyrings in mkosi.skeleton/usr/share/keyrings/:
#   cuda-archive-keyring.gpg (from cuda-keyring 1.1-1) and nvidia-container-toolkit-keyring.gpg.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/artefacts}
mkdir -p "$out"
cd "$here"
# Executables of mkosi.extra/ (the renderer writes plain files): the probe, the first-boot baseline, nodecheck.
chmod 0755 mkosi.extra/usr/lib/clusterdef/probe
chmod 0755 mkosi.extra/usr/lib/clusterdef/firstboot-baseline
chmod 0755 mkosi.extra/usr/sbin/clusterdef-nodecheck
# shellcheck disable=SC2086
mkosi --force ${MKOSI_ARGS:-} build
root=$here/grace-node-2026.07.1-2026.07-r580-4d2e449f7949
[ -d "$root" ] || root=$here/mkosi.output/grace-node-2026.07.1-2026.07-r580-4d2e449f7949
kernel=${KERNEL:-$root/boot/vmlinuz-6.8.0-60-generic}
cp "$kernel" "$out/grace-node-2026.07.1-2026.07-r580-4d2e449f7949.vmlinuz.tmp" && mv "$out/grace-node-2026.07.1-2026.07-r580-4d2e449f7949.vmlinuz.tmp" "$out/grace-node-2026.07.1-2026.07-r580-4d2e449f7949.vmlinuz"
ln -sfn usr/lib/systemd/systemd "$root/init"
# Left out of the initrd: /boot (served separately) and apt's package lists and cache (a diskless
# node is never updated in place; a change is a new image).
(cd "$root" && find . \( -path ./boot -o -path ./var/lib/apt/lists -o -path ./var/cache/apt \) -prune -o -print \
   | LC_ALL=C sort | cpio -o -H newc --quiet) \
  | zstd -q -3 -T0 > "$out/grace-node-2026.07.1-2026.07-r580-4d2e449f7949.initrd.tmp"
mv "$out/grace-node-2026.07.1-2026.07-r580-4d2e449f7949.initrd.tmp" "$out/grace-node-2026.07.1-2026.07-r580-4d2e449f7949.initrd"
echo "built $out/grace-node-2026.07.1-2026.07-r580-4d2e449f7949.vmlinuz $out/grace-node-2026.07.1-2026.07-r580-4d2e449f7949.initrd"
# Signed images: the checksum file, its signature and the verifier initrd (a node boots nothing else).
sh "$here/sign.sh" "$out"
