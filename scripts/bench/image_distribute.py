#!/usr/bin/env python3
"""Image distribution on the sim: streaming (the image_distribute module) against
the community launcher's way (save to a file in /tmp, copy it, load it), side by side.

    scripts/bench/image_distribute.py [--runs 3] [--zstd] [--keep]

Uses the sim cluster `image` (restarted clean) and the serving test image
(~583 MB). Each run starts with the worker lacking the image; the methods
alternate. Measured: wall time (median of --runs), then in one more run of
each method the peak extra disk on head and worker, sampled every ~0.2 s with du of /tmp (where the launcher writes its
archive), /var/tmp (where podman's load and save stage data: part of the
container engine, the same for both methods) and the container storage.
The stream is the module's AnsiballZ file (kept from one `ansible` run) started on the
head over SSH, the way the launcher's commands are started, so Ansible's own start-up
is not counted against it. Then the no-op: the module when the IDs already match,
alone and through `ansible`. Prints a Markdown table.
Traffic: only to the sim's containers.
"""
import argparse
import json
import os
import pathlib
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLUSTER = "image"
REF = "localhost/dgxspark-sim-serving:latest"
ARCHIVE = "/srv/dgxspark-sim/serving-image.tar"
CLI = ["sudo", "docker"]
STORAGE = "/var/lib/docker"
SIM_KEY = pathlib.Path.home() / ".cache" / "dgxspark-sim" / "ssh" / "id_ed25519"
# On the head, the node trust set up by the scenario's prepare playbook.
TRUST = "-i ~/.ssh/dgxspark_node_trust_ed25519 -o IdentitiesOnly=yes -o UserKnownHostsFile=~/.ssh/dgxspark_known_hosts " \
        "-o StrictHostKeyChecking=yes -o BatchMode=yes"


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def ssh_argv(ip, command):
    return ["ssh", "-i", str(SIM_KEY), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", f"spark@{ip}", command]


def on(ip, command, check=True):
    res = subprocess.run(ssh_argv(ip, command), capture_output=True, text=True)
    if check and res.returncode != 0:
        raise SystemExit(f"[bench] {ip}: {command} failed: {res.stderr.strip()}")
    return res.stdout


class DiskSampler:
    """du of /tmp, /var/tmp and the container storage on one node, every ~0.2 s, over one SSH session."""

    def __init__(self, ip):
        # Ends when this side hangs up (awk dies writing to the closed pipe), at the latest after 20 minutes.
        inner = ("while sudo du -sxb /tmp /var/tmp %s 2>/dev/null | awk '{printf \"%%s \", $1} END {print \"\"}'; "
                 "do sleep 0.2; done" % STORAGE)
        loop = "timeout 1200 bash -c " + shlex.quote(inner)
        self.proc = subprocess.Popen(ssh_argv(ip, loop), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.samples = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        deadline = time.time() + 20
        while not self.samples and time.time() < deadline:
            time.sleep(0.05)

    def _read(self):
        for line in self.proc.stdout:
            parts = line.split()
            if len(parts) == 3:
                self.samples.append(tuple(int(p) for p in parts))

    def stop(self):
        time.sleep(0.5)  # one more sample after the end
        self.proc.kill()
        self.proc.wait()
        self.thread.join(timeout=5)
        s = self.samples
        if len(s) < 2:
            return {"tmp": 0, "vartmp": 0, "total": 0}
        base = lambda i: max(s[0][i], s[-1][i])  # noqa: E731 -- before, or after (the worker gains the image)
        total = [sum(x) for x in s]
        return {"tmp": max(x[0] for x in s) - base(0), "vartmp": max(x[1] for x in s) - base(1),
                "total": max(total) - max(total[0], total[-1])}


def write_inventory(index, workdir):
    inv = workdir / "inventory"
    inv.mkdir()
    hosts = {"all": {"children": {"spark": {"children": {
        "spark_head": {"hosts": {"spark-head": {"ansible_host": f"10.231.{index}.10",
                                                "spark_fabric_ip": f"10.231.{index + 100}.10"}}},
        "spark_workers": {"hosts": {"spark-worker-1": {"ansible_host": f"10.231.{index}.11",
                                                       "spark_fabric_ip": f"10.231.{index + 100}.11"}}}}},
        # The sim's overlay over the shipped group_vars (inventories/sim/hosts.yml).
        "sim": {"vars": {"ansible_group_priority": 10}, "children": {"spark_head": {}, "spark_workers": {}}}}}}
    (inv / "hosts.yml").write_text(yaml.safe_dump(hosts))
    (inv / "group_vars").symlink_to(ROOT / "inventories" / "sim" / "group_vars")
    return inv


def ansible_env():
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"), ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
                ANSIBLE_NOCOLOR="1")


def module_args(worker_fabric, compress=False):
    return {"ref": REF, "container_cli": CLI, "storage_path": STORAGE, "compress": compress,
            "workers": [{"name": "spark-worker-1", "host": worker_fabric, "user": "spark"}]}


def stream(inv, worker_fabric, compress=False, keep_payload=None):
    """The module through `ansible` (what a user runs). keep_payload: keep its AnsiballZ file on the
    head under that name, so that later runs time the module alone, started like the launcher's commands."""
    env = ansible_env()
    if keep_payload:
        env.update(ANSIBLE_KEEP_REMOTE_FILES="1", ANSIBLE_PIPELINING="0", ANSIBLE_REMOTE_TMP="/home/spark/.ansible/bench-tmp")
    res = subprocess.run(["ansible", "-i", str(inv), "spark-head", "-o", "-m", "dgxspark.vllm.image_distribute",
                          "-a", json.dumps(module_args(worker_fabric, compress))],
                         capture_output=True, text=True, env=env, cwd=ROOT)
    try:
        # oneline output: "spark-head | CHANGED => {...}"
        line = next(ln for ln in res.stdout.splitlines() if ln.startswith("spark-head |"))
        out = json.loads(line.split("=>", 1)[1])
    except (StopIteration, IndexError, ValueError):
        raise SystemExit(f"[bench] the module run failed: {res.stdout[-2000:]} {res.stderr[-2000:]}")
    if out.get("failed"):
        raise SystemExit(f"[bench] the module failed: {out.get('msg')}")
    if keep_payload:
        head = inv_head_ip(inv)
        on(head, f"cp ~/.ansible/bench-tmp/*/AnsiballZ_image_distribute.py {keep_payload} && rm -rf ~/.ansible/bench-tmp")
    return out


def inv_head_ip(inv):
    return yaml.safe_load((inv / "hosts.yml").read_text())["all"]["children"]["spark"]["children"][
        "spark_head"]["hosts"]["spark-head"]["ansible_host"]


def payload(head_ip, path):
    """The module's kept AnsiballZ file run on the head: the module alone, no Ansible start-up."""
    out = json.loads(on(head_ip, f"python3 {path}"))
    if out.get("failed"):
        raise SystemExit(f"[bench] the module failed: {out.get('msg')}")
    return out


def launcher(head_ip, worker_fabric):
    """The launcher's way: docker save to /tmp, copy, docker load on the worker, remove the files."""
    t = shlex.quote
    remote_load = "sudo docker load -q -i /tmp/serving-image.tar && rm -f /tmp/serving-image.tar"
    script = " && ".join([
        f"sudo docker save -o /tmp/serving-image.tar {t(REF)}",
        "sudo chmod 0644 /tmp/serving-image.tar",
        f"scp -q {TRUST} /tmp/serving-image.tar spark@{worker_fabric}:/tmp/serving-image.tar",
        f"ssh {TRUST} spark@{worker_fabric} {t(remote_load)}",
        "sudo rm -f /tmp/serving-image.tar",
    ])
    on(head_ip, script)


def shell_pipe(head_ip, worker_fabric):
    """The bare pipeline the module runs, typed by hand: what its own checks and proof cost on top."""
    on(head_ip, f"sudo docker save {shlex.quote(REF)} | ssh {TRUST} spark@{worker_fabric} 'sudo docker load -q'")


def reset_worker(worker_ip):
    on(worker_ip, f"sudo docker rmi -f {REF} >/dev/null 2>&1; sudo docker image prune -f >/dev/null; "
                  f"! sudo docker image inspect {REF} >/dev/null 2>&1")


def worker_id(worker_ip):
    return on(worker_ip, f"sudo docker image inspect --format '{{{{.Id}}}}' {REF}").strip()


def measure(name, fn, head_ip, worker_ip, sample):
    """One transfer to a worker without the image: wall time, or (sample) the peak extra disk.

    Disk is sampled in runs of its own: `du` of the container storage every 0.2 s takes CPU
    that the stream (save, ssh and load at once) would otherwise use, so timed runs go unsampled."""
    reset_worker(worker_ip)
    samplers = {"head": DiskSampler(head_ip), "worker": DiskSampler(worker_ip)} if sample else {}
    t0 = time.monotonic()
    extra = fn()
    wall = time.monotonic() - t0
    disk = {k: s.stop() for k, s in samplers.items()}
    if sample:
        log(f"{name} (disk sampled): extra disk head {disk['head']['total'] / 1e6:.0f} MB "
            f"(/tmp {disk['head']['tmp'] / 1e6:.0f}), worker {disk['worker']['total'] / 1e6:.0f} MB "
            f"(/tmp {disk['worker']['tmp'] / 1e6:.0f}, /var/tmp {disk['worker']['vartmp'] / 1e6:.0f})")
    else:
        log(f"{name}: {wall:.1f} s")
    return {"wall": wall, "disk": disk, "extra": extra}


def med(runs, f):
    return statistics.median(f(r) for r in runs)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--zstd", action="store_true", help="also measure the stream compressed with zstd")
    p.add_argument("--keep", action="store_true", help="leave the sim cluster up")
    args = p.parse_args()
    index = yaml.safe_load((ROOT / "sim" / "clusters.yml").read_text())[CLUSTER]
    head_ip, worker_ip, worker_fabric = f"10.231.{index}.10", f"10.231.{index}.11", f"10.231.{index + 100}.11"
    simctl = [sys.executable, str(ROOT / "sim" / "simctl.py")]
    subprocess.run(simctl + ["down", "--cluster", CLUSTER], check=True)
    subprocess.run(simctl + ["up", "--cluster", CLUSTER], check=True, stdout=subprocess.DEVNULL)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            inv = write_inventory(index, pathlib.Path(tmp))
            log("node trust (molecule/image/prepare.yml) and the image on the head")
            subprocess.run(["ansible-playbook", "-i", str(inv), str(ROOT / "molecule" / "image" / "prepare.yml")],
                           check=True, env=ansible_env(), cwd=ROOT, stdout=subprocess.DEVNULL)
            on(head_ip, f"sudo docker load -q -i {ARCHIVE} >/dev/null")
            size = int(on(head_ip, f"sudo docker image inspect --format '{{{{.Size}}}}' {REF}"))
            head_id = on(head_ip, f"sudo docker image inspect --format '{{{{.Id}}}}' {REF}").strip()
            # Both ways are timed as commands started on the head over one SSH session.
            stream(inv, worker_fabric, keep_payload="/home/spark/bench-stream.py")
            methods = {"stream": lambda: payload(head_ip, "/home/spark/bench-stream.py"),
                       "launcher": lambda: launcher(head_ip, worker_fabric),
                       "save → ssh load, by hand": lambda: shell_pipe(head_ip, worker_fabric)}
            if args.zstd:
                reset_worker(worker_ip)
                stream(inv, worker_fabric, compress=True, keep_payload="/home/spark/bench-zstd.py")
                methods["stream+zstd"] = lambda: payload(head_ip, "/home/spark/bench-zstd.py")
            results, disks = {m: [] for m in methods}, {}
            for i in range(args.runs + 1):
                for m, fn in methods.items():
                    r = measure(f"{m} run {i + 1}", fn, head_ip, worker_ip, sample=i == args.runs)
                    if worker_id(worker_ip) != head_id:
                        raise SystemExit(f"[bench] {m}: the worker's image ID differs from the head's")
                    if i == args.runs:
                        disks[m] = r["disk"]
                    else:
                        results[m].append(r)
            parts = {"save": [], "load": []}
            for i in range(args.runs):
                t0 = time.monotonic()
                on(head_ip, f"sudo docker save {shlex.quote(REF)} > /dev/null")
                parts["save"].append(time.monotonic() - t0)
                reset_worker(worker_ip)
                t0 = time.monotonic()
                on(worker_ip, f"sudo docker load -q -i {ARCHIVE} >/dev/null")
                parts["load"].append(time.monotonic() - t0)
                log(f"parts run {i + 1}: save {parts['save'][-1]:.1f} s, load {parts['load'][-1]:.1f} s")
            noop, noop_alone = [], []
            for i in range(args.runs):
                t0 = time.monotonic()
                out = stream(inv, worker_fabric)
                noop.append(time.monotonic() - t0)
                assert out["workers"][0]["status"] == "present" and not out["changed"], out
                t0 = time.monotonic()
                out = payload(head_ip, "/home/spark/bench-stream.py")
                noop_alone.append(time.monotonic() - t0)
                assert out["workers"][0]["status"] == "present" and not out["changed"], out
                log(f"no-op run {i + 1}: {noop[-1]:.1f} s through ansible, {noop_alone[-1]:.1f} s the module alone")
    finally:
        if not args.keep:
            subprocess.run(simctl + ["down", "--cluster", CLUSTER])

    base = med(results["launcher"], lambda r: r["wall"])
    mb = lambda n: f"{n / 1e6:.0f} MB"  # noqa: E731
    print(f"\nImage {REF}, {size / 1e6:.0f} MB; median of {args.runs} runs each, sim cluster `{CLUSTER}`, "
          f"methods alternating. `by hand` is the bare pipeline without the module's probe, checks and proof.\n")
    print(f"The parts that bound any stream (median of {args.runs}): `save` on the head into /dev/null "
          f"{statistics.median(parts['save']):.1f} s; `load` on the worker from a local archive "
          f"{statistics.median(parts['load']):.1f} s. podman's `load` starts unpacking only after the last byte.\n")
    print("| method | wall time | vs launcher | head: /tmp | head: /var/tmp | worker: /tmp | worker: /var/tmp "
          "| peak extra disk head / worker |")
    print("|---|---|---|---|---|---|---|---|")
    for m, runs in results.items():
        w = med(runs, lambda r: r["wall"])
        d = lambda node, k: mb(disks[m][node][k])  # noqa: E731
        print(f"| {m} | {w:.1f} s | {w / base:.2f}x | {d('head', 'tmp')} | {d('head', 'vartmp')} | "
              f"{d('worker', 'tmp')} | {d('worker', 'vartmp')} | {d('head', 'total')} / {d('worker', 'total')} |")
    print(f"| no-op (IDs equal), module alone | {statistics.median(noop_alone):.1f} s | | | | | | |")
    print(f"| no-op (IDs equal), through `ansible` | {statistics.median(noop):.1f} s | | | | | | |")
    print("\nPer-run wall times: " + "; ".join(
        f"{m} " + ", ".join(f"{r['wall']:.1f}" for r in runs) for m, runs in results.items())
        + "; no-op through ansible " + ", ".join(f"{t:.1f}" for t in noop))
    sent = [r["extra"]["workers"][0]["bytes"] for r in results.get("stream+zstd", [])]
    if sent:
        print(f"zstd: {statistics.median(sent) / 1e6:.0f} MB sent for {size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
