#!/usr/bin/env bash
# The main job on this machine: install what is missing, build and start the
# simulated Spark pair, and run site.yml on it through to a healthy endpoint.
#   scripts/sim-site.sh [extra ansible-playbook args]
#   python3 sim/simctl.py down --cluster pair      # remove the pair afterwards
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
python3 sim/simctl.py up --cluster pair
ansible-playbook -i inventories/sim site.yml "$@"
