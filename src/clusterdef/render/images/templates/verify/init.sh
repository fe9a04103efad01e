#!/bin/busybox sh
# /init of the verifier initrd of image {{ name }} (cluster {{ cluster }}); rendered by clusterdef.
# The boot server's iPXE script loads this initrd, then the build's image initrd, its SHA256SUMS and
# the minisign signature of that, each as a file under /clusterdef/. Nothing of the image runs until
# the signature verifies with the cluster's key and the image matches its signed checksum; otherwise
# the node says why on the console and powers off.
/bin/busybox mkdir -p /proc /dev /sys /newroot
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t devtmpfs devtmpfs /dev 2>/dev/null
export PATH=/bin
art=
for arg in $(/bin/busybox cat /proc/cmdline); do
  case "$arg" in clusterdef.image=*) art=${arg#clusterdef.image=} ;; esac
done
d=/clusterdef
refuse() {
  echo "clusterdef: REFUSING to boot image ${art:-?}: $1"
  echo "clusterdef: the node stays off; publish a build signed with the cluster's key (sign.sh), then power it on"
  /bin/busybox sync
  /bin/busybox poweroff -f
  while :; do /bin/busybox sleep 60; done
}
case "$art" in '' | *[!A-Za-z0-9._-]*) refuse "no valid clusterdef.image= on the kernel command line" ;; esac
[ -s "$d/image.initrd" ] || refuse "the image initrd was not loaded"
[ -s "$d/SHA256SUMS" ] || refuse "unsigned: the boot server has no $art.SHA256SUMS"
[ -s "$d/SHA256SUMS.minisig" ] || refuse "unsigned: the boot server has no $art.SHA256SUMS.minisig"
/bin/minisign -Vq -p "$d/minisign.pub" -m "$d/SHA256SUMS" -x "$d/SHA256SUMS.minisig" \
  || refuse "the signature of $art.SHA256SUMS does not verify with the cluster's key"
want=$(/bin/busybox awk -v f="$art.initrd" '$2 == f || $2 == "*" f { print $1 }' "$d/SHA256SUMS")
[ -n "$want" ] || refuse "the signed $art.SHA256SUMS does not list $art.initrd"
got=$(/bin/busybox sha256sum "$d/image.initrd" | /bin/busybox cut -d' ' -f1)
[ "$got" = "$want" ] || refuse "the image initrd does not match its signed checksum (tampered or corrupt)"
echo "clusterdef: image $art verified (minisign signature of its SHA256SUMS)"
/bin/busybox mount -t tmpfs -o mode=0755 tmpfs /newroot || refuse "cannot mount the root tmpfs"
/bin/zstd -dcq "$d/image.initrd" | (cd /newroot && /bin/busybox cpio -idm 2>/dev/null) \
  || refuse "the verified image does not unpack"
/bin/busybox rm -f "$d/image.initrd"
/bin/busybox umount /proc
/bin/busybox umount /dev 2>/dev/null
exec /bin/busybox switch_root /newroot /init
