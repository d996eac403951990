#!/usr/bin/env python3
"""Which processes of the sim's nodes take the suite's CPU: every process on this machine sampled from /proc (the
nested nodes' processes are visible there), each put on its node through its cgroup, its CPU time kept as last
seen, then summed by node side (head, worker, this machine) and by what the process is.

    python3 scripts/suite_procs.py --seconds 3300 [--every 3]     # beside a test run, then print

Measured, with one limit: a process that lives less than --every seconds is mostly missed (Ansible's module runs and
forks, short docker commands), so long-lived processes (the engine, Ray, Docker) are counted well and the rest is
under-counted; scripts/suite_cpu.py gives the whole split. Then, by scenario, what ran this machine's CPU (molecule's own
playbook runs, the tests' runs, pytest with them) and its nodes' SSH logins: there a process counts with the children it
waited for, so short-lived forks and module runs are in.
"""
import argparse
import collections
import os
import pathlib
import re
import time

import suite_cpu

HZ = os.sysconf("SC_CLK_TCK")
KINDS = [  # (what, pattern of its command line); the first that matches
    ("the engine's Ray workers (a rank each)", r"default_worker\.py|setup_worker\.py"),
    ("vLLM's model registry subprocess", r"vllm\.model_executor\.models\.registry"),
    ("vLLM's flag read (once per image ID)", r"FlexibleArgumentParser"),
    ("vllm serve (the API server)", r"vllm serve"),
    ("the engine core (spawned)", r"multiprocessing\.spawn|spawn_main"),
    ("the fabric's collective", r"torch\.distributed"),
    ("Ray's log monitor", r"log_monitor\.py"),
    ("raylet", r"raylet"),
    ("Ray's GCS", r"gcs_server"),
    ("Ray, other (agents, idle workers, ray start)", r"ray::|/ray/|ray start"),
    ("dockerd", r"dockerd"),
    ("containerd", r"containerd"),
    ("ansible-playbook (the controller, without its forks)", r"ansible-playbook"),
]


def kind(cmd):
    return next((name for name, pattern in KINDS if re.search(pattern, cmd)), "other")


def scan(seen, first):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            rest = stat[stat.rindex(")") + 2:].split()
            cpu = (int(rest[11]) + int(rest[12])) / HZ
            reaped = (int(rest[13]) + int(rest[14])) / HZ  # its children that ended and were waited for
            key = (pid, rest[19])  # pid and start time: a reused pid is another process
            if key in seen:
                seen[key][2] = cpu
                seen[key][5] = reaped
                continue
            with open(f"/proc/{pid}/cgroup") as f:
                node = re.search(r"libpod-([0-9a-f]{12})", f.read())
            with open(f"/proc/{pid}/cmdline") as f:
                cmd = f.read().replace("\0", " ")
            # A process running when sampling starts counts only what it takes from then on.
            seen[key] = [node.group(1) if node else "", kind(cmd), cpu, cpu if first else 0.0, cmd, reaped,
                         int(rest[1]), pid]
        except (OSError, ValueError, IndexError):
            pass


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--every", type=float, default=3)
    args = p.parse_args()
    seen, names = {}, {}
    end, first, last_names = time.time() + args.seconds, True, 0.0
    while time.time() < end:
        scan(seen, first)
        first = False
        if time.time() - last_names > 60:  # nodes come and go with the scenarios
            names.update((cid[:12], name) for cid, name in suite_cpu.names().items())
            last_names = time.time()
        time.sleep(args.every)
    totals, counts = collections.Counter(), collections.Counter()
    for node, what, cpu, base, *_ in seen.values():
        name = names.get(node, "?") if node else ""
        side = "this machine" if not node else "head" if name.endswith("-head") else "worker"
        totals[(side, what)] += cpu - base
        counts[(side, what)] += 1
    print(f"CPU seconds by process, {args.seconds:.0f} s sampled every {args.every} s (measured; short-lived processes "
          "mostly missed)")
    print("| where | what | processes | CPU s |")
    print("|---|---|---:|---:|")
    for (side, what), cpu in totals.most_common():
        if cpu >= 1:
            print(f"| {side} | {what} | {counts[(side, what)]} | {cpu:.0f} |")
    by_run(seen, names)


def by_run(seen, names):
    """Each scenario's CPU on this machine by what ran it, and on its nodes through SSH: a process's own CPU plus its
    children's that it waited for (so a short-lived Ansible fork or module run counts in the process that started
    it), as last seen."""
    procs = {v[7]: v for v in seen.values()}
    whole = {pid: v[2] + v[5] for pid, v in procs.items()}
    clusters = {}  # a scenario's sim cluster (its nodes' name prefix) is not always its name
    for conf in pathlib.Path(__file__).resolve().parents[1].glob("molecule/*/molecule.yml"):
        m = re.search(r"DGXSPARK_SIM_CLUSTER: (\S+)", conf.read_text())
        if m:
            clusters[m.group(1)] = conf.parent.name

    def ancestors(pid):
        while pid in procs:
            pid = str(procs[pid][6])
            yield pid

    def scenario(pid):
        return next((m.group(1) for a in [pid, *ancestors(pid)] if a in procs
                     for m in [SCENARIO.search(procs[a][4])] if m), None)

    rows = collections.Counter()
    for pid, (node, _, _, _, cmd, *_rest) in procs.items():
        if node:
            # On a node: everything a login ran (Ansible's modules, the tests' commands) is reaped by its session.
            if re.search(r"sshd(-session)?: \S+@", cmd):
                cluster = names.get(node, "?").split("-spark-")[0]
                rows[(clusters.get(cluster, cluster), "its nodes: what SSH logins ran (Ansible's modules, the tests' "
                      "commands)")] += whole[pid]
            continue
        sc = scenario(pid)
        if not sc:
            continue
        up = [procs[a][4] for a in ancestors(pid) if a in procs]
        if re.search(r"bin/molecule test -s", cmd):  # the molecule process (timeout runs it): all of the scenario's
            rows[(sc, "this machine: all of it")] += whole[pid]
        elif "ansible-playbook" in cmd and not any("ansible-playbook" in u for u in up):
            by = "the tests' playbook runs" if any("pytest" in u for u in up) else \
                "molecule's playbook runs (create, converge, idempotence, destroy)"
            rows[(sc, "this machine: " + by)] += whole[pid]
        elif "pytest" in cmd and not any("pytest" in u for u in up):
            rows[(sc, "this machine: pytest, with its playbook runs")] += whole[pid]
    print("\nBy scenario: this machine's CPU by what ran it, and its nodes' CPU under SSH logins (measured; a process "
          "and the children it waited for, as last seen)")
    print("| scenario | what | CPU s |")
    print("|---|---|---:|")
    for (sc, what), cpu in sorted(rows.items()):
        print(f"| {sc} | {what} | {cpu:.0f} |")


SCENARIO = re.compile(r"molecule test -s ([\w-]+)")

if __name__ == "__main__":
    main()
