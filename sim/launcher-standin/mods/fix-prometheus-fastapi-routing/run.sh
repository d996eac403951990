#!/bin/bash
# Sim stand-in of the launcher mod fix-prometheus-fastapi-routing (sim/launcher-standin/README.md).
set -euo pipefail
exec "${PYTHON:-python3}" -m dgxspark_sim_vllm.mods fix-prometheus-fastapi-routing
