#!/bin/sh
# Rendered by clusterdef for the RoCE ports of cluster gb200.
# install as /usr/lib/clusterdef/roce/qos.sh
set -eu
mkdir -p /run/clusterdef
/usr/bin/mlnx_qos -i bf3s --trust dscp --pfc 0,0,0,1,0,0,0,0
echo 1 > /sys/class/net/bf3s/ecn/roce_np/enable/3
echo 1 > /sys/class/net/bf3s/ecn/roce_rp/enable/3
