#!/bin/sh
# Access to model secure-weights (export-controlled) of filesystem secure-data (nfs, /secure-data) of cluster lab; rendered by clusterdef.
set -eu
MOUNT=${CLUSTERDEF_MOUNT:-/secure-data}
[ -d "$MOUNT" ] || { echo "clusterdef: $MOUNT is not a directory" >&2; exit 1; }
# readers: secure-users; mounted on node groups secure
# a change of its readers or classification is approved by: hpc-admins
dir="$MOUNT"/models/secure-weights
mkdir -p "$MOUNT"/models
mkdir -p "$dir"
setfacl -R -b "$dir"
setfacl -R -m u::rwX,g::---,o::---,g:secure-users:rX "$dir"
find "$dir" -type d -exec setfacl -m d:u::rwX,d:g::---,d:o::---,d:g:secure-users:rX {} +
