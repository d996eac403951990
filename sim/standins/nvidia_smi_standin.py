#!/usr/bin/python3
"""Stand-in for nvidia-smi on a simulated DGX Spark node (sim only; installed as nvidia-smi).

Prints GB10-like values in nvidia-smi's real formats: the default table, `-L`,
`--query-gpu=FIELDS --format=csv[,noheader][,nounits]`, `--query-compute-apps`,
and `-q [-d PERFORMANCE]`. What it reports follows `gpu_state` in
/etc/dgxspark-sim/scenario.json (healthy, idle, throttled, wedged) and whether a
load runs: a process holding a context of the stand-in libcuda (sim/standins/libcuda_standin.c, which
gpu_health's built-in load opens as it opens the real driver) leaves /tmp/dgxspark-sim-gpu-load.<pid>, and the sim's
engine touches /etc/dgxspark-sim/engine-busy while it decodes.
Unloaded, every state reads idle (208 MHz, P8, ~4.5 W). Loaded:
  healthy    ~2400 MHz, 35-90 W, no reason
  idle       the load does not reach the GPU: idle values
  throttled  480-860 MHz, moving, HW Slowdown + HW Thermal Slowdown active
  wedged     611 MHz exactly, ~10 W, 95% util, no reason (the seed's power wedge)
  spinning   loaded or not: ~96% util at ~15 W, clock moving, no reason (a rank spinning in a
             collective the other rank never joined: an NCCL deadlock looks like this)
Values the GB10 does not report read [N/A] (memory.used, power.limit, clocks.max.memory).
"""
import glob
import json
import os
import random
import sys
import time

SCENARIO = "/etc/dgxspark-sim/scenario.json"
MARKERS = "/tmp/dgxspark-sim-gpu-load.*"
# Touched by the sim's engine (sim/engine/plugin) while it decodes: the GPU is busy serving.
ENGINE_BUSY = "/etc/dgxspark-sim/engine-busy"
NA = "[N/A]"
BUS_ID = "0000000F:01:00.0"
UUID = "GPU-5d0c3e2a-51c6-4f0e-9a31-6b1f2e7c9d10"
DRIVER = "580.95.05"
REASONS = ["Idle", "Applications Clocks Setting", "SW Power Cap", "HW Slowdown", "HW Thermal Slowdown",
           "HW Power Brake Slowdown", "Sync Boost", "SW Thermal Slowdown", "Display Clock Setting"]
REASON_BITS = {"Idle": 0x1, "Applications Clocks Setting": 0x2, "SW Power Cap": 0x4, "HW Slowdown": 0x8,
               "Sync Boost": 0x10, "SW Thermal Slowdown": 0x20, "HW Thermal Slowdown": 0x40,
               "HW Power Brake Slowdown": 0x80, "Display Clock Setting": 0x100}


def gpu_state():
    try:
        with open(SCENARIO) as handle:
            return json.load(handle).get("gpu_state", "healthy")
    except (OSError, ValueError):
        return "healthy"


def loaded():
    """A live process with a stand-in CUDA context, or the sim's engine decoding (it touches ENGINE_BUSY every step)."""
    for marker in glob.glob(MARKERS):
        if os.path.exists("/proc/" + marker.rsplit(".", 1)[1]):
            return True
    try:
        return time.time() - os.stat(ENGINE_BUSY).st_mtime < 2
    except OSError:
        return False


def reading():
    """The GPU's values now: (sm clock MHz, power W, util %, pstate, temperature C, active reasons)."""
    state = gpu_state()
    if state == "spinning":
        return random.randrange(1960, 2100), round(random.uniform(14.2, 15.8), 2), random.choice([95, 96, 97]), "P0", 45, []
    if not loaded() or state == "idle":
        return 208, round(random.uniform(4.3, 4.7), 2), 0, "P8", 38, ["Idle"]
    if state == "wedged":
        return 611, round(random.uniform(9.8, 10.4), 2), random.choice([95, 95, 96]), "P0", 41, []
    if state == "throttled":
        return (random.randrange(480, 861), round(random.uniform(18, 32), 2), 99, "P0", 92,
                ["HW Slowdown", "HW Thermal Slowdown"])
    return random.randrange(2390, 2421), round(random.uniform(35, 90), 2), random.choice([98, 99, 100]), "P0", 63, []


def fields_of(clock, power, util, pstate, temp, reasons):
    mask = "0x%016x" % sum(REASON_BITS[r] for r in reasons)
    return {
        "index": ("0", ""), "uuid": (UUID, ""), "name": ("NVIDIA GB10", ""), "pstate": (pstate, ""),
        "driver_version": (DRIVER, ""), "pci.bus_id": (BUS_ID, ""),
        "clocks.sm": (str(clock), " MHz"), "clocks.current.sm": (str(clock), " MHz"),
        "clocks.gr": (str(clock), " MHz"), "clocks.current.graphics": (str(clock), " MHz"),
        "clocks.max.sm": ("3003", " MHz"), "clocks.max.graphics": ("3003", " MHz"),
        "clocks.max.memory": (NA, ""), "clocks.mem": (NA, ""), "clocks.current.memory": (NA, ""),
        "clocks.applications.graphics": ("2418", " MHz"),
        "power.draw": ("%.2f" % power, " W"), "power.limit": (NA, ""),
        "utilization.gpu": (str(util), " %"), "temperature.gpu": (str(temp), ""),
        "memory.used": (NA, ""), "memory.total": (NA, ""), "memory.free": (NA, ""),
        "clocks_event_reasons.active": (mask, ""), "clocks_throttle_reasons.active": (mask, ""),
    }


HEADER_UNITS = {" MHz": " [MHz]", " W": " [W]", " %": " [%]"}


def query(args):
    spec = next(a for a in args if a.startswith("--query-gpu="))[len("--query-gpu="):]
    fmt = next((a for a in args if a.startswith("--format=")), "--format=")[len("--format="):].split(",")
    if "csv" not in fmt:
        sys.stderr.write("Missing or invalid format option. Please use --format=csv[,noheader][,nounits]\n")
        return 2
    names = [n.strip() for n in spec.split(",") if n.strip()]
    values = fields_of(*reading())
    for name in names:
        if name not in values:
            print('Field "%s" is not a valid field to query.' % name)
            return 2
    if "noheader" not in fmt:
        print(", ".join(name + ("" if "nounits" in fmt else HEADER_UNITS.get(values[name][1], "")) for name in names))
    cells = []
    for name in names:
        value, unit = values[name]
        cells.append(value if value == NA or "nounits" in fmt else value + unit)
    print(", ".join(cells))
    return 0


def q_performance(full):
    clock, power, util, pstate, temp, reasons = reading()
    now = time.strftime("%a %b %d %H:%M:%S %Y")
    lines = ["", "==============NVSMI LOG==============", "",
             "%-55s: %s" % ("Timestamp", now), "%-55s: %s" % ("Driver Version", DRIVER),
             "%-55s: %s" % ("CUDA Version", "13.0"), "", "%-55s: %s" % ("Attached GPUs", 1), "GPU " + BUS_ID]
    if full:
        lines.append("    %-51s: %s" % ("Product Name", "NVIDIA GB10"))
    lines.append("    %-51s: %s" % ("Performance State", pstate))
    lines.append("    Clocks Event Reasons")
    for name in REASONS:
        indent = "            " if name in ("HW Thermal Slowdown", "HW Power Brake Slowdown") else "        "
        lines.append("%s%-*s: %s" % (indent, 55 - len(indent), name, "Active" if name in reasons else "Not Active"))
    lines.append("    Clocks Event Reasons Counters")
    for name in ("SW Power Capping", "Sync Boost", "SW Thermal Slowdown", "HW Thermal Slowdown", "HW Power Braking"):
        lines.append("        %-47s: %s" % (name, "N/A"))
    lines.append("    %-51s: %s" % ("Sparse Operation Mode", "N/A"))
    if full:
        lines += ["    Clocks", "        %-47s: %s MHz" % ("Graphics", clock), "        %-47s: %s MHz" % ("SM", clock),
                  "        %-47s: %s" % ("Memory", "N/A"), "    GPU Power Readings",
                  "        %-47s: %.2f W" % ("Instantaneous Power Draw", power),
                  "        %-47s: %s" % ("Current Power Limit", "N/A"),
                  "    Utilization", "        %-47s: %s %%" % ("GPU", util), "    %-51s: %s C" % ("GPU Current Temp", temp)]
    print("\n".join(lines) + "\n")
    return 0


def table():
    clock, power, util, pstate, temp, _ = reading()
    print(time.strftime("%a %b %d %H:%M:%S %Y"))
    print("""+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI %-22s Driver Version: %-14s CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA GB10                    On  |   %s On |                  N/A |
| N/A   %2dC    %-3s           %4.1fW /  N/A  | Not Supported          |   %3d%%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+""" % (
        DRIVER, DRIVER, BUS_ID, temp, pstate, power, util))
    del clock
    return 0


def main(args):
    if any(a.startswith("--query-gpu=") for a in args):
        return query(args)
    if any(a.startswith("--query-compute-apps=") for a in args):
        return 0  # no process uses the stand-in GPU
    if "-L" in args or "--list-gpus" in args:
        print("GPU 0: NVIDIA GB10 (UUID: %s)" % UUID)
        return 0
    if "-q" in args or "--query" in args:
        return q_performance(full="-d" not in args)
    if not args:
        return table()
    sys.stderr.write("nvidia-smi stand-in: unsupported arguments %s\n" % " ".join(args))
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
