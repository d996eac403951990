#!/usr/bin/env python3
"""What the fabric phase costs: site.yml --tags fabric measuring (fabric_remeasure) side by side with the
converged re-run that reads the recorded result instead, alternating --repeat times on one simulated pair.

    scripts/bench/fabric_phase.py [--cluster pair] [--repeat 3] [--keep]

Brings the pair up (sim/simctl.py), runs node_trust (the fabric phase logs in with its key), then the two runs
alternately, so load on the machine falls on both alike. Prints the wall-time medians, their ratio, what each
changed, and the figures the phase recorded on the head. The sim's rail figures are modelled by its ib_write_bw
stand-in (scenario file); its TCP figure is measured, between two containers of this machine. Traffic stays on
the sim's own fabric network.
"""
import argparse
import json
import statistics
import subprocess
import sys

from site_runs import ROOT, SIM, inventory_for, playbook

PODMAN = ["podman", "--runtime", "runc"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster", default="pair")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    subprocess.run(SIM + ["down", "--cluster", args.cluster], check=True, capture_output=True)
    subprocess.run(SIM + ["up", "--cluster", args.cluster], check=True, capture_output=True)
    site = str(ROOT / "playbooks" / "site.yml")
    runs = {"measuring (fabric_remeasure=true)": ["--tags", "fabric", "-e", "fabric_remeasure=true"],
            "converged re-run (reads the record)": ["--tags", "fabric"]}
    results = {name: [] for name in runs}
    try:
        inv = inventory_for(ROOT, args.cluster, 2)
        playbook(ROOT, inv, site, ["--tags", "node_trust"])
        for _ in range(args.repeat):
            for name, extra in runs.items():
                results[name].append(playbook(ROOT, inv, site, extra))
        record = json.loads(subprocess.run(PODMAN + ["exec", f"{args.cluster}-spark-head", "cat",
                                                     "/var/lib/dgxspark-vllm/fabric.json"],
                                           check=True, capture_output=True, text=True).stdout)
    finally:
        if not args.keep:
            subprocess.run(SIM + ["down", "--cluster", args.cluster], check=False, capture_output=True)
    print("| run | wall s, median (each) | tasks run (ok, all nodes) | changed (each) |")
    print("|---|---|---|---|")
    for name, rows in results.items():
        print(f"| {name} | {statistics.median(w for w, _, _ in rows):.1f} ({', '.join(f'{w:.1f}' for w, _, _ in rows)}) | "
              f"{rows[-1][1]} | {', '.join(str(c) for _, _, c in rows)} |")
    measuring, reread = (statistics.median(w for w, _, _ in rows) for rows in results.values())
    print(f"converged re-run / measuring: {reread / measuring:.2f} (medians)")
    print(f"recorded on the head (figures {record['figures']}; TCP is measured between containers of this machine):")
    for r in record["results"]:
        print(f"  {r['kind']:4} {r['pair']}, {r['device']}: {r['gbps']} Gb/s (threshold {r['minimum']}), ok={r['ok']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
