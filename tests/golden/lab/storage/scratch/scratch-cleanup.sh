#!/bin/sh
# Scratch expiry of filesystem scratch (btrfs, /scratch) of cluster lab; rendered by clusterdef.
set -eu
MOUNT=${CLUSTERDEF_MOUNT:-/scratch}
[ -d "$MOUNT" ] || { echo "clusterdef: $MOUNT is not a directory" >&2; exit 1; }
# tenant vision: files not accessed for 14 days
dir="$MOUNT"/vision
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +20160 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +20160 -delete
fi
# tenant nlp: files not accessed for 30 days
dir="$MOUNT"/nlp
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +43200 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +43200 -delete
fi
# tenant secure: files not accessed for 7 days
dir="$MOUNT"/secure
if [ -d "$dir" ] && [ ! -L "$dir" ]; then
  find "$dir" -xdev -mindepth 1 -type f -amin +10080 -delete
  find "$dir" -xdev -mindepth 1 -type d -empty -amin +10080 -delete
fi
