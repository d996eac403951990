#!/usr/bin/env python3
"""What the fabric phase costs: site.yml --tags fabric measuring (fabric_remeasure) side by side with the
converged re-run that reads the recorded result instead, alternating --repeat times on one simulated pair.

    scripts/bench/fabric_phase.py [--cluster pair] [--repeat 3] [--keep]
    scripts/bench/fabric_phase.py --converged [--repeat 3]

--converged runs against the sim pair site.yml has already converged (inventories/sim), where the engine's image is
on both nodes, so the engine's path (the collective) is measured too; it leaves the pair as it found it.

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



def head_file(cluster, path):
    """A file of the head's, over SSH (podman exec into a node whose systemd runs Docker fails with EBUSY)."""
    sys.path.insert(0, str(ROOT / "sim"))
    import simctl  # pylint: disable=import-outside-toplevel
    _, layout = simctl.layout(cluster, 2)
    res = simctl.ssh_node(layout[0]["mgmt_ip"], f"sudo cat {path}")
    return res.stdout if res.returncode == 0 else ""


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster", default="pair")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--converged", action="store_true", help="the running sim pair, converged by site.yml")
    args = p.parse_args()
    if not args.converged:
        subprocess.run(SIM + ["down", "--cluster", args.cluster], check=True, capture_output=True)
        subprocess.run(SIM + ["up", "--cluster", args.cluster], check=True, capture_output=True)
    site = str(ROOT / "playbooks" / "site.yml")
    runs = {"measuring (fabric_remeasure=true)": ["--tags", "fabric", "-e", "fabric_remeasure=true"],
            "converged re-run (reads the record)": ["--tags", "fabric"]}
    results = {name: [] for name in runs}
    try:
        inv = str(ROOT / "inventories" / "sim") if args.converged else inventory_for(ROOT, args.cluster, 2)
        if not args.converged:
            playbook(ROOT, inv, site, ["--tags", "node_trust"])
        for _ in range(args.repeat):
            for name, extra in runs.items():
                results[name].append(playbook(ROOT, inv, site, extra))
        record = json.loads(head_file(args.cluster, "/var/lib/dgxspark-vllm/fabric.json"))
        collective = head_file(args.cluster, "/var/lib/dgxspark-vllm/fabric-collective.json")
    finally:
        if not (args.keep or args.converged):
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
    if collective:
        data = json.loads(collective)
        print(f"the engine's path (measured, over {data['backend']}; NCCL {data['nccl']['version']}):")
        for r in data["results"]:
            print(f"  {r['op']:10} {r['bytes']:>10} bytes: {r['busbw_gbytes']} GB/s of bus bandwidth")
    return 0


if __name__ == "__main__":
    sys.exit(main())
