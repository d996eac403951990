#!/bin/sh
# Stand-in for Mellanox ibdev2netdev in the sim: maps the simulated RoCE device
# to the fabric interface and reports its link state, in the real output format.
conf=/etc/dgxspark-sim/scenario.json
dev=$(python3 -c "import json;print(json.load(open('$conf'))['rdma_device'])")
ifc=$(python3 -c "import json;print(json.load(open('$conf'))['fabric_iface'])")
state=Down
if [ "$(cat /sys/class/net/$ifc/operstate 2>/dev/null)" = up ]; then state=Up; fi
echo "$dev port 1 ==> $ifc ($state)"
