#!/usr/bin/env python3
"""What the GPU watch costs a node: its CPU per sample, reading NVML or nvidia-smi, beside a bare nvidia-smi call.

    scripts/bench/gpu_watch_cost.py [--seconds 60] [--interval 1] [--nvidia-smi nvidia-smi] [--capture FILE]

Runs the daemon the gpu_watch role installs (roles/gpu_watch/files, with its two module_utils files next
to it, as on a node) for --seconds at --interval on this machine, once reading NVML in its own process
(where libnvidia-ml loads) and once calling nvidia-smi, and in the same run as many bare
`nvidia-smi --query-gpu` calls (the baseline: what any nvidia-smi based watch pays at least). Prints CPU
ms per sample of each, the ratios, the readings of both sources, and CPU seconds per hour at the role's
default 10 s interval. With a real GPU the figures are measured; with the sim's nvidia-smi stand-in (a Python script)
they are modelled. --capture writes five samples of the watch's query (a parser fixture).
"""
import argparse
import json
import os
import pathlib
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "plugins" / "module_utils"))
import _gpu_watch as watch  # noqa: E402  pylint: disable=wrong-import-position

DEFAULT_INTERVAL = 10


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bare_calls(smi, count):
    argv = [smi, "--query-gpu=" + ",".join(watch.WATCH_FIELDS), "--format=csv,noheader,nounits"]
    before = children_cpu()
    for _ in range(count):
        subprocess.run(argv, capture_output=True, check=True)
    return (children_cpu() - before) / count


def proc_cpu(pid):
    """CPU seconds of a process and of the children it has waited for (/proc/PID/stat utime..cstime)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def samples_taken(prom):
    try:
        text = prom.read_text()
    except OSError:
        return 0
    return int(next((line.split()[-1] for line in text.splitlines()
                     if line.startswith("dgxspark_gpu_watch_samples_total")), 0))


def watch_run(smi, seconds, interval, tmp, source):
    lib = tmp / "lib"
    lib.mkdir()
    for src in (ROOT / "roles/gpu_watch/files/dgxspark_gpu_watch.py", ROOT / "plugins/module_utils/_gpu_watch.py",
                ROOT / "plugins/module_utils/_nvidia_smi.py"):
        shutil.copy(src, lib)
    cfg = {"node": "bench", "interval": interval, "nvidia_smi": smi, "source": source, "state_file": str(tmp / "state.json"),
           "textfile": str(tmp / "watch.prom"), "thresholds": {"wedge_seconds": 10, "stuck_seconds": 10}}
    (tmp / "cfg.json").write_text(json.dumps(cfg))
    proc = subprocess.Popen([sys.executable, str(lib / "dgxspark_gpu_watch.py"), str(tmp / "cfg.json")],
                            stdout=subprocess.DEVNULL)
    # Steady state only: from the first sample written (Python's start-up is paid once per boot).
    while samples_taken(tmp / "watch.prom") < 1:
        if proc.poll() is not None:
            return None, 0, None  # NVML cannot be loaded here
        time.sleep(0.05)
    first, cpu0 = samples_taken(tmp / "watch.prom"), proc_cpu(proc.pid)
    time.sleep(seconds)
    last, cpu1 = samples_taken(tmp / "watch.prom"), proc_cpu(proc.pid)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    samples = last - first
    return (cpu1 - cpu0) / samples, samples, json.loads((tmp / "state.json").read_text())


def state_findings(state, index):
    return [f["finding"] for f in state["findings"] if f["gpu"] == index]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--interval", type=float, default=1)
    ap.add_argument("--nvidia-smi", default="nvidia-smi")
    ap.add_argument("--capture", help="write five samples of the watch's query here")
    args = ap.parse_args()
    smi = shutil.which(args.nvidia_smi) or sys.exit(f"no {args.nvidia_smi} on this machine")
    with open(smi, "rb") as handle:
        kind = "modelled (nvidia-smi is a stand-in script)" if handle.read(2) == b"#!" else "measured"
    if args.capture:
        argv = [smi, "--query-gpu=" + ",".join(watch.WATCH_FIELDS), "--format=csv,noheader,nounits"]
        rows = []
        for _ in range(5):
            rows.append(subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip())
            time.sleep(1)
        pathlib.Path(args.capture).write_text("\n".join(rows) + "\n")
    runs = {}
    for source in ("nvml", "nvidia-smi"):
        with tempfile.TemporaryDirectory() as tmp:
            runs[source] = watch_run(smi, args.seconds, args.interval, pathlib.Path(tmp), source)
    samples = runs["nvidia-smi"][1]
    # The baseline, as many calls as the watch made, right after it (the same machine state).
    floor = statistics.median(bare_calls(smi, max(1, samples // 3)) for _ in range(3))
    print(f"GPU watch cost, {kind}: {args.seconds:.0f} s per run, samples {args.interval} s apart")
    print("| what | samples | CPU ms per sample | ratio to bare nvidia-smi | CPU s per hour at 10 s |")
    print("|---|---:|---:|---:|---:|")
    print(f"| bare nvidia-smi query (baseline, median of 3 x {max(1, samples // 3)} calls) | - | {floor * 1000:.2f} | 1.00 "
          f"| {floor * 3600 / DEFAULT_INTERVAL:.2f} |")
    for source, (per_sample, count, state) in runs.items():
        if per_sample is None:
            print(f"| the watch reading {source} | - | (NVML cannot be loaded here) | - | - |")
            continue
        print(f"| the watch reading {source} | {count} | {per_sample * 1000:.2f} | {per_sample / floor:.3f} "
              f"| {per_sample * 3600 / DEFAULT_INTERVAL:.2f} |")
    for source, (_, _, state) in runs.items():
        for index, gpu in (state or {}).get("gpus", {}).items():
            print(f"{source}: GPU {index} {gpu['name']} judged {gpu.get('state', 'window not full')}: {gpu['sm_clock_mhz']} MHz, "
                  f"{gpu['power_w']} W, {gpu['utilization_pct']}%, pstate {gpu['pstate']}, reasons {gpu['reasons'] or 'none'}, "
                  f"findings {state_findings(state, index) or 'none'}")


if __name__ == "__main__":
    main()
