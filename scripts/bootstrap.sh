#!/usr/bin/env bash
# Prepare this machine for the sim and the tests: system packages (as root,
# only those missing), a virtualenv with the pinned tools, and the collection
# visible to Ansible from the working tree. Safe to run again; fast when done.
set -euo pipefail
cd "$(dirname "$0")/.."

# gcc builds the sim's stand-in CUDA driver library (sim/standins/libcuda_standin.c).
pkgs=(podman runc crun debootstrap rsync openssh-client zstd uidmap fuse-overlayfs gcc libc6-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[bootstrap] installing ${missing[*]}"
  [ "$(id -u)" = 0 ] || { echo "[bootstrap] need root to install ${missing[*]}" >&2; exit 1; }
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

stamp=.venv/.requirements.sha256
want=$(sha256sum requirements-dev.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[bootstrap] creating .venv from requirements-dev.txt"
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt 2>&1 | { grep -v "^WARNING: Location" || true; }
  echo "$want" > "$stamp"
fi

# Ansible finds the collection here (ansible.cfg: collections_path = .collections); the link is tracked, this
# only puts it back where a checkout lost it.
mkdir -p .collections/ansible_collections/dgxspark
[ -L .collections/ansible_collections/dgxspark/vllm ] || ln -sfn ../../.. .collections/ansible_collections/dgxspark/vllm
