#!/bin/sh
# Stand-in for a GPU compute burn on a simulated node (sim only; installed as
# gpu-burn-standin): "loads" the stand-in GPU for N seconds (default 10). While it
# runs, the nvidia-smi stand-in reports loaded values for the node's gpu_state.
secs=${1:-10}
marker=/tmp/dgxspark-sim-gpu-load.$$
: > "$marker"
trap 'rm -f "$marker"' EXIT
trap 'exit 143' TERM INT
i=0
while [ "$i" -lt "$secs" ]; do sleep 1; i=$((i + 1)); done
