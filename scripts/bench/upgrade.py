#!/usr/bin/env python3
"""Day two on a simulated pair (stand-in engine): what an upgrade costs the endpoint, and how fast a bad one
is undone, side by side with the by-hand way in one run.

    scripts/bench/upgrade.py [--cluster bench] [--runs 3] [--keep]

Each run, on one serving pair, while a poller asks the head's /health every 0.25 s:
  good      playbooks/upgrade.yml to a new image (a new layer on the serving image): the endpoint's downtime;
  restart   playbooks/restart.yml with the same values (the deployment stopped and started): the floor of a switch;
  rollback  playbooks/upgrade.yml to an image whose engine dies at start: the play's own figure (failed health
            check to the old deployment healthy again) and the downtime;
  by hand   the same bad image with site.yml, then site.yml again with the last good image (what users do
            without upgrade.yml): the time from the failure to healthy again (the second run's wall time) and
            the downtime.
Prints the medians and the ratios. Every figure comes from the stand-in engine's start: modelled, not a GB10's.
"""
import argparse
import json
import os
import pathlib
import re
import shlex
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "bench"))
import site_runs  # noqa: E402  pylint: disable=wrong-import-position

SIM = [sys.executable, str(ROOT / "sim" / "simctl.py")]
FILES = ROOT / "molecule" / "upgrade" / "files"
REF = "localhost/dgxspark-sim-serving"
KEY = pathlib.Path.home() / ".cache" / "dgxspark-sim" / "ssh" / "id_ed25519"


class Poller(threading.Thread):
    """Asks /health every 0.25 s; downtime(t0, t1) is the longest run of failed answers in that window."""

    def __init__(self, url):
        super().__init__(daemon=True)
        self.url, self.samples, self.stop = url, [], False

    def run(self):
        while not self.stop:
            try:
                ok = urllib.request.urlopen(self.url, timeout=2).status == 200  # noqa: S310 (the sim's own node)
            except OSError:
                ok = False
            self.samples.append((time.monotonic(), ok))
            time.sleep(0.25)

    def downtime(self, t0, t1):
        longest, down_since = 0.0, None
        for t, ok in [s for s in self.samples if t0 <= s[0] <= t1]:
            if not ok and down_since is None:
                down_since = t
            elif ok and down_since is not None:
                longest, down_since = max(longest, t - down_since), None
        if down_since is not None:
            longest = max(longest, t1 - down_since)
        return longest


def run_book(inventory, book, *args, expect_ok=True):
    t0 = time.monotonic()
    res = subprocess.run(["ansible-playbook", "-i", inventory, book, *args], cwd=ROOT, capture_output=True, text=True,
                         check=False, env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"),
                                               PATH=f"{ROOT}/.venv/bin:{os.environ['PATH']}"))
    t1 = time.monotonic()
    if (res.returncode == 0) != expect_ok:
        sys.stdout.write(res.stdout[-6000:] + res.stderr[-2000:])
        raise SystemExit(f"{book} {' '.join(args)}: rc {res.returncode}, expected {'0' if expect_ok else 'a failure'}")
    return t0, t1, res.stdout


def build_vars(build, tag):
    return json.dumps({"image_source": "build", "image_build_context": f"/srv/dgxspark-upgrade/{build}",
                       "image_ref": f"{REF}:{tag}", "image_build_poll": 2,
                       "image_build_args": ["--label", f"org.dgxspark.test.tag={tag}"]})


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster", default="bench")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--keep", action="store_true")
    a = p.parse_args()

    subprocess.run(SIM + ["up", "--cluster", a.cluster, "--nodes", "2"], check=True)
    inventory = site_runs.inventory_for(ROOT, a.cluster, 2)
    sys.path.insert(0, str(ROOT / "sim"))
    import simctl  # pylint: disable=import-outside-toplevel
    head_ip = simctl.layout(a.cluster, 2)[1][0]["mgmt_ip"]
    try:
        for build in ("next", "broken"):
            text = (FILES / build / "Dockerfile").read_text()
            subprocess.run(["ssh", "-i", str(KEY), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                            "-o", "LogLevel=ERROR", f"spark@{head_ip}",
                            f"sudo mkdir -p /srv/dgxspark-upgrade/{build} && printf %s {shlex.quote(text)}"
                            f" | sudo tee /srv/dgxspark-upgrade/{build}/Dockerfile >/dev/null"], check=True)
        run_book(inventory, "site.yml")
        poller = Poller(f"http://{head_ip}:8000/health")
        poller.start()
        rows = {k: [] for k in ("good", "restart", "rollback_play", "rollback_down", "hand_recover", "hand_down")}
        for i in range(1, a.runs + 1):
            good_tag = f"next{i}"
            t0, t1, _ = run_book(inventory, "playbooks/upgrade.yml", "-e", build_vars("next", good_tag))
            rows["good"].append(poller.downtime(t0, t1))
            # The same deployment restarted: given the values it was deployed with, as the inventory would hold them.
            t0, t1, _ = run_book(inventory, "playbooks/restart.yml", "-e", build_vars("next", good_tag))
            rows["restart"].append(poller.downtime(t0, t1))
            t0, t1, out = run_book(inventory, "playbooks/upgrade.yml", "-e", build_vars("broken", f"broken{i}"),
                                   expect_ok=False)
            m = re.search(r"healthy again\s+([\d.]+) s after the failure", out)
            if not m:
                sys.stdout.write(out[-4000:])
                raise SystemExit("upgrade.yml did not report a rollback")
            rows["rollback_play"].append(float(m.group(1)))
            rows["rollback_down"].append(poller.downtime(t0, t1))
            # By hand: site.yml with the bad image fails at the health wait; then site.yml with the last good one.
            h0, _, _ = run_book(inventory, "site.yml", "-e", build_vars("broken", f"broken{i}"), expect_ok=False)
            f1 = time.monotonic()
            _, h1, _ = run_book(inventory, "site.yml", "-e", build_vars("next", good_tag))
            rows["hand_recover"].append(h1 - f1)
            rows["hand_down"].append(poller.downtime(h0, h1))
            print(f"run {i}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in rows.items()), flush=True)
        poller.stop = True
        med = {k: statistics.median(v) for k, v in rows.items()}
        print("\nmodelled (stand-in engine), medians of", a.runs, "runs")
        print(f"{'what':<46}{'runs (s)':<28}{'median':>8}")
        for key, label in (("good", "good upgrade: endpoint down"), ("restart", "restart.yml (floor): endpoint down"),
                           ("rollback_play", "bad upgrade: failure -> old healthy (play)"),
                           ("rollback_down", "bad upgrade: endpoint down"),
                           ("hand_recover", "by hand: failure -> healthy (site.yml again)"),
                           ("hand_down", "by hand: endpoint down")):
            print(f"{label:<46}{', '.join(f'{x:.1f}' for x in rows[key]):<28}{med[key]:>8.1f}")
        print(f"\ngood upgrade downtime / restart downtime: {med['good'] / med['restart']:.2f}x")
        print(f"rollback (play) / by-hand recovery: {med['rollback_play'] / med['hand_recover']:.2f}x;"
              f" downtime {med['rollback_down'] / med['hand_down']:.2f}x")
    finally:
        if not a.keep:
            subprocess.run(SIM + ["down", "--cluster", a.cluster], check=False)


if __name__ == "__main__":
    main()
