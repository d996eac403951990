#!/usr/bin/env python3
"""What the scenarios' own playbook runs cost: read the headers serving_checks.keep_run writes
(.cache/playbook-runs/SCENARIO/NN-TEST.log) and print, per scenario, the runs, their wall time and the controller CPU
they took, then the costliest runs.

    python3 scripts/playbook_runs.py [--top 15] [FOLDER]     # FOLDER: .cache/playbook-runs (the default)

Measured figures of the run that wrote the logs; the converge and idempotence runs molecule makes are not in them
(their task timers are in .cache/molecule-logs).
"""
import argparse
import collections
import pathlib
import re

HEADER = re.compile(r"^# ansible-playbook (?P<args>.*)\n# exit (?P<rc>-?\d+) after (?P<wall>\d+) s"
                    r"(?:, (?P<cpu>[0-9.]+) s of controller CPU)?")


def runs(folder):
    """(scenario, log name, args, exit, wall s, cpu s or None) of every kept run."""
    out = []
    for log in sorted(pathlib.Path(folder).glob("*/*.log")):
        with open(log, encoding="utf-8", errors="replace") as handle:
            head = handle.readline() + handle.readline()
        m = HEADER.match(head)
        if m:
            out.append((log.parent.name, log.stem, m["args"], int(m["rc"]), int(m["wall"]),
                        float(m["cpu"]) if m["cpu"] else None))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=".cache/playbook-runs")
    parser.add_argument("--top", type=int, default=15)
    opts = parser.parse_args()
    found = runs(opts.folder)
    if not found:
        raise SystemExit(f"no kept playbook runs under {opts.folder}")
    per = collections.defaultdict(lambda: [0, 0, 0.0])
    for scenario, _name, _args, _rc, wall, cpu in found:
        per[scenario][0] += 1
        per[scenario][1] += wall
        per[scenario][2] += cpu or 0.0
    print(f"{'scenario':<12} {'runs':>5} {'wall s':>8} {'controller CPU s':>17}")
    for scenario, (count, wall, cpu) in sorted(per.items(), key=lambda kv: -kv[1][2]):
        print(f"{scenario:<12} {count:>5} {wall:>8} {cpu:>17.1f}")
    total = [sum(v[i] for v in per.values()) for i in range(3)]
    print(f"{'all':<12} {total[0]:>5} {total[1]:>8} {total[2]:>17.1f}")
    print(f"\nthe {opts.top} costliest runs (controller CPU s, wall s, scenario, test, arguments):")
    for scenario, name, args, _rc, wall, cpu in sorted(found, key=lambda r: -(r[5] or 0))[:opts.top]:
        print(f"{cpu or 0:7.1f} {wall:6d}  {scenario:<10} {name[:60]:<60} {args[:80]}")


if __name__ == "__main__":
    main()
