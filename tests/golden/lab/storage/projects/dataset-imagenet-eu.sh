#!/bin/sh
# Access to dataset imagenet-eu (restricted) of filesystem projects (lustre, /projects) of cluster lab; rendered by clusterdef.
set -eu
MOUNT=${CLUSTERDEF_MOUNT:-/projects}
[ -d "$MOUNT" ] || { echo "clusterdef: $MOUNT is not a directory" >&2; exit 1; }
# readers: vision-users, imagenet-licensed; mounted on node groups infer
# a change of its readers or classification is approved by: data-stewards
dir="$MOUNT"/datasets/imagenet-eu
mkdir -p "$MOUNT"/datasets
# project quota: 2 TiB, project 393144308
mkdir -p "$dir"
lfs project -p 393144308 -s -r "$dir"
lfs setquota -p 393144308 -B 2147483648k "$MOUNT"
setfacl -R -b "$dir"
setfacl -R -m u::rwX,g::---,o::---,g:vision-users:rX,g:imagenet-licensed:rX "$dir"
find "$dir" -type d -exec setfacl -m d:u::rwX,d:g::---,d:o::---,d:g:vision-users:rX,d:g:imagenet-licensed:rX {} +
