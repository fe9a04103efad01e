#!/bin/sh
# Sign build grace-node-2026.07.1-2026.07-r580-4d2e449f7949 of image grace-node (cluster gb200) and build its verifier initrd;
# rendered by clusterdef. build.sh runs it last; run it alone on artefacts built elsewhere.
#   grace-node-2026.07.1-2026.07-r580-4d2e449f7949.SHA256SUMS          sha256 of the .vmlinuz and .initrd
#   grace-node-2026.07.1-2026.07-r580-4d2e449f7949.SHA256SUMS.minisig  its minisign signature (trusted comment: the artefact name)
#   grace-node-2026.07.1-2026.07-r580-4d2e449f7949.verify.initrd       busybox, minisign, zstd, the public key and verify/init: the first
#                                 initrd every node loads; it boots the image only when both verify
# Usage: sh sign.sh [ARTEFACT_DIR]. Needs minisign, zstd, busybox-static (/bin/busybox), cpio, gzip.
# The secret key (by reference, never in the definition): CLUSTERDEF_SIGNING_KEY, else /etc/clusterdef/gb200-images.key
# (a key made with `minisign -G -W` signs unattended; an encrypted one asks for its password).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$(cd "${1:-$here/artefacts}" && pwd)
key=${CLUSTERDEF_SIGNING_KEY:-/etc/clusterdef/gb200-images.key}
art=grace-node-2026.07.1-2026.07-r580-4d2e449f7949
for f in "$art.vmlinuz" "$art.initrd"; do [ -s "$out/$f" ] || { echo "sign.sh: $out/$f is missing" >&2; exit 1; }; done
[ -r "$key" ] || { echo "sign.sh: cannot read the signing key $key (CLUSTERDEF_SIGNING_KEY)" >&2; exit 1; }
(cd "$out" && sha256sum "$art.vmlinuz" "$art.initrd") > "$out/$art.SHA256SUMS.tmp"
mv "$out/$art.SHA256SUMS.tmp" "$out/$art.SHA256SUMS"
minisign -S -s "$key" -m "$out/$art.SHA256SUMS" -x "$out/$art.SHA256SUMS.minisig" -t "clusterdef $art"
minisign -Vq -p "$here/verify/minisign.pub" -m "$out/$art.SHA256SUMS" -x "$out/$art.SHA256SUMS.minisig" \
  || { echo "sign.sh: the key does not match images.grace-node.signing.public_key" >&2; exit 1; }
v=$(mktemp -d)
trap 'rm -rf "$v"' EXIT
mkdir -p "$v/bin" "$v/clusterdef" "$v/proc" "$v/dev" "$v/newroot"
cp /bin/busybox "$v/bin/busybox"
# minisign and zstd with the shared libraries they load (ldd), at the same paths
for tool in minisign zstd; do
  path=$(command -v "$tool")
  cp "$path" "$v/bin/$tool"
  for lib in $(ldd "$path" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
    mkdir -p "$v$(dirname "$lib")"
    cp -L "$lib" "$v$lib"
  done
done
cp "$here/verify/init" "$v/init"
cp "$here/verify/minisign.pub" "$v/clusterdef/minisign.pub"
chmod 0755 "$v/init" "$v/bin/"*
(cd "$v" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) | gzip -9n > "$out/$art.verify.initrd.tmp"
mv "$out/$art.verify.initrd.tmp" "$out/$art.verify.initrd"
echo "signed $out/$art.SHA256SUMS ($out/$art.SHA256SUMS.minisig), verifier $out/$art.verify.initrd"
