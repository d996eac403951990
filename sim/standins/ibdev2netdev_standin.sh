#!/bin/sh
# Stand-in for Mellanox ibdev2netdev in the sim: maps the simulated RoCE device
# to the fabric interface and reports its link state, in the real output format.
# A scenario's "rdma_twin" [device, netdev] adds the port's second RoCE device, as a
# Spark's QSFP port shows two (one per PCIe x4 link), in the same state as the first.
conf=/etc/dgxspark-sim/scenario.json
dev=$(python3 -c "import json;print(json.load(open('$conf'))['rdma_device'])")
ifc=$(python3 -c "import json;print(json.load(open('$conf'))['fabric_iface'])")
twin=$(python3 -c "import json;print(' '.join(json.load(open('$conf')).get('rdma_twin') or []))")
state=Down
if [ "$(cat /sys/class/net/$ifc/operstate 2>/dev/null)" = up ]; then state=Up; fi
echo "$dev port 1 ==> $ifc ($state)"
if [ -n "$twin" ]; then set -- $twin; echo "$1 port 1 ==> $2 ($state)"; fi
