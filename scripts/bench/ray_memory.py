#!/usr/bin/env python3
"""Ray's share of a node's memory: the same engine served on Ray and with the mp backend, side by side.

On the sim pair served by the real engine (vLLM's CPU build, real Ray 2.60, TP 2 across the nodes), the
proportional set size (PSS, /proc/PID/smaps_rollup: shared pages split between the processes that map them)
of every process on each node, by kind: Ray's own (GCS, raylet, agents, idle workers), the engine's (the API
server, the engine core, the ranks: under Ray each rank is a Ray worker and carries Ray's core worker), and
Ray's object store in use (its /dev/shm files). First with the collection's default (Ray), then after
`site.yml --tags ray_cluster,serve -e serve_executor_backend=mp` (Ray stopped), then back to Ray.

    scripts/bench/ray_memory.py [--reuse] [--keep] [--samples 3]

--reuse measures a pair that already serves (inventories/sim, cluster `pair`) instead of starting one with
scripts/sim-site.sh's steps. Figures are measured on the sim (a tiny model on a 2-core machine): what Ray
adds, not what a GB10 holds. Its figures of 2026-12-06 are in docs/benchmarks.md (Ray's share of a node's memory). Traffic stays on the sim's own
networks.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SIM = [sys.executable, str(ROOT / "sim" / "simctl.py")]
INVENTORY = str(ROOT / "inventories" / "sim")
ENV = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"), ANSIBLE_NOCOLOR="1",
           PATH=f"{ROOT}/.venv/bin:{os.environ['PATH']}")

sys.path.insert(0, str(ROOT / "sim" / "engine" / "plugin"))
from dgxspark_sim_vllm.faults import ENGINE_RANK, RAY_OWN  # noqa: E402  pylint: disable=wrong-import-position

# Runs on each node as root: PSS (KiB) per process kind, and the object store's files. Ray's own processes are
# told apart as the sim's modelled GB10 tells them (faults.is_ray_own); the engine's ranks are Ray actors.
COLLECT = r"""
import glob, json, os
RAY, RANK = %r, %r
kinds = {"ray": 0, "engine": 0}
procs = {"ray": [], "engine": []}
for d in glob.glob("/proc/[0-9]*"):
    try:
        cmd = open(d + "/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace").strip()
        comm = open(d + "/comm").read().strip()
        pss = next(int(l.split()[1]) for l in open(d + "/smaps_rollup") if l.startswith("Pss:"))
    except (OSError, StopIteration, ValueError):
        continue
    if cmd.startswith(RANK) or comm.startswith("VLLM"):
        kind = "engine"
    elif any(mark in cmd for mark in RAY):
        kind = "ray"
    elif "vllm" in cmd.lower():
        kind = "engine"
    else:
        continue
    kinds[kind] += pss
    procs[kind].append([comm[:24], pss])
store = sum(os.path.getsize(f) for f in glob.glob("/dev/shm/plasma*") + glob.glob("/dev/shm/ray*") if os.path.isfile(f))
print(json.dumps({"kib": kinds, "store_kib": store // 1024,
                  "top": {k: sorted(v, key=lambda p: -p[1])[:8] for k, v in procs.items()}}))
""" % (RAY_OWN, ENGINE_RANK)


def run(cmd, **kw):
    res = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, check=False, **kw)
    if res.returncode != 0:
        sys.stdout.write(res.stdout[-4000:] + res.stderr[-2000:])
        raise SystemExit(f"{' '.join(cmd[:6])} ... failed (rc {res.returncode})")
    return res.stdout


def measure():
    """{node: {'ray': MiB, 'engine': MiB, 'store': MiB, 'top': ...}} on every node of the pair."""
    out = run(["ansible", "-i", INVENTORY, "spark", "-b", "-o", "-m", "ansible.builtin.shell",
               "-a", "python3 - <<'EOF'\n" + COLLECT + "\nEOF"])
    nodes = {}
    for line in out.splitlines():
        if " | CHANGED | rc=0 | (stdout) " in line:
            host, data = line.split(" | CHANGED | rc=0 | (stdout) ", 1)
            parsed = json.loads(data)
            nodes[host] = {"ray": parsed["kib"]["ray"] / 1024, "engine": parsed["kib"]["engine"] / 1024,
                           "store": parsed["store_kib"] / 1024, "top": parsed["top"]}
    return nodes


def sampled(samples):
    """The median of a few samples per node and kind (the engine's memory moves while it idles)."""
    runs = [measure() for _ in range(samples)]
    return {node: {kind: statistics.median(r[node][kind] for r in runs) for kind in ("ray", "engine", "store")}
            | {"top": runs[-1][node]["top"]} for node in runs[0]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reuse", action="store_true", help="measure the pair that already serves")
    p.add_argument("--keep", action="store_true", help="leave the pair up")
    p.add_argument("--samples", type=int, default=3)
    args = p.parse_args()
    if not args.reuse:
        run(SIM + ["up", "--cluster", "pair"])
        run(["ansible-playbook", "-i", INVENTORY, "site.yml"])
    try:
        on_ray = sampled(args.samples)
        run(["ansible-playbook", "-i", INVENTORY, "site.yml", "--tags", "ray_cluster,serve",
             "-e", "serve_executor_backend=mp"])
        on_mp = sampled(args.samples)
        run(["ansible-playbook", "-i", INVENTORY, "site.yml", "--tags", "ray_cluster,serve"])
    finally:
        if not args.keep and not args.reuse:
            subprocess.run(SIM + ["down", "--cluster", "pair"], cwd=ROOT, check=False, capture_output=True)
    print("Measured on the sim pair (vLLM CPU build, tiny model, Ray 2.60): PSS in MiB, median of %d samples"
          % args.samples)
    print("| node | backend | Ray's processes | engine processes | object store in use | all |")
    print("|---|---|---|---|---|---|")
    for node in sorted(on_ray):
        for name, data in (("ray", on_ray[node]), ("mp", on_mp[node])):
            total = data["ray"] + data["engine"] + data["store"]
            print(f"| {node} | {name} | {data['ray']:.0f} | {data['engine']:.0f} | {data['store']:.0f} | {total:.0f} |")
        ray_total = sum(on_ray[node][k] for k in ("ray", "engine", "store"))
        mp_total = sum(on_mp[node][k] for k in ("ray", "engine", "store"))
        print(f"| {node} | Ray − mp | | {on_ray[node]['engine'] - on_mp[node]['engine']:+.0f} | | "
              f"{ray_total - mp_total:+.0f} ({ray_total / mp_total:.2f}×) |")
    for node in sorted(on_ray):
        print(f"{node} largest under Ray: {on_ray[node]['top']}")
        print(f"{node} largest under mp: {on_mp[node]['top']}")


if __name__ == "__main__":
    main()
