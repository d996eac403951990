#!/usr/bin/env python3
"""Benchmark: triton_cache_sync vs rsync, head -> worker on the simulated `triton` cluster.

    python3 scripts/bench/triton_cache_sync.py [--runs 3] [--dirs 1250] [--keep]

Generates on the head a cache shaped like a real one (kernel <hash>/ dirs with the
real fixture's file mix, sizes drawn from it and scaled, plus launcher .so dirs),
then times, side by side in one run, each figure the median of --runs:
  module            dgxspark.vllm.triton_cache_sync, verify=content (its AnsiballZ payload
                    run on the head, as Ansible runs it, minus the controller's round trip)
  rsync -a          the seed's fix
  rsync -a -c       rsync -a --checksum
  rsync + sha256sum rsync -a, then `sha256sum -c` on the worker of a manifest made on the head
for a cold sync (empty worker), a no-op re-sync and a re-sync after 1% of files changed.
Traffic goes only to the sim's containers. Prints a Markdown table.
"""
import argparse
import collections
import json
import os
import pathlib
import shlex
import statistics
import subprocess
import sys
import tarfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLUSTER = "triton"
HEAD_MGMT, WORKER_MGMT, WORKER_FABRIC = "10.231.3.10", "10.231.3.11", "10.231.103.11"
SIM_KEY = pathlib.Path.home() / ".cache" / "dgxspark-sim" / "ssh" / "id_ed25519"
FIXTURE = ROOT / "tests" / "fixtures" / "triton-cache-h200-triton3.6.tgz"
SRC, DST = "/home/spark/bench-triton", "/home/spark/bench-triton"
KEY, KNOWN = "/home/spark/.ssh/dgxspark_node_trust_ed25519", "/home/spark/.ssh/dgxspark_known_hosts"
SSH_E = f"ssh -i {KEY} -o UserKnownHostsFile={KNOWN} -o StrictHostKeyChecking=yes -o BatchMode=yes"
WORKER = f"spark@{WORKER_FABRIC}"

GENERATE = r'''
import json, os, random, sys
spec = json.loads(sys.argv[1]); random.seed(spec["seed"]); root = spec["root"]
alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
def name(): return "".join(random.choice(alphabet) for _ in range(52))
files = total = 0
def write(path, size):
    global files, total
    with open(path, "wb") as f: f.write(os.urandom(size))
    files += 1; total += size
for i in range(spec["dirs"]):
    d = os.path.join(root, "cache", name()); os.makedirs(d)
    k = "bench_kernel_%d" % i
    for ext, sizes in spec["kernel_files"].items():
        size = int(random.choice(sizes) * spec["scale"] * random.lognormvariate(0, 0.4))
        write(os.path.join(d, ("__grp__" + k + ".json") if ext == "__grp__.json" else k + ext), max(64, size))
for i in range(spec["launchers"]):
    d = os.path.join(root, "cache", name()); os.makedirs(d)
    write(os.path.join(d, "__triton_launcher.cpython-312-aarch64-linux-gnu.so"), random.choice(spec["so"]))
print(json.dumps({"files": files, "bytes": total}))
'''

CHANGE = r'''
import json, os, random, sys
root, frac, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
random.seed(seed)
for p in random.sample(paths, max(1, int(len(paths) * frac))):
    size = os.path.getsize(p)
    with open(p, "wb") as f: f.write(os.urandom(size))
'''


def sh(host, cmd, check=True, stdin=None):
    argv = ["ssh", "-i", str(SIM_KEY), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "LogLevel=ERROR", "-o", "BatchMode=yes", f"spark@{host}", cmd]
    res = subprocess.run(argv, capture_output=True, text=True, input=stdin, check=False)
    if check and res.returncode:
        sys.exit(f"on {host}: {cmd}\n{res.stderr}")
    return res.stdout


def fixture_shape():
    """File sizes per kind in the real cache."""
    kinds = collections.defaultdict(list)
    with tarfile.open(FIXTURE) as tar:
        for m in tar.getmembers():
            if not m.isfile():
                continue
            name = os.path.basename(m.name)
            if name.endswith(".so"):
                kinds[".so"].append(m.size)
            elif name.startswith("__grp__"):
                kinds["__grp__.json"].append(m.size)
            else:
                kinds[os.path.splitext(name)[1]].append(m.size)
    so = kinds.pop(".so")
    return dict(kinds), so


def ensure_cluster():
    status = subprocess.run([sys.executable, str(ROOT / "sim" / "simctl.py"), "status", "--cluster", CLUSTER],
                            capture_output=True, text=True, check=False).stdout
    if status.count("running") < 2:
        subprocess.run([sys.executable, str(ROOT / "sim" / "simctl.py"), "up", "--cluster", CLUSTER], check=True)
    # Head -> worker trust as node_trust sets it up (key of its own, strict host keys).
    sh(HEAD_MGMT, f"test -f {KEY} || ssh-keygen -q -t ed25519 -N '' -f {KEY}")
    pub = sh(HEAD_MGMT, f"cat {KEY}.pub").strip()
    sh(WORKER_MGMT, f"grep -qF {shlex.quote(pub)} ~/.ssh/authorized_keys || echo {shlex.quote(pub)} >> ~/.ssh/authorized_keys")
    sh(HEAD_MGMT, f"ssh-keyscan -t ed25519 {WORKER_FABRIC} > {KNOWN} 2>/dev/null")


def raise_priority(nice):
    """The dev machine is shared: run this benchmark's own sim nodes and commands at a higher
    priority so the others' load disturbs the comparison less (the same for every method)."""
    if not nice:
        return
    os.setpriority(os.PRIO_PROCESS, 0, nice)
    for node in ("spark-head", "spark-worker-1"):
        out = subprocess.run(["podman", "--runtime", "runc", "top", f"{CLUSTER}-{node}", "hpid"],
                             capture_output=True, text=True, check=False).stdout.split()[1:]
        for pid in out:
            try:
                os.setpriority(os.PRIO_PROCESS, int(pid), nice)
            except (ProcessLookupError, PermissionError, ValueError):
                pass


def module_payload(extra=None):
    """Run the module once through Ansible, keeping its AnsiballZ file on the head to time it alone."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"), ANSIBLE_KEEP_REMOTE_FILES="1",
               ANSIBLE_PIPELINING="0", ANSIBLE_REMOTE_TMP="/home/spark/.ansible/bench-tmp")
    inv = f"{HEAD_MGMT},"
    sh(HEAD_MGMT, "rm -rf ~/.ansible/bench-tmp")
    args = dict({"src": SRC, "dest": [f"{WORKER}:{DST}"], "ssh_key": KEY, "known_hosts": KNOWN}, **(extra or {}))
    out = subprocess.run(["ansible", "all", "-i", inv, "-u", "spark", "--private-key", str(SIM_KEY),
                          "-e", "ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'",
                          "-e", "ansible_python_interpreter=/usr/bin/python3",
                          "-m", "dgxspark.vllm.triton_cache_sync", "-a", json.dumps(args)],
                         env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        sys.exit("module run failed:\n" + out.stdout + out.stderr)
    path = sh(HEAD_MGMT, "ls ~/.ansible/bench-tmp/*/AnsiballZ_triton_cache_sync.py").split()[0]
    kept = f"/home/spark/bench-module-{len(extra or {})}.py"
    sh(HEAD_MGMT, f"cp {path} {kept} && rm -rf ~/.ansible/bench-tmp")
    return kept


def cpu_ns():
    """CPU time used so far by both sim nodes (their cgroups): what a method costs, head and
    worker together, whatever else the shared machine is doing."""
    total = 0
    for node in ("spark-head", "spark-worker-1"):
        cid = subprocess.run(["podman", "--runtime", "runc", "inspect", "-f", "{{.Id}}", f"{CLUSTER}-{node}"],
                             capture_output=True, text=True, check=True).stdout.strip()
        for base in ("/sys/fs/cgroup/cpuacct/libpod_parent", "/sys/fs/cgroup/cpu,cpuacct/libpod_parent"):
            path = pathlib.Path(base) / f"libpod-{cid}" / "cpuacct.usage"
            if path.exists():
                total += int(path.read_text())
                break
        else:
            return None
    return total


def timed(cmd):
    """(wall seconds measured on the head, CPU seconds of both nodes) of cmd run on the head."""
    c0 = cpu_ns()
    out = sh(HEAD_MGMT, f"s=$(date +%s%N); {cmd} >/tmp/bench.out 2>&1; rc=$?; e=$(date +%s%N); "
                        f"echo $rc $(( (e - s) / 1000000 ))", check=False)
    c1 = cpu_ns()
    rc, ms = out.split()
    if rc != "0":
        sys.exit(f"failed: {cmd}\n" + sh(HEAD_MGMT, "tail -20 /tmp/bench.out"))
    return int(ms) / 1000, (c1 - c0) / 1e9 if c0 is not None and c1 is not None else float("nan")


def module_cmd(payload):
    check = (f"import json,sys; r=json.load(sys.stdin); "
             f"sys.exit(bool(r.get('failed')) or r['dest']['{WORKER}:{DST}']['verified_files'] != r['files'])")
    return f"python3 {payload} | python3 -c {shlex.quote(check)}"


def methods(payload, cached):
    rsync = f"rsync -a -e {shlex.quote(SSH_E)} {SRC}/ {WORKER}:{DST}/"
    manifest = (f"rsync -a -e {shlex.quote(SSH_E)} {SRC}/ {WORKER}:{DST}/ && cd {SRC} && "
                f"find . -type f -print0 | xargs -0 sha256sum > /tmp/bench.sha256 && "
                f"{SSH_E} {WORKER} 'cd {DST} && sha256sum -c --quiet' < /tmp/bench.sha256")
    return {
        "module (verify=content)": module_cmd(payload),
        "module (verify=content, digest_cache)": module_cmd(cached),
        "rsync -a": rsync,
        "rsync -a --checksum": rsync.replace("rsync -a", "rsync -a --checksum", 1),
        "rsync -a + sha256sum -c": manifest,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dirs", type=int, default=1250, help="kernel <hash>/ dirs (8 files each)")
    ap.add_argument("--launchers", type=int, default=150)
    ap.add_argument("--scale", type=float, default=3.3, help="size factor over the fixture's files")
    ap.add_argument("--keep", action="store_true", help="leave the generated trees on the nodes")
    ap.add_argument("--nice", type=int, default=-10, help="priority of the sim nodes and commands (0: leave)")
    a = ap.parse_args()
    ensure_cluster()
    raise_priority(a.nice)
    kernel_files, so = fixture_shape()
    spec = {"root": SRC, "dirs": a.dirs, "launchers": a.launchers, "scale": a.scale, "seed": 1,
            "kernel_files": kernel_files, "so": so}
    sh(HEAD_MGMT, f"rm -rf {SRC}")
    sh(WORKER_MGMT, f"rm -rf {DST}")
    shape = json.loads(sh(HEAD_MGMT, f"python3 -c {shlex.quote(GENERATE)} {shlex.quote(json.dumps(spec))}"))
    print(f"generated cache on the head: {shape['files']} files, {shape['bytes'] / 1e6:.0f} MB "
          f"({a.dirs} kernel dirs, {a.launchers} launcher dirs)", file=sys.stderr)
    cmds = methods(module_payload(), module_payload({"digest_cache": True}))
    times = collections.defaultdict(list)
    seed = 0
    for run in range(a.runs):
        for name, cmd in cmds.items():
            sh(WORKER_MGMT, f"rm -rf {DST}")
            if "digest_cache" not in name:  # only the cached variant keeps one; nothing else should ship it
                sh(HEAD_MGMT, f"rm -f {SRC}/.dgxspark-sync.digests")
            times[(name, "cold")].append(timed(cmd))
            times[(name, "no-op")].append(timed(cmd))
            seed += 1
            sh(HEAD_MGMT, f"python3 -c {shlex.quote(CHANGE)} {SRC} 0.01 {seed}")
            times[(name, "1% changed")].append(timed(cmd))
            print(f"run {run + 1}/{a.runs} {name}: " + ", ".join(
                f"{s} {times[(name, s)][-1][0]:.2f}s wall {times[(name, s)][-1][1]:.2f}s cpu"
                for s in ("cold", "no-op", "1% changed")), file=sys.stderr)
    floor = {name: statistics.median(timed(cmd)[0] for _ in range(max(3, a.runs))) for name, cmd in (
        ("a fresh SSH session (ssh worker true)", f"{SSH_E} {WORKER} true"),
        ("the same, starting python3 there", f"{SSH_E} {WORKER} python3 -c pass"),
        ("python3 starting here", "python3 -c pass"))}
    print(f"\n{shape['files']} files, {shape['bytes'] / 1e6:.0f} MB; median of {a.runs} runs "
          f"(ratio to rsync -a / to rsync -a --checksum)")
    print("\nWhat any method that checks the worker over SSH pays before doing any work "
          "(ratio to the no-op rsync -a --checksum):")
    cks_noop = statistics.median(v[0] for v in times[("rsync -a --checksum", "no-op")])
    for name, secs in floor.items():
        print(f"- {name}: {secs:.2f} s ({secs / cks_noop:.2f}×)")
    for idx, what in ((0, "wall seconds, measured on the head"), (1, "CPU seconds, head + worker (cgroup cpuacct)")):
        table(cmds, times, idx, what)
    if not a.keep:
        sh(HEAD_MGMT, f"rm -rf {SRC} ~/.ansible/bench-tmp /home/spark/bench-module-*.py")
        sh(WORKER_MGMT, f"rm -rf {DST}")


def table(cmds, times, idx, what):
    scen = ("cold", "no-op", "1% changed")
    med = {k: statistics.median(v[idx] for v in vals) for k, vals in times.items()}
    base = {s: med[("rsync -a", s)] for s in scen}
    cks = {s: med[("rsync -a --checksum", s)] for s in scen}
    print(f"\n{what}\n")
    print("| method | verifies content | cold sync | no-op re-sync | re-sync, 1% changed |")
    print("|---|---|---|---|---|")
    verifies = {"module (verify=content)": "yes (sha256, both sides)", "rsync -a": "no",
                "module (verify=content, digest_cache)": "yes (sha256; unchanged inode+ctime not re-read)",
                "rsync -a --checksum": "compares, no post-check", "rsync -a + sha256sum -c": "yes (after copy)"}
    for name in cmds:
        cells = [f"{med[(name, s)]:.2f} ({med[(name, s)] / base[s]:.2f}× / {med[(name, s)] / cks[s]:.2f}×)" for s in scen]
        print(f"| {name} | {verifies[name]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
