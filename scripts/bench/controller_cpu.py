#!/usr/bin/env python3
"""What a playbook run costs the controller, this tree against a baseline revision, side by side on one converged
sim cluster: wall time, controller CPU (ansible-playbook and its forks) and task executions (ok + skipped, summed
over the nodes), medians of alternating runs, and the ratios.

    scripts/sim-site.sh                                  # a converged sim pair first
    python3 scripts/bench/controller_cpu.py --baseline REV [--repeat 3] [--inventory inventories/sim] \\
        --run "site.yml" --run "site.yml --tags serve" ...

Both trees run the same converged nodes: every run must change nothing (the baseline's runs too), else it stops.
The CPU is measured on this machine; the nodes' own work (modules, the engine) is not in it.
"""
import argparse
import pathlib
import shlex
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from site_runs import ROOT, baseline_tree, measure  # noqa: E402  pylint: disable=wrong-import-position


def run(tree, inventory, args):
    """(wall s, controller CPU s, task executions) of one run in `tree`, which must change nothing."""
    wall, cpu, hosts = measure(tree, inventory, args)
    changed = sum(h[2] for h in hosts)
    if changed:
        raise SystemExit(f"ansible-playbook {' '.join(args)} in {tree} changed {changed} on a converged cluster: "
                         "converge it first")
    return wall, cpu, sum(h[1] + h[5] for h in hosts)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", metavar="REV", required=True)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--inventory", default="inventories/sim")
    p.add_argument("--run", action="append", required=True, help="ansible-playbook arguments, quoted as one")
    args = p.parse_args()
    base = baseline_tree(args.baseline)
    trees = [("baseline " + args.baseline, base), ("this tree", ROOT)]
    results = {}
    try:
        for spec in args.run:
            words = shlex.split(spec)
            for _ in range(args.repeat):
                for name, tree in trees:  # alternating: the machine's load falls on both alike
                    results.setdefault((spec, name), []).append(run(tree, str(tree / args.inventory), words))
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
        shutil.rmtree(base.parent, ignore_errors=True)
    print(f"medians of {args.repeat} alternating runs on the converged cluster (controller CPU measured on this machine)")
    print("| run | collection | wall s | controller CPU s | task executions |")
    print("|---|---|---:|---:|---:|")
    for spec in args.run:
        med = {}
        for name, _ in trees:
            r = results[(spec, name)]
            med[name] = [statistics.median(x[i] for x in r) for i in range(3)]
            print(f"| `{spec}` | {name} | {med[name][0]:.1f} | {med[name][1]:.1f} "
                  f"({', '.join(f'{x[1]:.1f}' for x in r)}) | {med[name][2]:.0f} |")
        b, t = med[trees[0][0]], med["this tree"]
        print(f"| `{spec}` | ratio | {t[0] / b[0]:.2f}x | {t[1] / b[1]:.2f}x | {t[2] / b[2]:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
