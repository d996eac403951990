# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse nvidia-smi output and classify a GPU's clock behaviour under load.

Pure Python (no Ansible imports) so it is unit-tested on real and documented outputs.
Classes: healthy, idle, throttled, wedged (see classify()).
"""

from __future__ import annotations

import re
import statistics

# Fields read with --query-gpu; the order is the order of the csv columns.
QUERY_FIELDS = (
    "index", "uuid", "name", "pstate", "clocks.sm", "clocks.max.sm", "power.draw", "power.limit",
    "utilization.gpu", "temperature.gpu", "memory.used",
)
# nvidia-smi prints these where a value does not exist on a GPU (GB10: memory.used, power.limit, ...).
_MISSING = {"[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "[insufficient permissions]", ""}
_UNIT = re.compile(r"^(-?\d+(?:\.\d+)?)\s*(?:MHz|W|%|MiB|C)?$")
_HEADER_UNIT = re.compile(r"\s*\[[^\]]*\]$")
# Clock event ("throttle") reasons that say nothing about a slowdown under load.
DEFAULT_IGNORED_REASONS = ("Idle", "Applications Clocks Setting", "Display Clock Setting")

HEALTHY, IDLE, THROTTLED, WEDGED = "healthy", "idle", "throttled", "wedged"


def parse_value(text):
    """One csv cell: None for [N/A] and friends, a number where it is one (units stripped), else the text."""
    text = text.strip()
    if text.lower() in _MISSING:
        return None
    match = _UNIT.match(text)
    if match:
        number = float(match.group(1))
        return int(number) if number.is_integer() and "." not in match.group(1) else number
    return text


def parse_query_csv(text, fields=None):
    """Rows of `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]` as dicts.

    With `fields` the output has no header (noheader) and columns are in that order; without, the
    first line is the header, whose unit suffixes (`clocks.sm [MHz]`) are dropped.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if fields is None:
        if not lines:
            raise ValueError("empty nvidia-smi csv output (no header)")
        fields = [_HEADER_UNIT.sub("", name.strip()) for name in lines.pop(0).split(",")]
    rows = []
    for line in lines:
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(fields):
            raise ValueError("nvidia-smi csv row has %d columns, expected %d: %r" % (len(cells), len(fields), line))
        row = {}
        for name, cell in zip(fields, cells):
            # A field may be repeated (an alias queried twice); the first one wins.
            row.setdefault(name, parse_value(cell))
        rows.append(row)
    return rows


_SECTION = re.compile(r"^(\s*)Clocks (?:Event|Throttle) Reasons\s*$")
_ENTRY = re.compile(r"^(\s*)(\S.*?)\s*:\s*(.*?)\s*$")


def parse_performance(text):
    """`nvidia-smi -q -d PERFORMANCE`: per GPU (in index order) its pstate and its clock event reasons.

    Returns a list of {"bus_id", "pstate", "reasons": {name: True/False/None}}; None where the driver
    prints N/A. Works with the older "Clocks Throttle Reasons" heading too.
    """
    gpus = []
    current = None
    section_indent = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("GPU "):
            current = {"bus_id": line[4:].strip(), "pstate": None, "reasons": {}}
            gpus.append(current)
            section_indent = None
            continue
        if current is None:
            continue
        indent = len(line) - len(line.lstrip())
        section = _SECTION.match(line)
        if section:
            section_indent = indent
            continue
        if section_indent is not None and indent <= section_indent:
            section_indent = None
        entry = _ENTRY.match(line)
        if not entry:
            continue
        key, value = entry.group(2), entry.group(3)
        if section_indent is not None:
            state = value.lower()
            current["reasons"][key] = True if state == "active" else False if state == "not active" else None
        elif key == "Performance State":
            current["pstate"] = None if value.lower() in _MISSING else value
    return gpus


def active_reasons(reasons, ignored=DEFAULT_IGNORED_REASONS):
    """Names of the active reasons that mean a slowdown."""
    return sorted(name for name, active in reasons.items() if active and name not in ignored)


def _median(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    middle = statistics.median(values)
    # An even count averages two readings: 611.0 reads 611, 1492.5 stays.
    return int(middle) if float(middle).is_integer() else round(middle, 2)


def classify(samples, reasons_seen, min_clock_mhz=1200, busy_util_pct=50, pinned_spread_mhz=15,
             wedged_max_power_w=30.0):
    """Classify one GPU from its samples taken together (one dict per sample, QUERY_FIELDS keys).

    - idle: the GPU was not busy (median utilization below busy_util_pct): clocks say nothing.
      A busy GPU's clock and power figures come from its samples at or above busy_util_pct.
    - healthy: busy and the median SM clock at or above min_clock_mhz.
    - throttled: busy, slow, and a slowdown reason was active (or the slow clock moves around
      without any reason: reported as throttled with reason "none reported").
    - wedged: busy, slow, no reason, the SM clock pinned to one value (spread within
      pinned_spread_mhz) at near-idle power (median at most wedged_max_power_w).
    Returns a dict with the class, the figures it was decided on, and why.
    """
    if not samples:
        raise ValueError("no samples to classify")
    if not any(s.get("clocks.sm") is not None for s in samples):
        raise ValueError("nvidia-smi reported no SM clock (clocks.sm is N/A)")
    util = _median([s.get("utilization.gpu") for s in samples])
    # A busy GPU is judged on its samples under load: a gap in the load reads idle (208 MHz, ~4.5 W on a
    # GB10) and would give a pinned clock a spread, and a low power, that it never had under load.
    judged = samples
    if util is not None and util >= busy_util_pct:
        judged = [s for s in samples if (s.get("utilization.gpu") or 0) >= busy_util_pct
                  and s.get("clocks.sm") is not None] or samples
    clocks = [s.get("clocks.sm") for s in judged if s.get("clocks.sm") is not None]
    figures = {
        "sm_clock_mhz": _median(clocks),
        "sm_clock_min_mhz": min(clocks),
        "sm_clock_max_mhz": max(clocks),
        "power_w": _median([s.get("power.draw") for s in judged]),
        "utilization_pct": util,
        "pstates": sorted({s.get("pstate") for s in samples if s.get("pstate")}),
        "reasons": sorted(reasons_seen),
        "samples": len(samples),
    }
    spread = figures["sm_clock_max_mhz"] - figures["sm_clock_min_mhz"]
    if util is None or util < busy_util_pct:
        state, why = IDLE, "utilization %s%% is below %s%%: the GPU was not under load, clocks not judged" % (util, busy_util_pct)
    elif figures["sm_clock_mhz"] >= min_clock_mhz:
        state, why = HEALTHY, "SM clock %s MHz under load (at least %s MHz)" % (figures["sm_clock_mhz"], min_clock_mhz)
    elif reasons_seen:
        state, why = THROTTLED, "SM clock %s MHz under load with active reason(s): %s" % (
            figures["sm_clock_mhz"], ", ".join(sorted(reasons_seen)))
    elif spread <= pinned_spread_mhz and (figures["power_w"] is None or figures["power_w"] <= wedged_max_power_w):
        state, why = WEDGED, ("SM clock pinned at %s MHz (spread %s MHz over %d samples) under %s%% load at %s W "
                              "with no active reason" % (figures["sm_clock_mhz"], spread, len(clocks), util, figures["power_w"]))
    else:
        state, why = THROTTLED, "SM clock %s MHz under load (varies %s-%s MHz, %s W), none reported" % (
            figures["sm_clock_mhz"], figures["sm_clock_min_mhz"], figures["sm_clock_max_mhz"], figures["power_w"])
        figures["reasons"] = ["none reported"]
    figures.update(state=state, why=why)
    return figures
