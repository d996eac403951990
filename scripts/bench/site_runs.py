#!/usr/bin/env python3
"""site.yml on a fresh simulated cluster, twice: the first run (bare nodes to the end)
and the second (a converged cluster: it must change nothing and finish fast).

    scripts/bench/site_runs.py [--cluster pair] [--nodes 2] [--playbook site.yml] [-- ANSIBLE-PLAYBOOK ARGS]

Prints one table: wall time, tasks run (ok + changed, summed over the nodes) and
changed count per run, and the second/first time ratio. The cluster is removed
at the end unless --keep. Traffic stays on the sim's own networks.
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def playbook(args, extra):
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"), PATH=f"{ROOT}/.venv/bin:{os.environ['PATH']}")
    cmd = ["ansible-playbook", "-i", args.inventory, args.playbook, *extra]
    t0 = time.monotonic()
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    hosts = RECAP.findall(res.stdout)
    if res.returncode != 0 or not hosts:
        sys.stdout.write(res.stdout[-6000:] + res.stderr[-2000:])
        raise SystemExit(f"{' '.join(cmd)} failed (rc {res.returncode})")
    ok = sum(int(h[1]) for h in hosts)
    changed = sum(int(h[2]) for h in hosts)
    return wall, ok, changed


def inventory_for(cluster, nodes, folder):
    """The sim inventory (its group_vars) with the hosts of this cluster's addresses."""
    sys.path.insert(0, str(ROOT / "sim"))
    import simctl  # pylint: disable=import-outside-toplevel
    _, layout = simctl.layout(cluster, nodes)
    host = lambda n: {n["name"]: {"ansible_host": n["mgmt_ip"], "spark_fabric_ip": n["fabric_ip"]}}
    workers = {}
    for n in layout[1:]:
        workers.update(host(n))
    data = {"all": {"children": {"spark": {"children": {
        "spark_head": {"hosts": host(layout[0])}, "spark_workers": {"hosts": workers}}}}}}
    (folder / "hosts.yml").write_text(yaml.safe_dump(data))
    (folder / "group_vars").symlink_to(ROOT / "inventories" / "sim" / "group_vars")
    return str(folder)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster", default="pair")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--playbook", default="site.yml")
    p.add_argument("--keep", action="store_true")
    p.add_argument("extra", nargs="*")
    args = p.parse_args()
    args.inventory = inventory_for(args.cluster, args.nodes, pathlib.Path(tempfile.mkdtemp(prefix="site-runs-")))
    sim = [sys.executable, str(ROOT / "sim" / "simctl.py")]
    subprocess.run(sim + ["down", "--cluster", args.cluster], check=True, capture_output=True)
    subprocess.run(sim + ["up", "--cluster", args.cluster, "--nodes", str(args.nodes)], check=True, capture_output=True)
    try:
        first = playbook(args, args.extra)
        second = playbook(args, args.extra)
    finally:
        if not args.keep:
            subprocess.run(sim + ["down", "--cluster", args.cluster], check=False, capture_output=True)
    print("| run | wall s | tasks run (ok, all nodes) | changed |")
    print("|---|---|---|---|")
    for name, (wall, ok, changed) in (("first (bare nodes)", first), ("second (converged)", second)):
        print(f"| {name} | {wall:.1f} | {ok} | {changed} |")
    print(f"second/first time ratio: {second[0] / first[0]:.2f}; second run changed {second[2]} (must be 0)")
    return 0 if second[2] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
