#!/bin/sh
# clusterdef first-boot baseline for image {{ name }} {{ img.version }}, validated set {{ set }}.
# Rendered by clusterdef; run by {{ "clusterdef-baseline.service" }} on every boot.
#
# Compares what the node runs (driver, CUDA, NCCL, container toolkit, and the firmware its
# hardware type pins) with the set. Off-matrix: one log line per component naming both
# versions, a marker file, exit 1 - the node must not register. On-matrix: a marker, exit 0.
#
# Probes, in order: a file $CLUSTERDEF_PROBE_DIR/<component> (first line), the variable
# CLUSTERDEF_PROBE_<COMPONENT>, then the real tool or sysfs file. No answer counts as
# off-matrix ("unknown"): a version nobody can read is not a validated one.
#   CLUSTERDEF_BASELINE_DIR  expected versions (default /usr/lib/clusterdef/baseline)
#   CLUSTERDEF_STATE_DIR     where the marker goes (default /var/lib/clusterdef)
#   CLUSTERDEF_PROBE_DIR     probe overrides (default /etc/clusterdef/probes)
#   CLUSTERDEF_CMDLINE       kernel command line file (default /proc/cmdline)
set -u
BASE=${CLUSTERDEF_BASELINE_DIR:-/usr/lib/clusterdef/baseline}
STATE=${CLUSTERDEF_STATE_DIR:-/var/lib/clusterdef}
PROBES=${CLUSTERDEF_PROBE_DIR:-/etc/clusterdef/probes}
CMDLINE=${CLUSTERDEF_CMDLINE:-/proc/cmdline}
TAG=clusterdef-baseline

log() { echo "$TAG: $*"; }

# Value of KEY=VALUE on the kernel command line.
arg() {
  for w in $(cat "$CMDLINE" 2>/dev/null); do
    case $w in "$1="*) echo "${w#*=}"; return 0 ;; esac
  done
}

# Value of KEY in a KEY=VALUE file.
value() { sed -n "s/^$2=//p" "$1" 2>/dev/null | head -n 1; }

# Debian package version without the revision: 13.0.2-1 -> 13.0.2, 2.30.4-1+cuda13.0 -> 2.30.4.
pkgver() {
  command -v dpkg-query >/dev/null 2>&1 || return 0
  v=$(dpkg-query -W -f='${Version}' "$1" 2>/dev/null) || return 0
  [ -n "$v" ] && echo "${v%%-*}"
}

first_line() { [ -r "$1" ] && head -n 1 "$1"; }

probe() {
  c=$1
  if [ -r "$PROBES/$c" ]; then first_line "$PROBES/$c"; return 0; fi
  var=CLUSTERDEF_PROBE_$(echo "$c" | tr 'a-z-' 'A-Z_')
  eval "v=\${$var:-}"
  if [ -n "$v" ]; then echo "$v"; return 0; fi
  case $c in
    driver) first_line /sys/module/nvidia/version ;;
    cuda) pkgver "$(value "$BASE/meta" cuda_package)" ;;
    nccl) pkgver libnccl2 ;;
    container_toolkit) pkgver nvidia-container-toolkit ;;
    sbios) first_line /sys/class/dmi/id/bios_version ;;
    bmc) command -v ipmitool >/dev/null 2>&1 &&
           ipmitool mc info 2>/dev/null | sed -n 's/^Firmware Revision *: *//p' | head -n 1 ;;
    gpu_vbios) command -v nvidia-smi >/dev/null 2>&1 &&
                 nvidia-smi --query-gpu=vbios_version --format=csv,noheader 2>/dev/null | head -n 1 ;;
    cx7) for f in /sys/class/infiniband/*/fw_ver; do [ -r "$f" ] && { first_line "$f"; return 0; }; done ;;
  esac
  return 0
}

pinned_set=$(value "$BASE/meta" set)
image=$(value "$BASE/meta" image)
boot_set=$(arg clusterdef.set)
group=$(arg clusterdef.group)
host=$(cat /proc/sys/kernel/hostname 2>/dev/null || echo unknown)
bad=0
checked=0

mkdir -p "$STATE"
rm -f "$STATE/off-matrix" "$STATE/on-matrix"

off() {
  log "OFF-MATRIX $1: node runs $2, set $pinned_set pins $3"
  echo "$1 running=$2 pinned=$3" >> "$STATE/off-matrix.tmp"
  bad=$((bad + 1))
}

check_file() {
  while IFS='=' read -r comp want; do
    case $comp in '' | '#'*) continue ;; esac
    got=$(probe "$comp" </dev/null)
    checked=$((checked + 1))
    [ "$got" = "$want" ] || off "$comp" "${got:-unknown}" "$want"
  done < "$1"
}

rm -f "$STATE/off-matrix.tmp"
[ "$boot_set" = "$pinned_set" ] || off set "${boot_set:-none}" "$pinned_set"
hardware=$(value "$BASE/groups" "$group")
if [ -z "$hardware" ] || [ ! -r "$BASE/hardware/$hardware" ]; then
  off group "${group:-none}" "one of: $(sed 's/=.*//' "$BASE/groups" | tr '\n' ' ')"
else
  check_file "$BASE/hardware/$hardware"
fi
check_file "$BASE/components"

if [ "$bad" -gt 0 ]; then
  mv "$STATE/off-matrix.tmp" "$STATE/off-matrix"
  log "node $host (group ${group:-none}, image $image) is OFF-MATRIX for set $pinned_set: $bad of $checked check(s) failed; refusing to register"
  exit 1
fi
echo "set=$pinned_set image=$image group=$group checked=$checked" > "$STATE/on-matrix"
log "node $host (group $group, image $image) is on-matrix for set $pinned_set: $checked check(s) passed"
exit 0
