#!/bin/sh
# Build a local apt repository of small stand-in packages with NVIDIA's real package names and
# version strings (shared/reference/compat/packages.yaml: R580+ unversioned names, "-1" Debian
# CUDA-repo revisions, libnccl2 "+cudaX.Y" suffix, the container toolkit's four packages).
# Runs inside the molecule container (dpkg-deb + apt-ftparchive), then points apt at the repository only.
set -eu
REPO=/srv/standin-repo
rm -rf "$REPO" /tmp/standin-pkgs && mkdir -p "$REPO" /tmp/standin-pkgs

pkg() {  # pkg NAME VERSION "DEPENDS" [FILE CONTENT]...
  name=$1 version=$2 depends=$3; shift 3
  dir=/tmp/standin-pkgs/$name-$version
  mkdir -p "$dir/DEBIAN"
  { echo "Package: $name"; echo "Version: $version"; echo "Architecture: all"
    echo "Maintainer: clusterdef stand-in <noreply@example.invalid>"
    [ -n "$depends" ] && echo "Depends: $depends"
    echo "Description: stand-in for $name $version (clusterdef molecule tests)"; } >"$dir/DEBIAN/control"
  while [ $# -ge 2 ]; do
    mkdir -p "$dir$(dirname "$1")"; printf '%s\n' "$2" >"$dir$1"; chmod 0755 "$dir$1"; shift 2
  done
  dpkg-deb -Zgzip --build "$dir" "$REPO/${name}_${version}_all.deb" >/dev/null
}

for v in 580.95.05 580.126.20; do
  pkg libnvidia-compute "$v-1" ""
  pkg nvidia-driver-open "$v-1" "libnvidia-compute (= $v-1)" /usr/bin/nvidia-smi "#!/bin/sh
vbios=\$(cat /var/lib/standin/vbios 2>/dev/null || echo 96.00.68.00.01)
case \"\$*\" in
  *--query-gpu=index,pci.bus_id,driver_version*) for i in 0 1; do echo \"\$i, 00000000:1\$i:00.0, $v\"; done;;
  *--query-gpu=index,pci.bus_id,vbios_version*) for i in 0 1; do echo \"\$i, 00000000:1\$i:00.0, \$vbios\"; done;;
  *--query-gpu*) for i in 0 1; do echo \"$v, \$vbios\"; done;;
  *) echo \"NVIDIA-SMI $v   Driver Version: $v\";; esac"
  pkg nvidia-open "$v-1" "nvidia-driver-open (= $v-1), libnvidia-compute (= $v-1)"
  # NVSwitch stack (packages.yaml nvswitch_stack): same version as the driver, no dependency on it
  pkg nvidia-fabricmanager "$v-1" "" /usr/bin/nv-fabricmanager "#!/bin/sh
echo 'Fabric Manager version is : $v'"
  pkg libnvidia-nscq "$v-1" ""
done
for v in 13.0.1 13.0.2; do pkg cuda-libraries-13-0 "$v-1" ""; done
for v in 2.28.7 2.30.4; do pkg libnccl2 "$v-1+cuda13.0" ""; done
# cuda_userspace extras: the toolkit meta, NCCL headers, and cuda-compat (versioned by the driver it carries).
for v in 13.0.1 13.0.2; do pkg cuda-toolkit-13-0 "$v-1" "cuda-libraries-13-0 (= $v-1)"; done
for v in 2.28.7 2.30.4; do pkg libnccl-dev "$v-1+cuda13.0" "libnccl2 (= $v-1+cuda13.0)"; done
for v in 580.95.05 580.126.20; do pkg cuda-compat-13-0 "$v-1" ""; done
# Candidate set 2026.11-r595 (CUDA 13.2: other package names), for the user-space upgrade and rollback.
pkg cuda-libraries-13-2 13.2.2-1 ""
pkg cuda-toolkit-13-2 13.2.2-1 "cuda-libraries-13-2 (= 13.2.2-1)"
pkg cuda-compat-13-2 595.91.07-1 ""
pkg libnccl2 2.32.3-1+cuda13.2 ""
pkg libnccl-dev 2.32.3-1+cuda13.2 "libnccl2 (= 2.32.3-1+cuda13.2)"
for v in 1.18.0 1.19.1 1.20.0; do
  pkg libnvidia-container1 "$v-1" ""
  pkg libnvidia-container-tools "$v-1" "libnvidia-container1 (= $v-1)"
  pkg nvidia-container-toolkit-base "$v-1" "" /usr/bin/nvidia-ctk "#!/bin/sh
echo 'NVIDIA Container Toolkit CLI version $v'"
  pkg nvidia-container-toolkit "$v-1" "nvidia-container-toolkit-base (= $v-1), libnvidia-container-tools (= $v-1)"
done

# Slurm control plane (Debian names): slurmdbd, slurmctld and slurm-client at sets 2025.10-r580 (25.05.0)
# and 2026.07-r580 (25.11.7); each daemon answers -V like the real one.
for v in 25.05.0 25.11.7; do
  pkg slurm-client "$v-1" "" /usr/bin/sinfo "#!/bin/sh
echo 'slurm $v'"
  pkg slurmdbd "$v-1" "" /usr/sbin/slurmdbd "#!/bin/sh
echo 'slurm $v'"
  pkg slurmctld "$v-1" "slurm-client (= $v-1)" /usr/sbin/slurmctld "#!/bin/sh
echo 'slurm $v'"
done

cd "$REPO" && apt-ftparchive packages . >Packages && apt-ftparchive release . >Release
echo "deb [trusted=yes] file:$REPO ./" >/etc/apt/sources.list.d/standin.list
# debootstrap (Debian 12 and Ubuntu 22.04) writes sources.list; Debian 12 and Ubuntu 24.04 images may use deb822 .sources.
rm -f /etc/apt/sources.list /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list.d/ubuntu.sources
apt-get update -qq -o Acquire::Languages=none
