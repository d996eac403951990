#!/bin/bash
# Sim stand-in of the launcher mod fix-eagle3-draft-embed-quant (sim/launcher-standin/README.md).
set -euo pipefail
exec "${PYTHON:-python3}" -m dgxspark_sim_vllm.mods fix-eagle3-draft-embed-quant
