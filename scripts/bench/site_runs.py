#!/usr/bin/env python3
"""site.yml on a fresh simulated cluster, twice: the first run (bare nodes to the end)
and the second (a converged cluster: it must change nothing and finish fast).

    scripts/bench/site_runs.py [--cluster pair] [--nodes 2] [--playbook site.yml] [-- ANSIBLE-PLAYBOOK ARGS]
    scripts/bench/site_runs.py --baseline REV [--repeat 3] [-- ANSIBLE-PLAYBOOK ARGS]

Prints one table: wall time, tasks run (ok + changed, summed over the nodes) and
changed count per run, and the second/first time ratio.

With --baseline, the same is done side by side for the collection at git revision REV
(its own playbooks and sim inventory, on a second cluster, `bench`), and the converged
runs of the two alternate --repeat times, so load on the machine falls on both alike;
it prints the medians and the ratio of this tree's converged run to the baseline's.
An older revision may need adapting to today's sim nodes: what it needs is kept in
scripts/bench/baselines/REV/ (compat.patch, applied to its worktree; vars.yml, given
to its runs as extra vars), and printed with the results.

The clusters are removed at the end unless --keep. Traffic stays on the sim's own networks.
"""
import argparse
import os
import pathlib
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
SIM = [sys.executable, str(ROOT / "sim" / "simctl.py")]
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)",
                   re.M)


def measure(tree, inventory, args):
    """One ansible-playbook run of the collection in `tree`: (wall s, controller CPU s, recap rows
    (host, ok, changed, unreachable, failed, skipped)). Exits naming the run when it fails."""
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_COLLECTIONS_PATH=str(tree / ".collections"), PATH=f"{ROOT}/.venv/bin:{os.environ['PATH']}")
    cmd = ["ansible-playbook", "-i", inventory, *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    res = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    hosts = RECAP.findall(res.stdout)
    if res.returncode != 0 or not hosts:
        sys.stdout.write(res.stdout[-6000:] + res.stderr[-2000:])
        raise SystemExit(f"{' '.join(cmd)} in {tree} failed (rc {res.returncode})")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, [(h[0], *map(int, h[1:])) for h in hosts]


def playbook(tree, inventory, book, extra):
    """One ansible-playbook run of the collection in `tree`: (wall s, tasks run, changed)."""
    wall, _cpu, hosts = measure(tree, inventory, [book, *extra])
    return wall, sum(h[1] for h in hosts), sum(h[2] for h in hosts)


def inventory_for(tree, cluster, nodes):
    """The sim inventory of `tree` (its group_vars) with the hosts of this cluster's addresses."""
    sys.path.insert(0, str(ROOT / "sim"))
    import simctl  # pylint: disable=import-outside-toplevel
    _, layout = simctl.layout(cluster, nodes)
    host = lambda n: {n["name"]: {"ansible_host": n["mgmt_ip"], "spark_fabric_ip": n["fabric_ip"]}}
    workers = {}
    for n in layout[1:]:
        workers.update(host(n))
    data = {"all": {"children": {"spark": {"children": {
        "spark_head": {"hosts": host(layout[0])}, "spark_workers": {"hosts": workers}}},
        # The sim's overlay over the shipped group_vars (inventories/sim/hosts.yml).
        "sim": {"vars": {"ansible_group_priority": 10}, "children": {"spark_head": {}, "spark_workers": {}}}}}}
    folder = pathlib.Path(tempfile.mkdtemp(prefix=f"site-runs-{cluster}-"))
    (folder / "hosts.yml").write_text(yaml.safe_dump(data))
    (folder / "group_vars").symlink_to(tree / "inventories" / "sim" / "group_vars")
    return str(folder)


BASELINES = ROOT / "scripts" / "bench" / "baselines"


def baseline_tree(rev):
    """A detached worktree of the collection at `rev`, visible to Ansible as dgxspark.vllm, with the
    adaptation to today's sim nodes that revision needs (scripts/bench/baselines/REV/compat.patch)."""
    tree = pathlib.Path(tempfile.mkdtemp(prefix="site-runs-baseline-")) / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev],
                   check=True, capture_output=True)
    patch = BASELINES / rev / "compat.patch"
    if patch.is_file():
        subprocess.run(["git", "-C", str(tree), "apply", str(patch)], check=True)
    link = tree / ".collections" / "ansible_collections" / "dgxspark" / "vllm"
    if not link.is_symlink():  # revisions that track the link have it already
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to("../../..")
    return tree


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster", default="pair")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--playbook", default="site.yml")
    p.add_argument("--baseline", metavar="REV", help="also run the collection at this git revision, side by side")
    p.add_argument("--repeat", type=int, default=3, help="converged runs of each, alternating (with --baseline)")
    p.add_argument("--keep", action="store_true")
    p.add_argument("extra", nargs="*")
    args = p.parse_args()
    runs = [("this tree", ROOT, args.cluster, args.extra)]
    if args.baseline:
        compat = BASELINES / args.baseline / "vars.yml"
        extra = [*args.extra, "-e", f"@{compat}"] if compat.is_file() else args.extra
        runs.append((f"baseline {args.baseline}", baseline_tree(args.baseline), "bench", extra))
        for f in sorted((BASELINES / args.baseline).glob("*")):
            print(f"baseline {args.baseline} adapted to today's sim nodes with {f.relative_to(ROOT)}")
    for _, _, cluster, _ in runs:
        subprocess.run(SIM + ["down", "--cluster", cluster], check=True, capture_output=True)
        subprocess.run(SIM + ["up", "--cluster", cluster, "--nodes", str(args.nodes)], check=True, capture_output=True)
    results = {}
    try:
        invs = {name: inventory_for(tree, cluster, args.nodes) for name, tree, cluster, _ in runs}
        for name, tree, _, extra in runs:
            results[name] = {"first": playbook(tree, invs[name], args.playbook, extra), "second": []}
        for _ in range(args.repeat if args.baseline else 1):
            for name, tree, _, extra in runs:
                results[name]["second"].append(playbook(tree, invs[name], args.playbook, extra))
    finally:
        if not args.keep:
            for _, tree, cluster, _ in runs:
                subprocess.run(SIM + ["down", "--cluster", cluster], check=False, capture_output=True)
                if tree != ROOT:
                    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
                    shutil.rmtree(tree.parent, ignore_errors=True)
    print("| collection | run | wall s | tasks run (ok, all nodes) | changed |")
    print("|---|---|---|---|---|")
    changed = 0
    for name, r in results.items():
        wall, ok, ch = r["first"]
        print(f"| {name} | first (bare nodes) | {wall:.1f} | {ok} | {ch} |")
        walls = [w for w, _, _ in r["second"]]
        changed += sum(c for _, _, c in r["second"])
        print(f"| {name} | converged, median of {len(walls)} ({', '.join(f'{w:.1f}' for w in walls)}) | "
              f"{statistics.median(walls):.1f} | {r['second'][-1][1]} | {sum(c for _, _, c in r['second'])} |")
    mine = results["this tree"]
    print(f"this tree: converged/first time ratio {statistics.median(w for w, _, _ in mine['second']) / mine['first'][0]:.2f}")
    if args.baseline:
        base = results[f"baseline {args.baseline}"]
        ratio = statistics.median(w for w, _, _ in mine["second"]) / statistics.median(w for w, _, _ in base["second"])
        print(f"converged run, this tree / baseline {args.baseline}: {ratio:.2f}x (medians)")
    print(f"converged runs changed {changed} (must be 0)")
    return 0 if changed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
