#!/usr/bin/env python3
"""Where a test run's CPU goes: this machine's CPU time split between the sim's node containers (by scenario and
head or worker) and everything else (the Ansible controllers, pytest, molecule, ssh clients, podman).

    python3 scripts/suite_cpu.py --seconds 1800 [--every 20]     # sample while a run goes on, then print

Reads the cgroup CPU accounting podman keeps per container (cgroup v1 cpuacct or v2 cpu.stat), so it costs
nothing the run would notice. The split is measured; what it means for a GB10 pair is not (the sim's nodes
share this machine's cores).
"""
import argparse
import collections
import os
import signal
import subprocess
import time

V1 = "/sys/fs/cgroup/cpuacct"


def total_ns():
    if os.path.exists(V1 + "/cpuacct.usage"):
        return int(open(V1 + "/cpuacct.usage").read())
    fields = open("/proc/stat").readline().split()[1:9]
    return sum(int(f) for f in fields[:3] + fields[5:8]) * 10 ** 9 // os.sysconf("SC_CLK_TCK")


def containers_ns():
    """Container ID -> CPU nanoseconds so far, for every running podman container."""
    out = {}
    if os.path.isdir(V1 + "/libpod_parent"):
        for d in os.listdir(V1 + "/libpod_parent"):
            if d.startswith("libpod-"):
                try:
                    out[d[7:]] = int(open(f"{V1}/libpod_parent/{d}/cpuacct.usage").read())
                except OSError:
                    pass
        return out
    for root, dirs, _files in os.walk("/sys/fs/cgroup"):
        for d in dirs:
            if d.startswith("libpod-") and d.endswith(".scope"):
                try:
                    stat = dict(line.split() for line in open(os.path.join(root, d, "cpu.stat")))
                    out[d[7:-6]] = int(stat["usage_usec"]) * 1000
                except (OSError, KeyError, ValueError):
                    pass
    return out


def names():
    res = subprocess.run(["podman", "ps", "-a", "--no-trunc", "--format", "{{.ID}} {{.Names}}"],
                         capture_output=True, text=True, timeout=60, check=False)
    return dict(line.split(" ", 1) for line in res.stdout.splitlines() if " " in line)


def report(by_name, seconds):
    total = sum(by_name.values()) or 1
    groups = collections.Counter()
    for name, ns in by_name.items():
        groups["head nodes" if name.endswith("-spark-head") else
               "worker nodes" if "-spark-worker" in name else name] += ns
    print("CPU seconds over %.0f s of sampling (measured; %.0f s of CPU in all)" % (seconds, total / 1e9))
    for name, ns in groups.most_common():
        print("  %-36s %8.0f s  %5.1f %%" % (name, ns / 1e9, 100 * ns / total))
    scenarios = collections.Counter()
    for name, ns in by_name.items():
        if "-spark-" in name:
            scenarios[name.split("-spark-")[0]] += ns
    print("by scenario (its nodes):")
    for name, ns in scenarios.most_common():
        print("  %-36s %8.0f s  %5.1f %%" % (name, ns / 1e9, 100 * ns / total))


def _interrupted(_signum, _frame):
    raise KeyboardInterrupt


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, required=True, help="how long to sample")
    parser.add_argument("--every", type=float, default=20, help="seconds between samples")
    args = parser.parse_args()
    by_name, known = collections.Counter(), {}
    last_total, last = total_ns(), containers_ns()  # what ran before the sampling started is not counted
    end = time.monotonic() + args.seconds
    # Stopped early (Ctrl-C, kill), it prints what it sampled so far.
    signal.signal(signal.SIGTERM, _interrupted)
    started = time.monotonic()
    try:
        while time.monotonic() < end:
            time.sleep(args.every)
            known.update(names())
            now_total, now = total_ns(), containers_ns()
            used = 0
            for cid, ns in now.items():
                delta = ns - last.get(cid, 0)
                by_name[known.get(cid, cid[:12])] += delta
                used += delta
            by_name["(this machine, outside the nodes)"] += now_total - last_total - used
            last_total, last = now_total, now
    except KeyboardInterrupt:
        pass
    report(by_name, time.monotonic() - started)


if __name__ == "__main__":
    main()
