#!/usr/bin/env bash
# Every test of the collection: lint, unit tests, ansible-test sanity, and the
# molecule scenarios on simulated clusters. Installs what it needs (as root).
#   scripts/test.sh              everything (about an hour on 2 quiet cores and 24 GB; docs/benchmarks.md)
#   scripts/test.sh quick        lint, unit and sanity only: the minutes-long inner loop
#   scripts/test.sh unit lint    only these stages (lint, unit, sanity, molecule)
#   MOLECULE_SCENARIOS="default triton" scripts/test.sh molecule
# Scenarios run side by side, each on its own sim cluster: MOLECULE_JOBS of them (from the
# machine's cores and memory unless set); one that runs past MOLECULE_TIMEOUT seconds is ended.
# Results: a summary table at the end, JUnit XML in .cache/junit/, each scenario's log in
# .cache/molecule-logs/, its nodes' journals (saved before the nodes go) in .cache/node-logs/ and every
# playbook run its tests made, whole, in .cache/playbook-runs/.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh || exit 1
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_COLLECTIONS_PATH="$PWD/.collections"
export PY_COLORS=0 ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1 NO_COLOR=1
JUNIT=$PWD/.cache/junit
SUMMARY=$PWD/.cache/summary.tsv
# What the molecule stage needs free (docs/benchmarks.md has the measured peaks: 27.4 GB of disk for a
# cold run with the images built, 15.4 GB of memory with three real-engine pairs side by side).
NEED_DISK_GB=${NEED_DISK_GB:-30}
NEED_MEM_GB=${NEED_MEM_GB:-16}

stages=("$@")
((${#stages[@]})) || stages=(lint unit sanity molecule)
[ "${stages[*]}" = quick ] && stages=(lint unit sanity)
passed=0 failed=0 failures=()
rm -rf "$JUNIT" && mkdir -p "$JUNIT" && : >"$SUMMARY"

record() {  # record NAME RC SECONDS
  printf '%s\t%s\t%s\n' "$1" "$3" "$([ "$2" = 0 ] && echo ok || echo FAILED)" >>"$SUMMARY"
  if [ "$2" = 0 ]; then passed=$((passed + 1)); echo "=== $1: ok ($3s)"
  else failed=$((failed + 1)); failures+=("$1"); echo "=== $1: FAILED ($3s)"; fi
}

stage() {  # stage NAME COMMAND...
  local name=$1 t0=$SECONDS rc; shift
  echo "=== $name: $*"
  "$@"; rc=$?
  record "$name" "$rc" $((SECONDS - t0))
}

scenarios() {
  # Every scenario unless MOLECULE_SCENARIOS names some; the longest first (by their last measured
  # times, docs/benchmarks.md), so the longest path starts at once and parallel runs end together.
  if [ -n "${MOLECULE_SCENARIOS:-}" ]; then echo "$MOLECULE_SCENARIOS"; return; fi
  local s first=(default fidelity serve upgrade readiness quad) rest=()
  for s in molecule/*/molecule.yml; do
    s=${s#molecule/}; s=${s%/molecule.yml}
    [[ " ${first[*]} " == *" $s "* ]] || rest+=("$s")
  done
  echo "${first[*]} ${rest[*]}"
}

jobs_for_machine() {
  # One scenario more than cores (they wait on SSH and the engine much of the time), and no more
  # than the memory holds at about 7 GB a real-engine pair.
  local cores mem
  cores=$(nproc)
  mem=$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)
  local by_mem=$((mem / 7))
  local n=$((cores + 1 < by_mem ? cores + 1 : by_mem))
  echo $((n < 1 ? 1 : n))
}

clean_start() {
  # Leftovers of earlier runs on this machine go first, then the free disk and memory are checked
  # against what the run needs, naming what to free.
  python3 sim/simctl.py prune || return 1
  local sc
  for sc in $(scenarios); do rm -rf ~/.ansible/tmp/molecule.*."$sc"; done  # molecule's state of earlier runs
  rm -rf .cache/molecule-logs .cache/node-logs .cache/playbook-runs
  local store disk mem
  store=$(podman info --format '{{.Store.GraphRoot}}' 2>/dev/null || echo /var/lib/containers)
  mkdir -p "$store"
  disk=$(df -P -BG "$store" | awk 'NR == 2 {print int($4)}')
  mem=$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)
  echo "=== clean start: $disk GB free on $store (need $NEED_DISK_GB), $mem GB memory available (need $NEED_MEM_GB)"
  if ((disk < NEED_DISK_GB)); then
    echo "Not enough disk for the sim on $store: $disk GB free, $NEED_DISK_GB needed. Free some: podman system prune -a," \
         "old images (podman images), or other files on that file system (du -xsh $store/* /var/tmp/*)."
    return 1
  fi
  if ((mem < NEED_MEM_GB)); then
    echo "Not enough memory for the scenarios: $mem GB available, $NEED_MEM_GB needed. Stop what holds it" \
         "(ps aux --sort=-rss | head), or run fewer scenarios side by side (MOLECULE_JOBS=1)."
    return 1
  fi
}

report_scenario() {  # report_scenario NAME RC SECONDS: its result as soon as it ends, with the cause when it failed
  local sc=$1 rc=$2 secs=$3 log=.cache/molecule-logs/$1.log f
  if [ "$rc" = 0 ]; then echo "=== molecule:$sc: ok (${secs}s)"; return; fi
  {
    echo "=== molecule:$sc: FAILED (${secs}s$([ "$rc" = 124 ] && echo ", ended at the ${MOLECULE_TIMEOUT}s limit"))"
    echo "--- $sc: failed tasks and tests"
    grep -E -A12 '^(fatal|failed): |^FAILED [^-]|^E  +[A-Za-z]|^(ERROR|CRITICAL) ' "$log" | head -n 150
    sed -n '/short test summary info/,$p' "$log" | head -n 40
    for f in .cache/node-logs/"$sc"/*.log; do
      [ -e "$f" ] || continue
      echo "--- $sc: $(basename "$f" .log): failed units, containers, the last lines of the collection's units"
      if (($(wc -l <"$f") <= 120)); then cat "$f"; else head -n 30 "$f"; echo "[...]"; tail -n 90 "$f"; fi
    done
    echo "--- $sc: last lines of $log"
    tail -n 80 "$log"
  } >"$log.report"
  cat "$log.report"  # one block, so scenarios that end together do not interleave line by line
}
export -f report_scenario

molecule_all() {
  local logs=.cache/molecule-logs sc rc secs t0=$SECONDS
  clean_start || { record clean-start 1 $((SECONDS - t0)); return; }
  mkdir -p "$logs" .cache/node-logs
  t0=$SECONDS
  python3 sim/simctl.py build >/dev/null; rc=$?
  record sim-build "$rc" $((SECONDS - t0))
  [ "$rc" = 0 ] || return
  export MOLECULE_TIMEOUT=${MOLECULE_TIMEOUT:-3600} JUNIT
  local jobs=${MOLECULE_JOBS:-$(jobs_for_machine)}
  echo "=== molecule: $(scenarios | wc -w) scenarios, $jobs side by side, each ended at ${MOLECULE_TIMEOUT}s"
  # shellcheck disable=SC2016
  scenarios | tr ' ' '\n' | grep . | xargs -P "$jobs" -I{} bash -c '
    sc=$1 logs=$2 t0=$SECONDS
    PYTEST_ADDOPTS="--junitxml=$JUNIT/molecule-$sc.xml" timeout -k 120 "$MOLECULE_TIMEOUT" \
      molecule test -s "$sc" >"$logs/$sc.log" 2>&1
    rc=$?
    if [ "$rc" != 0 ]; then  # a scenario ended by the limit did not reach its own destroy
      timeout 600 molecule destroy -s "$sc" >>"$logs/$sc.log" 2>&1
    fi
    echo "$rc $((SECONDS - t0))" >"$logs/$sc.rc"
    report_scenario "$sc" "$rc" $((SECONDS - t0))' _ {} "$logs"
  for sc in $(scenarios); do
    rc=1 secs=?
    read -r rc secs <"$logs/$sc.rc"
    printf '%s\t%s\t%s\n' "molecule:$sc" "$secs" "$([ "$rc" = 0 ] && echo ok || echo FAILED)" >>"$SUMMARY"
    if [ "$rc" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("molecule:$sc"); fi
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
     timeout 1200 ansible-test sanity --python 3.11 --color no "${excludes[@]}")
}

for s in "${stages[@]}"; do
  case $s in
    lint)
      stage yamllint timeout 600 yamllint -s .
      stage ansible-lint timeout 900 ansible-lint --profile production -q
      # The Python outside plugins/ (sim, tests, scripts), which sanity does not see: an undefined name
      # there fails only when the sim runs it, minutes into a scenario.
      stage pyflakes timeout 300 python -m pyflakes sim scripts molecule tests plugins roles ;;
    unit)
      stage unit python -m pytest -q --timeout 300 --junitxml "$JUNIT/unit.xml" tests/unit ;;
    sanity)
      stage sanity sanity ;;
    molecule)
      molecule_all ;;
    *) echo "unknown stage $s (quick, lint, unit, sanity, molecule)"; exit 2 ;;
  esac
done

echo
echo "=== summary (stage or scenario, seconds, result); JUnit XML in .cache/junit/"
column -t -s $'\t' "$SUMMARY" 2>/dev/null || cat "$SUMMARY"
((failed)) && echo "failed stages: ${failures[*]}"
echo "$passed passed, $failed failed"
((failed == 0))
