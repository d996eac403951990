# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU watch's judgement: a window of samples per GPU, the findings and their Prometheus text.

Pure Python (no Ansible imports): the gpu_watch role installs this file next to its daemon on every
node, and the unit tests feed it samples. Two findings, the field report's silent failures:

- wedged: over the whole wedge window the GPU is busy with its SM clock pinned to one value at near-idle
  power and no slowdown reason (classify() of _nvidia_smi says wedged). Only a full AC power-cycle clears it.
- busy_low_power: for the whole stuck window the GPU reads busy at near-idle power with no slowdown
  reason, whatever its clock.
  On one node while another node's GPU is idle, that is a rank spinning in a collective the other rank
  never joined (a stuck NCCL collective, e.g. after a Triton cache desync): diagnose and the alert rule
  compare the nodes, a single node cannot.
"""

from __future__ import annotations

import ctypes

try:  # as a collection's module_utils
    from ansible_collections.dgxspark.vllm.plugins.module_utils import _nvidia_smi as smi
except ImportError:  # installed on a node next to the daemon
    import _nvidia_smi as smi  # type: ignore[no-redef]

# Read with --query-gpu; clocks_event_reasons.active is the bit mask of NVML's clock event reasons.
WATCH_FIELDS = ("index", "uuid", "name", "pstate", "clocks.sm", "power.draw", "utilization.gpu",
                "clocks_event_reasons.active")
# Drivers before the rename (R535 and older) call the same mask clocks_throttle_reasons.active.
OLD_REASONS_FIELD = "clocks_throttle_reasons.active"

# NVML's clock event reason bits (nvml.h, nvmlClocksEventReason*), named as `nvidia-smi -q` names them.
REASON_BITS = (
    (0x1, "Idle"), (0x2, "Applications Clocks Setting"), (0x4, "SW Power Cap"), (0x8, "HW Slowdown"),
    (0x10, "Sync Boost"), (0x20, "SW Thermal Slowdown"), (0x40, "HW Thermal Slowdown"),
    (0x80, "HW Power Brake Slowdown"), (0x100, "Display Clock Setting"),
)

DEFAULTS = {
    "wedge_seconds": 60,        # a wedge must hold this long under load
    "stuck_seconds": 120,       # busy at low power this long
    "busy_util_pct": 50,
    "min_clock_mhz": 1200,
    "pinned_spread_mhz": 15,
    "wedged_max_power_w": 30.0,
    "stuck_util_pct": 90,
}


def reasons_from_mask(mask):
    """Names of the active clock event reasons in NVML's bit mask (an int or nvidia-smi's "0x...")."""
    if mask is None:
        return []
    if isinstance(mask, str):
        mask = int(mask, 16)
    return [name for bit, name in REASON_BITS if mask & bit]


class NvmlError(Exception):
    """NVML is not there or refused to start (no driver, no GPU)."""


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class NvmlReader:
    """The same sample as the nvidia-smi query, read from NVML (libnvidia-ml, which nvidia-smi itself uses)
    in this process: no process start and no NVML initialisation per sample."""

    NVML_CLOCK_SM = 1

    def __init__(self, lib=None):
        if lib is None:
            try:
                lib = ctypes.CDLL("libnvidia-ml.so.1")
            except OSError as exc:
                raise NvmlError("libnvidia-ml.so.1 not found: %s" % exc) from exc
        self.lib = lib
        rc = lib.nvmlInit_v2()
        if rc != 0:
            raise NvmlError("nvmlInit_v2 returned %d" % rc)
        # Drivers before R535 know only the older name of the same call.
        self.reasons_call = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            getattr(lib, "nvmlDeviceGetCurrentClocksThrottleReasons")

    def _get(self, call, handle, ctype, *extra):
        value = ctype()
        return value.value if call(handle, *extra, ctypes.byref(value)) == 0 else None

    def _text(self, call, handle):
        buf = ctypes.create_string_buffer(96)
        return buf.value.decode() if call(handle, buf, ctypes.c_uint(96)) == 0 else None

    def sample(self):
        """{gpu index: sample} with the keys parse_sample() gives."""
        count = ctypes.c_uint()
        if self.lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            raise NvmlError("nvmlDeviceGetCount_v2 failed")
        gpus = {}
        for index in range(count.value):
            handle = ctypes.c_void_p()
            if self.lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(handle)) != 0:
                continue
            lib = self.lib
            pstate = self._get(lib.nvmlDeviceGetPerformanceState, handle, ctypes.c_int)
            power = self._get(lib.nvmlDeviceGetPowerUsage, handle, ctypes.c_uint)
            util = _Utilization()
            mask = self._get(self.reasons_call, handle, ctypes.c_ulonglong)
            gpus[str(index)] = {
                "index": index, "uuid": self._text(lib.nvmlDeviceGetUUID, handle),
                "name": self._text(lib.nvmlDeviceGetName, handle),
                "pstate": None if pstate is None or pstate > 15 else "P%d" % pstate,
                "clocks.sm": self._get(lib.nvmlDeviceGetClockInfo, handle, ctypes.c_uint, ctypes.c_int(self.NVML_CLOCK_SM)),
                "power.draw": None if power is None else round(power / 1000.0, 2),
                "utilization.gpu": util.gpu if lib.nvmlDeviceGetUtilizationRates(handle, ctypes.byref(util)) == 0 else None,
                "reasons": smi.active_reasons({name: True for name in reasons_from_mask(mask)}),
            }
        return gpus


def parse_sample(text, fields=WATCH_FIELDS):
    """One sample of every GPU from `nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits`.

    Returns {gpu index: sample}, each sample with the QUERY_FIELDS-style keys and "reasons" (slowdown
    reasons only: Idle and the clock settings say nothing about a slowdown).
    """
    gpus = {}
    for row in smi.parse_query_csv(text, fields=list(fields)):
        mask = row.get("clocks_event_reasons.active", row.get(OLD_REASONS_FIELD))
        row["reasons"] = smi.active_reasons({name: True for name in reasons_from_mask(mask)})
        gpus[str(row["index"])] = row
    return gpus


class Window:
    """The samples of the last `span` seconds of each GPU, and what they say."""

    def __init__(self, **settings):
        unknown = set(settings) - set(DEFAULTS)
        if unknown:
            raise ValueError("unknown watch settings: %s" % ", ".join(sorted(unknown)))
        # Settings may come as text (a JSON file written by a template): numbers here.
        self.settings = {k: _number(v) for k, v in dict(DEFAULTS, **settings).items()}
        self.span = max(self.settings["wedge_seconds"], self.settings["stuck_seconds"])
        self.samples = {}   # gpu index -> [(time, sample)], oldest first
        self.since = {}     # (gpu, finding) -> time it was first raised

    def add(self, now, gpus):
        for index, sample in gpus.items():
            series = self.samples.setdefault(index, [])
            series.append((now, sample))
            # Keep one sample older than the span: it proves the span is covered.
            while len(series) > 2 and series[1][0] <= now - self.span:
                series.pop(0)
        for index in list(self.samples):
            if index not in gpus:  # a GPU that stopped answering is judged afresh when it is back
                del self.samples[index]

    def _covering(self, index, now, seconds):
        """The samples of the last `seconds`, or None while the series does not reach that far back."""
        series = self.samples.get(index, [])
        if not series or series[0][0] > now - seconds:
            return None
        start = max(i for i, entry in enumerate(series) if entry[0] <= now - seconds)
        return [entry[1] for entry in series[start:]]

    def judge(self, now):
        """Per GPU: the last sample's figures, the window's class and the findings (with their age).

        Returns {"gpus": {index: {...}}, "findings": [{"gpu", "finding", "since", "why"}]}.
        """
        cfg = self.settings
        report = {"gpus": {}, "findings": []}
        for index, series in sorted(self.samples.items()):
            last = series[-1][1]
            gpu = {
                "name": last.get("name"), "uuid": last.get("uuid"), "sm_clock_mhz": last.get("clocks.sm"),
                "power_w": last.get("power.draw"), "utilization_pct": last.get("utilization.gpu"),
                "pstate": last.get("pstate"), "reasons": last.get("reasons", []), "sampled_at": series[-1][0],
            }
            found = {}
            window = self._covering(index, now, cfg["wedge_seconds"])
            if window:
                verdict = smi.classify(
                    window, {r for s in window for r in s.get("reasons", [])}, min_clock_mhz=cfg["min_clock_mhz"],
                    busy_util_pct=cfg["busy_util_pct"], pinned_spread_mhz=cfg["pinned_spread_mhz"],
                    wedged_max_power_w=cfg["wedged_max_power_w"])
                gpu["state"] = verdict["state"]
                if verdict["state"] == smi.WEDGED:
                    found["wedged"] = "%s for %s s" % (verdict["why"], cfg["wedge_seconds"])
            stuck = self._covering(index, now, cfg["stuck_seconds"])
            if stuck and all(_busy_low_power(s, cfg) for s in stuck):
                found["busy_low_power"] = "busy (%s%%) at %s W for %s s or more" % (
                    last.get("utilization.gpu"), last.get("power.draw"), cfg["stuck_seconds"])
            for name in ("wedged", "busy_low_power"):
                key = (index, name)
                if name in found:
                    since = self.since.setdefault(key, now)
                    report["findings"].append({"gpu": index, "finding": name, "since": since, "why": found[name]})
                else:
                    self.since.pop(key, None)
            gpu["findings"] = sorted(found)
            report["gpus"][index] = gpu
        return report


def _number(value):
    number = float(value)
    return int(number) if number.is_integer() else number


def _busy_low_power(sample, cfg):
    util, power = sample.get("utilization.gpu"), sample.get("power.draw")
    # A slowdown reason explains low power (throttled); a spinning rank has none.
    return (util is not None and power is not None and not sample.get("reasons")
            and util >= cfg["stuck_util_pct"] and power <= cfg["wedged_max_power_w"])


def _labels(base, **more):
    pairs = dict(base, **more)
    return "{%s}" % ",".join('%s="%s"' % (k, str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n"))
                             for k, v in sorted(pairs.items()))


def prometheus_text(report, labels, samples_total, now):
    """The report in Prometheus' text format (node_exporter's textfile collector reads it as it is)."""
    metrics = (
        ("dgxspark_gpu_sm_clock_mhz", "gauge", "SM clock at the last sample (MHz).", "sm_clock_mhz"),
        ("dgxspark_gpu_power_watts", "gauge", "Power draw at the last sample (W).", "power_w"),
        ("dgxspark_gpu_utilization_percent", "gauge", "GPU utilization at the last sample (%).", "utilization_pct"),
    )
    lines = []
    gpus = report["gpus"]
    for name, kind, help_text, key in metrics:
        lines += ["# HELP %s %s" % (name, help_text), "# TYPE %s %s" % (name, kind)]
        lines += ["%s%s %s" % (name, _labels(labels, gpu=i), g[key]) for i, g in gpus.items() if g[key] is not None]
    lines += ["# HELP dgxspark_gpu_slowdown_reasons_active Active clock slowdown reasons at the last sample.",
              "# TYPE dgxspark_gpu_slowdown_reasons_active gauge"]
    lines += ["dgxspark_gpu_slowdown_reasons_active%s %d" % (_labels(labels, gpu=i), len(g["reasons"])) for i, g in gpus.items()]
    for finding, help_text in (
            ("wedged", "1 while the SM clock is pinned under load with no reason (wedge; only an AC power-cycle clears it)."),
            ("busy_low_power", "1 while the GPU is busy at near-idle power (with another node idle: a stuck collective).")):
        name = "dgxspark_gpu_%s" % finding
        lines += ["# HELP %s %s" % (name, help_text), "# TYPE %s gauge" % name]
        lines += ["%s%s %d" % (name, _labels(labels, gpu=i), int(finding in g["findings"])) for i, g in gpus.items()]
    lines += ["# HELP dgxspark_gpu_watch_samples_total Samples taken since the watch started.",
              "# TYPE dgxspark_gpu_watch_samples_total counter",
              "dgxspark_gpu_watch_samples_total%s %d" % (_labels(labels), samples_total),
              "# HELP dgxspark_gpu_watch_last_sample_timestamp_seconds When the last sample was taken.",
              "# TYPE dgxspark_gpu_watch_last_sample_timestamp_seconds gauge",
              "dgxspark_gpu_watch_last_sample_timestamp_seconds%s %.3f" % (_labels(labels), now)]
    return "\n".join(lines) + "\n"


def cross_node(states):
    """What the nodes' watch states say together: {node: state} -> list of sentences.

    A wedge is named per node; a stuck collective when one node's GPU is busy at low power while
    another node's GPU is idle (below the busy threshold) at the same time.
    """
    out = []
    # Idle by each node's own threshold (the settings its watch ran with).
    idle = sorted(n for n, s in states.items()
                  if s and any((g.get("utilization_pct") or 0) < s.get("settings", {}).get("busy_util_pct", DEFAULTS["busy_util_pct"])
                               for g in s.get("gpus", {}).values()))
    for node, state in sorted(states.items()):
        for f in (state or {}).get("findings", []):
            if f["finding"] == "wedged":
                out.append("Wedged GPU clock on %s (GPU %s): %s. Only a full AC power-cycle clears it." % (node, f["gpu"], f["why"]))
            elif f["finding"] == "busy_low_power":
                others = [n for n in idle if n != node]
                if others and not any(x["finding"] == "wedged" for x in state["findings"]):
                    out.append("Stuck collective: %s GPU %s %s while %s idle: a rank waits in a collective the other "
                               "never joined. Restart the engine (and sync the Triton cache)." % (
                                   node, f["gpu"], f["why"], " and ".join(others) + (" is" if len(others) == 1 else " are")))
    return out
