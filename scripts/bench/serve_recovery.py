#!/usr/bin/env python3
"""Serving recovery on a simulated cluster: how long until /health is 200 again after the worker's
Ray container is killed (fault), side by side with a planned engine restart (baseline).

Needs a converged serve scenario (`molecule converge -s serve`). Traffic goes only to the sim nodes.
    python3 scripts/bench/serve_recovery.py [--runs 3] [--head 10.231.6.10] [--worker 10.231.6.11]
"""
import argparse
import pathlib
import statistics
import subprocess
import time

KEY = pathlib.Path.home() / ".cache" / "dgxspark-sim" / "ssh" / "id_ed25519"
SSH = ["ssh", "-i", str(KEY), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
       "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]


def sh(host, cmd):
    return subprocess.run(SSH + [f"spark@{host}", cmd], text=True, capture_output=True, check=False)


def health(head, url):
    return sh(head, f"curl -s -m 3 -o /dev/null -w '%{{http_code}}' {url}/health").stdout.strip()


def until_healthy_again(head, url, t0, limit):
    went_down = False
    while time.monotonic() - t0 < limit:
        code = health(head, url)
        went_down = went_down or code != "200"
        if went_down and code == "200":
            return time.monotonic() - t0
        time.sleep(0.5)
    raise SystemExit(f"not healthy again within {limit}s")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--head", default="10.231.6.10")
    p.add_argument("--worker", default="10.231.6.11")
    p.add_argument("--url", default="http://10.231.6.10:8000", help="API as seen from the head")
    p.add_argument("--limit", type=float, default=300)
    a = p.parse_args()
    if health(a.head, a.url) != "200":
        raise SystemExit("the endpoint is not healthy: converge the serve scenario first")
    results = {"baseline: planned engine restart": [], "fault: worker Ray container killed": []}
    for _ in range(a.runs):
        t0 = time.monotonic()
        sh(a.head, "sudo systemctl restart --no-block dgxspark-vllm")
        results["baseline: planned engine restart"].append(until_healthy_again(a.head, a.url, t0, a.limit))
        t0 = time.monotonic()
        sh(a.worker, "sudo docker kill dgxspark-ray")
        results["fault: worker Ray container killed"].append(until_healthy_again(a.head, a.url, t0, a.limit))
    base = statistics.median(results["baseline: planned engine restart"])
    print(f"| case | median s ({a.runs} runs) | runs | ratio to baseline |\n|---|---|---|---|")
    for name, vals in results.items():
        med = statistics.median(vals)
        print(f"| {name} | {med:.1f} | {', '.join(f'{v:.1f}' for v in vals)} | {med / base:.1f}x |")


if __name__ == "__main__":
    main()
