#!/usr/bin/env python3
"""What gpu_health's built-in load (plugins/module_utils/_gpu_burn.py: PTX through libcuda, no image, no
toolkit) does to a real NVIDIA GPU, measured side by side with the same GPU idle in one run.

    python3 scripts/bench/gpu_builtin_load.py --seconds 20

Needs a node with the NVIDIA driver (libcuda.so.1 and nvidia-smi); nothing else. Samples
`nvidia-smi --query-gpu` every --interval seconds: first idle, then under the load, and prints the medians
of utilization, SM clock and power, the seconds from the load's start to the first busy sample, and what
gpu_health's classifier (module_utils/_nvidia_smi) would call the GPU from each half.
"""

import argparse
import importlib.util
import pathlib
import statistics
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIELDS = "utilization.gpu,clocks.sm,power.draw,name,driver_version"


def load_burn():
    # By path: the module is standard library only, so no Ansible is needed where the GPU is.
    spec = importlib.util.spec_from_file_location("gpu_burn", ROOT / "plugins/module_utils/_gpu_burn.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sample():
    out = subprocess.run(["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True, timeout=30).stdout
    util, clock, power, name, driver = [v.strip() for v in out.splitlines()[0].split(",")]
    return dict(t=time.monotonic(), util=float(util), clock=float(clock), power=float(power), name=name,
                driver=driver)


def window(seconds, interval):
    rows, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        rows.append(sample())
        time.sleep(interval)
    return rows


def medians(rows):
    return {k: statistics.median(r[k] for r in rows) for k in ("util", "clock", "power")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0, help="seconds of each half (idle, loaded)")
    ap.add_argument("--interval", type=float, default=0.5)
    args = ap.parse_args()
    burn = load_burn()
    idle = window(args.seconds, args.interval)
    result, started = {}, time.monotonic()
    thread = threading.Thread(target=lambda: result.update(kernels=burn.burn(args.seconds + 2)))
    thread.start()
    loaded = window(args.seconds, args.interval)
    thread.join()
    busy = next((r["t"] - started for r in loaded if r["util"] >= 50), None)
    first = idle[0]
    print(f"GPU: {first['name']}, driver {first['driver']}; {len(idle)} idle and {len(loaded)} loaded samples, "
          f"{args.interval} s apart (measured)")
    print("| what | util % (median) | SM clock MHz (median) | power W (median) |")
    print("|---|---:|---:|---:|")
    for label, rows in (("idle (baseline)", idle), ("built-in load", loaded)):
        m = medians(rows)
        print(f"| {label} | {m['util']:.0f} | {m['clock']:.0f} | {m['power']:.1f} |")
    print(f"first busy sample (util >= 50%) {busy:.2f} s after the load started" if busy is not None
          else "the GPU never read busy")
    print(f"kernels run per GPU: {result.get('kernels')}")
    return 0 if busy is not None else 1


if __name__ == "__main__":
    sys.exit(main())
