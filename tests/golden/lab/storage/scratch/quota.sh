#!/bin/sh
# Project quotas of filesystem scratch (btrfs, /scratch) of cluster lab; rendered by clusterdef.
set -eu
MOUNT=${CLUSTERDEF_MOUNT:-/scratch}
[ -d "$MOUNT" ] || { echo "clusterdef: $MOUNT is not a directory" >&2; exit 1; }
btrfs quota enable "$MOUNT"
# tenant vision: 20 TiB, project 390289608
dir="$MOUNT"/vision
[ -d "$dir" ] || btrfs subvolume create "$dir" >/dev/null
btrfs qgroup limit 21990232555520 "$dir"
# tenant nlp: 50 TiB, project 608539071
dir="$MOUNT"/nlp
[ -d "$dir" ] || btrfs subvolume create "$dir" >/dev/null
btrfs qgroup limit 54975581388800 "$dir"
# tenant secure: 10 TiB, project 920551700
dir="$MOUNT"/secure
[ -d "$dir" ] || btrfs subvolume create "$dir" >/dev/null
btrfs qgroup limit 10995116277760 "$dir"
