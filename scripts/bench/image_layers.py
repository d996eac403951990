#!/usr/bin/env python3
"""Layer-wise image distribution on the sim: only the layers a worker lacks, against the whole
image, side by side (the image_distribute module three ways: the missing layers read from Docker's
store, the missing layers filtered out of `save`, and the whole image).

    scripts/bench/image_layers.py [--runs 3] [--upgrade-mb 100] [--cluster image] [--keep]

Uses a sim cluster (`image` unless told, restarted clean) and the stand-in serving image (~583 MB) as the base,
on the head and on the worker. Cases, each timed as the module alone on the head (its AnsiballZ file,
started over SSH), the worker reset to the base before every run, the two ways alternating:
- derived: a mods-like image, the base plus one small layer (a committed container);
- upgrade: the base plus a new top layer of --upgrade-mb MB;
- empty worker: the base itself to a worker that has no image at all.
Prints bytes on the wire, layers sent and reused, and the median wall time of each, next to the time
`save` alone needs on the head (the floor of every way that reads the image through `save`).
Traffic: only to the sim's containers.
"""
import argparse
import json
import pathlib
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

from image_distribute import ansible_env, on, write_inventory  # scripts/bench/image_distribute.py

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLUSTER = "image"
BASE = "localhost/dgxspark-sim-serving:latest"
ARCHIVE = "/srv/dgxspark-sim/serving-image.tar"
CLI = ["docker"]  # the admin user is in the docker group, as on DGX OS
WAYS = {"store": (True, "store"), "save": (True, "save"), "whole": (False, "save")}


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def keep_payload(inv, ref, worker_fabric, way, path):
    """Run the module once through `ansible`, keeping its AnsiballZ file on the head for timed runs."""
    env = dict(ansible_env(), ANSIBLE_KEEP_REMOTE_FILES="1", ANSIBLE_PIPELINING="0",
               ANSIBLE_REMOTE_TMP="/home/spark/.ansible/bench-tmp")
    layers, read_from = WAYS[way]
    args = {"ref": ref, "container_cli": CLI, "storage_path": "/var/lib/docker", "layers": layers, "read_from": read_from,
            "workers": [{"name": "spark-worker-1", "host": worker_fabric, "user": "spark"}]}
    res = subprocess.run(["ansible", "-i", str(inv), "spark-head", "-o", "-m", "dgxspark.vllm.image_distribute",
                          "-a", json.dumps(args)], capture_output=True, text=True, env=env, cwd=ROOT)
    if "spark-head | FAILED" in res.stdout or res.returncode not in (0, 2):
        raise SystemExit(f"[bench] module failed: {res.stdout[-2000:]}")
    head = inv_head(inv)
    on(head, f"cp ~/.ansible/bench-tmp/*/AnsiballZ_image_distribute.py {path} && rm -rf ~/.ansible/bench-tmp")


def inv_head(inv):
    return yaml.safe_load((inv / "hosts.yml").read_text())["all"]["children"]["spark"]["children"][
        "spark_head"]["hosts"]["spark-head"]["ansible_host"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--upgrade-mb", type=int, default=100)
    p.add_argument("--keep", action="store_true", help="leave the sim cluster up")
    p.add_argument("--cluster", default=CLUSTER, help="the sim cluster to use (one not in use by a test)")
    args = p.parse_args()
    cluster = args.cluster
    index = yaml.safe_load((ROOT / "sim" / "clusters.yml").read_text())[cluster]
    head, worker, worker_fabric = f"10.231.{index}.10", f"10.231.{index}.11", f"10.231.{index + 100}.11"
    simctl = [sys.executable, str(ROOT / "sim" / "simctl.py")]
    subprocess.run(simctl + ["down", "--cluster", cluster], check=True)
    subprocess.run(simctl + ["up", "--cluster", cluster], check=True, stdout=subprocess.DEVNULL)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            inv = write_inventory(index, pathlib.Path(tmp))
            log("node trust (molecule/image/prepare.yml) and the base on both nodes")
            subprocess.run(["ansible-playbook", "-i", str(inv), str(ROOT / "molecule" / "image" / "prepare.yml")],
                           check=True, env=ansible_env(), cwd=ROOT, stdout=subprocess.DEVNULL)
            for node in (head, worker):
                on(node, f"sudo docker load -q -i {ARCHIVE} >/dev/null")
            images = {
                "derived (base + a mods layer)": ("localhost/bench-layers:derived",
                                                  "echo patched > /opt/mod-marker && python3 -c 'print(1)'"),
                f"upgrade (base + a {args.upgrade_mb} MB layer)": (
                    "localhost/bench-layers:upgrade", f"head -c {args.upgrade_mb}M /dev/urandom > /opt/new-build.bin"),
            }
            for ref, command in images.values():
                on(head, f"sudo docker rm -f bench-c >/dev/null 2>&1; sudo docker run --name bench-c {BASE} sh -c "
                         f"{shlex.quote(command)} && sudo docker commit bench-c {ref} >/dev/null && sudo docker rm bench-c >/dev/null")
            images["empty worker (the base itself)"] = (BASE, None)
            save_s = []
            for _ in range(args.runs):
                t0 = time.monotonic()
                on(head, f"sudo docker save {BASE} > /dev/null")
                save_s.append(time.monotonic() - t0)
            for case, (ref, _cmd) in images.items():
                empty = ref == BASE
                ways = ["save", "whole"] if empty else list(WAYS)
                for way in ways:
                    keep_payload(inv, ref, worker_fabric, way, f"/home/spark/bench-{way}.py")
                runs = {way: [] for way in ways}
                for _ in range(args.runs):
                    for way in ways:
                        reset = (f"sudo docker rmi -f {ref} >/dev/null 2>&1; sudo docker image prune -f >/dev/null"
                                 if not empty else "sudo docker rmi -f $(sudo docker images -q) >/dev/null 2>&1; true")
                        on(worker, reset)
                        if empty:
                            assert not on(worker, "sudo docker images -q").strip()
                        t0 = time.monotonic()
                        out = json.loads(on(head, f"python3 /home/spark/bench-{way}.py"))
                        wall = time.monotonic() - t0
                        w = out["workers"][0]
                        if out.get("failed") or w["status"] != "transferred":
                            raise SystemExit(f"[bench] {case}: {out.get('msg')}")
                        runs[way].append((wall, w))
                        log(f"{case}, {way}: {wall:.1f} s, {w['bytes'] / 1e6:.1f} MB, stream {w['stream']}, "
                            f"read from {out.get('read_from')}")
                rows.append((case, runs))
    finally:
        if not args.keep:
            subprocess.run(simctl + ["down", "--cluster", cluster])

    print(f"\nBase {BASE}; median of {args.runs} runs per way, alternating; the module alone on the head. "
          f"`save` of the base into /dev/null on the head: {statistics.median(save_s):.1f} s (median).\n")
    print("| case | way | bytes on the wire | layers sent / reused | wall time | vs whole |")
    print("|---|---|---|---|---|---|")
    for case, runs in rows:
        whole = statistics.median(r[0] for r in runs["whole"])
        for way, timed in runs.items():
            wall = statistics.median(r[0] for r in timed)
            w = timed[-1][1]
            print(f"| {case} | {way} | {statistics.median(r[1]['bytes'] for r in timed) / 1e6:.2f} MB "
                  f"| {w['layers_sent']} / {w['layers_reused']} | {wall:.1f} s | {wall / whole:.2f}x |")


if __name__ == "__main__":
    main()
