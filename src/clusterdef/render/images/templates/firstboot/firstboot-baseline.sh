#!/bin/sh
# clusterdef first-boot baseline for image {{ name }} {{ img.version }}, validated set {{ set }}.
# Rendered by clusterdef; run by {{ "clusterdef-baseline.service" }} on every boot.
#
# Compares what the node runs (driver, CUDA, NCCL, container toolkit, slurmd, DOCA-OFED, MFT, and
# the firmware its hardware type pins) with the set. Off-matrix: one log line per device naming both versions,
# a marker file, exit 1 - the node must not register. On-matrix: a marker, exit 0.
#
# Every device is read by {{ probe_path }} (clusterdef-probe, the probe nodecheck and the
# gpu_facts collector use too): all GPUs' VBIOS, every NVSwitch, every ConnectX/BlueField HCA,
# the BMC and SBIOS, each with the tool named in $BASE/tools. A device that differs is named
# with both versions; a component nothing can read is off-matrix ("unknown", with the probe's
# reason): a version nobody can read is not a validated one. Fewer devices than the hardware
# type has ($BASE/devices: the GPU count) is off-matrix too: an unread GPU is an unchecked one.
#   CLUSTERDEF_BASELINE_DIR  expected versions (default /usr/lib/clusterdef/baseline)
#   CLUSTERDEF_STATE_DIR     where the marker goes (default /var/lib/clusterdef)
#   CLUSTERDEF_PROBE         the probe (default {{ probe_path }})
#   CLUSTERDEF_CMDLINE       kernel command line file (default /proc/cmdline)
# nvfwupd reads the BMC's inventory with NVFWUPD_TARGET (the unit reads /etc/clusterdef/nvfwupd.env).
set -u
BASE=${CLUSTERDEF_BASELINE_DIR:-/usr/lib/clusterdef/baseline}
STATE=${CLUSTERDEF_STATE_DIR:-/var/lib/clusterdef}
PROBE=${CLUSTERDEF_PROBE:-{{ probe_path }}}
CMDLINE=${CLUSTERDEF_CMDLINE:-/proc/cmdline}
TAG=clusterdef-baseline
TAB=$(printf '\t')

log() { echo "$TAG: $*"; }

# Value of KEY=VALUE on the kernel command line.
arg() {
  for w in $(cat "$CMDLINE" 2>/dev/null); do
    case $w in "$1="*) echo "${w#*=}"; return 0 ;; esac
  done
}

# Value of KEY in a KEY=VALUE file.
value() { sed -n "s/^$2=//p" "$1" 2>/dev/null | head -n 1; }

pinned_set=$(value "$BASE/meta" set)
image=$(value "$BASE/meta" image)
boot_set=$(arg clusterdef.set)
group=$(arg clusterdef.group)
host=$(cat /proc/sys/kernel/hostname 2>/dev/null || echo unknown)
bad=0
checked=0

mkdir -p "$STATE"
rm -f "$STATE/off-matrix" "$STATE/on-matrix" "$STATE/off-matrix.tmp"

off() {  # WHAT RUNNING PINNED
  log "OFF-MATRIX $1: node runs $2, set $pinned_set pins $3"
  printf '%s running=%s pinned=%s\n' "$1" "$2" "$3" >> "$STATE/off-matrix.tmp"
  bad=$((bad + 1))
}

# Is GOT the pinned WANT? Equal; for doca and mft also WANT followed by a build part (-, ., +, ~):
# their package sources pin `{version}*` (matrices/compat/package-sources.yaml), the set names the release.
same() {  # COMPONENT GOT WANT
  [ "$2" = "$3" ] && return 0
  case $1 in doca | mft) ;; *) return 1 ;; esac
  case $2 in "$3"-* | "$3".* | "$3"+* | "$3"~*) return 0 ;; esac
  return 1
}

# Compare every device the probe reports for COMPONENT with WANT; fewer than EXPECT devices is off-matrix.
check() {  # COMPONENT WANT EXPECT
  tool=$(value "$BASE/tools" "$1")
  out=$(sh "$PROBE" "$1${tool:+=$tool}" 2>/dev/null </dev/null)
  [ -n "$out" ] || out="$1${TAB}-${TAB}unknown${TAB}the probe $PROBE printed nothing"
  n=0
  while IFS="$TAB" read -r comp dev got why; do
    [ "$comp" = "$1" ] || continue
    checked=$((checked + 1))
    what=$1
    [ "$dev" = - ] || what="$1 $dev"
    if [ "$got" = unknown ]; then
      off "$what" "unknown (${why:-unreadable})" "$2"
    else
      n=$((n + 1))
      same "$1" "$got" "$2" || off "$what" "$got" "$2"
    fi
  done <<EOT
$out
EOT
  if [ "${3:-0}" -gt 0 ] && [ "$n" -gt 0 ] && [ "$n" -lt "$3" ]; then
    checked=$((checked + 1))
    off "$1" "$n of $3 devices readable" "$2 on all $3"
  fi
}

check_file() {
  while IFS='=' read -r comp want; do
    case $comp in '' | '#'*) continue ;; esac
    check "$comp" "$want" "$(value "$BASE/devices/$2" "$comp")" </dev/null
  done < "$1"
}

[ "$boot_set" = "$pinned_set" ] || off set "${boot_set:-none}" "$pinned_set"
hardware=$(value "$BASE/groups" "$group")
if [ -z "$hardware" ] || [ ! -r "$BASE/hardware/$hardware" ]; then
  off group "${group:-none}" "one of: $(sed 's/=.*//' "$BASE/groups" | tr '\n' ' ')"
else
  check_file "$BASE/hardware/$hardware" "$hardware"
fi
check_file "$BASE/components" "$hardware"

if [ "$bad" -gt 0 ]; then
  mv "$STATE/off-matrix.tmp" "$STATE/off-matrix"
  log "node $host (group ${group:-none}, image $image) is OFF-MATRIX for set $pinned_set: $bad of $checked check(s) failed; refusing to register"
  exit 1
fi
echo "set=$pinned_set image=$image group=$group checked=$checked" > "$STATE/on-matrix"
log "node $host (group $group, image $image) is on-matrix for set $pinned_set: $checked check(s) passed"
exit 0
