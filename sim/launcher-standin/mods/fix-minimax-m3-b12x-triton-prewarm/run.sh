#!/bin/bash
# Sim stand-in of the launcher mod fix-minimax-m3-b12x-triton-prewarm (sim/launcher-standin/README.md).
set -euo pipefail
exec "${PYTHON:-python3}" -m dgxspark_sim_vllm.mods fix-minimax-m3-b12x-triton-prewarm
