#!/usr/bin/env bash
# Every test of the collection: lint, unit tests, ansible-test sanity, and the
# molecule scenarios on simulated clusters. Installs what it needs (as root).
#   scripts/test.sh              everything
#   scripts/test.sh unit lint    only these stages (lint, unit, sanity, molecule)
#   MOLECULE_SCENARIOS="default triton" scripts/test.sh molecule
#   MOLECULE_JOBS=3 (default) scenarios run side by side, each on its own sim cluster
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh || exit 1
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_COLLECTIONS_PATH="$PWD/.collections"
export PY_COLORS=0 ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1 NO_COLOR=1

stages=("$@")
((${#stages[@]})) || stages=(lint unit sanity molecule)
passed=0 failed=0 failures=()

stage() {  # stage NAME COMMAND...
  local name=$1; shift
  echo "=== $name: $*"
  local t0=$SECONDS
  if "$@"; then passed=$((passed + 1)); echo "=== $name: ok ($((SECONDS - t0))s)"
  else failed=$((failed + 1)); failures+=("$name"); echo "=== $name: FAILED ($((SECONDS - t0))s)"; fi
}

scenarios() {
  # Every scenario unless MOLECULE_SCENARIOS names some; the longest start first
  # (the real engine's three, then serve, upgrade, readiness, quad) so parallel runs finish together.
  if [ -n "${MOLECULE_SCENARIOS:-}" ]; then echo "$MOLECULE_SCENARIOS"; return; fi
  local s first=(default fidelity field_report serve upgrade readiness quad) rest=()
  for s in molecule/*/molecule.yml; do
    s=${s#molecule/}; s=${s%/molecule.yml}
    [[ " ${first[*]} " == *" $s "* ]] || rest+=("$s")
  done
  echo "${first[*]} ${rest[*]}"
}

molecule_all() {
  # Each scenario has its own sim cluster, so MOLECULE_JOBS of them run side by
  # side; each one's output goes to a log that is printed when it is done.
  local logs=.cache/molecule-logs sc rc
  rm -rf "$logs" && mkdir -p "$logs"
  python3 sim/simctl.py build >/dev/null || { failed=$((failed + 1)); failures+=(sim-build); return; }
  # shellcheck disable=SC2016
  scenarios | tr ' ' '\n' | grep . | xargs -P "${MOLECULE_JOBS:-3}" -I{} bash -c \
    't0=$SECONDS; molecule test -s "$1" >"$2/$1.log" 2>&1; echo "$? $((SECONDS - t0))" >"$2/$1.rc"; echo "=== molecule:$1 finished"' _ {} "$logs"
  for sc in $(scenarios); do
    read -r rc secs <"$logs/$sc.rc" || rc=1
    if [ "$rc" = 0 ]; then
      passed=$((passed + 1)); echo "=== molecule:$sc: ok (${secs}s)"
    else
      failed=$((failed + 1)); failures+=("molecule:$sc")
      echo "=== molecule:$sc: FAILED (${secs:-?}s), last lines of $logs/$sc.log:"; tail -n 200 "$logs/$sc.log"
    fi
  done
}

sanity() {
  # ansible-test wants the tree at ansible_collections/<ns>/<name>; copy the tracked files there.
  local dest=.cache/sanity/ansible_collections/dgxspark/vllm
  rm -rf .cache/sanity && mkdir -p "$dest"
  git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$dest" 2>/dev/null
  # ansible-test downloads a pip bootstrap script from a host we cannot reach.
  local pipver
  pipver=$(python - <<'PY'
import ansible_test._internal.python_requirements as m, inspect, re
print(re.search(r"pip='([0-9.]+)'", inspect.getsource(m)).group(1))
PY
)
  mkdir -p ~/.ansible/test/cache
  cp tests/sanity/get_pip_offline.py ~/.ansible/test/cache/"get_pip_${pipver//./_}.py"
  local d excludes=()
  for d in molecule sim tests scripts; do [ -d "$dest/$d" ] && excludes+=(--exclude "$d/"); done
  (cd "$dest" && git init -q && git add -A &&
     ansible-test sanity --python 3.11 --color no "${excludes[@]}")
}

for s in "${stages[@]}"; do
  case $s in
    lint)
      stage yamllint yamllint -s .
      stage ansible-lint ansible-lint --profile production -q ;;
    unit)
      stage unit python -m pytest -q tests/unit ;;
    sanity)
      stage sanity sanity ;;
    molecule)
      molecule_all ;;
    *) echo "unknown stage $s (lint, unit, sanity, molecule)"; exit 2 ;;
  esac
done

echo
((failed)) && echo "failed stages: ${failures[*]}"
echo "$passed passed, $failed failed"
((failed == 0))
