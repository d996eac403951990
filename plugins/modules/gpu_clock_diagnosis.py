#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_clock_diagnosis
short_description: Classify each NVIDIA GPU of a node as healthy, idle, throttled or wedged from its clocks under a short load
version_added: 0.1.0
description:
  - Optionally loads the GPUs (its own load through the CUDA driver, O(driver_load_seconds), or a command of the
    caller's, O(load_command)), waits until the GPUs are busy, then samples
    C(nvidia-smi --query-gpu=... --format=csv,noheader,nounits) and C(nvidia-smi -q -d PERFORMANCE) several times,
    and stops the load.
  - Each GPU is classified from the samples taken together. C(idle) means it was not busy, so its clocks say nothing;
    C(healthy) means the median SM clock under load reached O(min_clock_mhz); C(throttled) means it did not and a clock event
    (throttle) reason was active, or the slow clock moved without any reason; C(wedged) means it did not, no reason was active,
    the SM clock sat at one value (spread within O(pinned_spread_mhz)) and the power stayed near idle (at most O(wedged_max_power_w)).
    A wedged DGX Spark GPU (e.g. pinned at 611 MHz, about 10 W, 95% utilization) is cleared only by a full AC power-cycle.
  - Fields that the GPU does not report (C([N/A]), e.g. C(memory.used) and C(power.limit) on GB10) come back as null.
  - Reads only; it changes nothing on the node (the load command is the caller's).
author:
  - dgxspark.vllm contributors (@dgxspark)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes
attributes:
  check_mode:
    details: Runs the same diagnosis in check mode, since it changes nothing (the load command, if given, runs too).
options:
  load_command:
    description:
      - Command (argv) that loads the GPUs while the clocks are sampled, e.g. a short matmul loop in the serving image.
      - Without it (and without O(driver_load_seconds)) the GPUs are sampled as they are (useful while a workload runs).
      - It is stopped (its process group is terminated) once the samples are taken.
    type: list
    elements: str
    default: []
  driver_load_seconds:
    description:
      - Load every GPU for this many seconds with the module's own load, through the CUDA driver alone (C(libcuda), which
        the NVIDIA driver installs). The load is a chain of fused multiply-adds in PTX that the driver compiles for the GPU
        it finds. No CUDA toolkit, Python package or container image is needed, so it runs on a bare node.
      - 0 means no built-in load. Ignored when O(load_command) is given.
    type: float
    default: 0
    version_added: 0.2.0
  samples:
    description: Number of samples per GPU, taken once the GPUs are busy.
    type: int
    default: 5
  interval:
    description: Seconds between samples.
    type: float
    default: 1.0
  load_ready_timeout:
    description:
      - Seconds to wait for the load to make every GPU busy (container start, CUDA init) before sampling anyway.
      - The wait also ends when the load command exits.
    type: float
    default: 90.0
  busy_util_pct:
    description: Median GPU utilization (%) from which a GPU counts as under load.
    type: int
    default: 50
  min_clock_mhz:
    description: Median SM clock under load (MHz) from which a GPU is healthy (GB10 runs about 2400 MHz under load).
    type: int
    default: 1200
  pinned_spread_mhz:
    description: Largest spread (max - min, MHz) of the SM clock over the samples that still counts as one pinned value.
    type: int
    default: 15
  wedged_max_power_w:
    description: Highest median power (W) under load that counts as near idle for a wedged GPU.
    type: float
    default: 30.0
  ignored_reasons:
    description: Clock event reasons that do not mean a slowdown (as named by C(nvidia-smi -q -d PERFORMANCE)).
    type: list
    elements: str
    default: [Idle, Applications Clocks Setting, Display Clock Setting]
  nvidia_smi:
    description: The nvidia-smi command.
    type: str
    default: nvidia-smi
  watch_state:
    description:
      - The state file of the node's GPU watch (role C(dgxspark.vllm.gpu_watch)). Without a load command, a state whose
        every GPU has a verdict over the watch's window and that is younger than O(watch_max_age) is taken instead of
        sampling, because the watch has sampled these GPUs for longer, while they served, with the same classifier.
      - A missing, unreadable, incomplete or stale state is ignored (the GPUs are sampled).
    type: str
    default: ""
  watch_max_age:
    description: Seconds since the watch's last sample after which its state is stale; 0 means three of its own intervals.
    type: float
    default: 0
notes:
  - Run it while nothing else uses the GPUs (vLLM stopped) when a load is given, or the samples mix both workloads.
"""

EXAMPLES = r"""
- name: Classify the GPU clocks under a 30 s matmul burn in the serving image
  dgxspark.vllm.gpu_clock_diagnosis:
    load_command:
      - docker
      - run
      - --rm
      - --gpus
      - all
      - --entrypoint
      - python3
      - vllm-node-minimax-m3-b12x:latest
      - -c
      - |
        import time, torch
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        end = time.time() + 30
        while time.time() < end:
            a @ a
            torch.cuda.synchronize()
    min_clock_mhz: 1500
  become: true
  register: gpu_clocks

- name: Sample the clocks as they are, without a load
  dgxspark.vllm.gpu_clock_diagnosis:
    samples: 3
"""

RETURN = r"""
gpus:
  description: One entry per GPU, in index order.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: GPU index.
      type: int
      sample: 0
    name:
      description: Product name.
      type: str
      sample: NVIDIA GB10
    state:
      description: C(healthy), C(idle), C(throttled) or C(wedged).
      type: str
      sample: wedged
    why:
      description: The figures the class was decided on, in words.
      type: str
      sample: SM clock pinned at 611 MHz (spread 0 MHz over 5 samples) under 95% load at 10.1 W with no active reason
    sm_clock_mhz:
      description: Median SM clock over the samples (MHz); of a busy GPU, over its samples under load.
      type: float
      sample: 611
    sm_clock_min_mhz:
      description: Lowest SM clock sampled (MHz); of a busy GPU, under load.
      type: int
      sample: 611
    sm_clock_max_mhz:
      description: Highest SM clock sampled (MHz); of a busy GPU, under load.
      type: int
      sample: 611
    power_w:
      description: Median power draw (W); null where the GPU does not report it.
      type: float
      sample: 10.1
    utilization_pct:
      description: Median GPU utilization (%).
      type: float
      sample: 95
    pstates:
      description: Performance states seen.
      type: list
      elements: str
      sample: [P0]
    reasons:
      description: Active slowdown reasons seen in any sample (C(none reported) for a slow clock without one).
      type: list
      elements: str
      sample: []
    samples:
      description: Number of samples.
      type: int
      sample: 5
    raw:
      description: Every sample of this GPU as parsed (field name to value; null for C([N/A])).
      type: list
      elements: dict
source:
  description: Where the verdicts come from, C(samples) (taken here) or C(watch) (the GPU watch's state, RV(watch_age_s) old).
  returned: always
  type: str
  sample: samples
watch_age_s:
  description: Age of the GPU watch's state in seconds when RV(source) is C(watch), else null.
  returned: always
  type: float
load:
  description: What the load command did.
  returned: always
  type: dict
  contains:
    ran:
      description: Whether a load command was given and started.
      type: bool
    busy_after_s:
      description: Seconds from the start of the load until every GPU was busy (null when that never happened).
      type: float
    exited_early:
      description: Whether the load exited before the last sample (its rc is then in RV(load.rc)).
      type: bool
    rc:
      description: Exit status of the load (negative when it was stopped by a signal), null if not started.
      type: int
    output_tail:
      description: Last lines of the load's output.
      type: str
summary:
  description: One line per GPU, for a human.
  returned: always
  type: list
  elements: str
  sample: ["GPU 0 NVIDIA GB10: wedged, SM 611 MHz (611-611), 10.1 W, 95% util, reasons: none"]
"""

import json
import os
import sys
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.vllm.plugins.module_utils import _background as background
from ansible_collections.dgxspark.vllm.plugins.module_utils import _gpu_burn as gpu_burn
from ansible_collections.dgxspark.vllm.plugins.module_utils import _nvidia_smi as smi


class Diagnosis:
    """Samples nvidia-smi (and drives the load) for one module run."""

    def __init__(self, module):
        self.module = module
        self.params = module.params
        name = self.params["nvidia_smi"]
        if os.path.isabs(name):
            self.smi = name if os.access(name, os.X_OK) else None
        else:
            self.smi = module.get_bin_path(name, required=False)
        if not self.smi:
            module.fail_json(msg="%s not found on this node: install the NVIDIA driver (it brings nvidia-smi) "
                             "or set nvidia_smi to its path" % name)

    def run_smi(self, *args):
        rc, out, err = self.module.run_command([self.smi] + list(args))
        if rc != 0:
            self.module.fail_json(msg="'%s %s' failed (rc %s): %s. Is the NVIDIA driver loaded and the GPU visible?"
                                  % (self.params["nvidia_smi"], " ".join(args), rc, (err or out).strip()))
        return out

    def sample(self):
        out = self.run_smi("--query-gpu=" + ",".join(smi.QUERY_FIELDS), "--format=csv,noheader,nounits")
        try:
            rows = smi.parse_query_csv(out, smi.QUERY_FIELDS)
            perf = smi.parse_performance(self.run_smi("-q", "-d", "PERFORMANCE"))
        except ValueError as exc:
            self.module.fail_json(msg="could not parse nvidia-smi output: %s" % exc, stdout=out)
        if not rows:
            self.module.fail_json(msg="nvidia-smi lists no GPU on this node")
        for position, row in enumerate(rows):
            reasons = perf[position]["reasons"] if position < len(perf) else {}
            row["active_reasons"] = smi.active_reasons(reasons, self.params["ignored_reasons"])
        return rows

    def busy(self, rows):
        return all((row.get("utilization.gpu") or 0) >= self.params["busy_util_pct"] for row in rows)


def from_watch(path, now, max_age):
    """(gpus, summary, age) from a fresh GPU watch state at `path`, or None when it cannot stand in for sampling."""
    try:
        with open(path, encoding="utf-8") as handle:
            state = json.load(handle)
        age = now - float(state["updated_at"])
        limit = max_age or 3 * float(state["interval"])
        watched = sorted(state["gpus"].items(), key=lambda item: int(item[0]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not watched or not 0 <= age <= limit or any("state" not in g for g in dict(watched).values()):
        return None
    why_wedged = {str(f["gpu"]): f["why"] for f in state.get("findings", []) if f.get("finding") == "wedged"}
    gpus, summary = [], []
    for index, g in watched:
        wedged = index in why_wedged
        verdict = dict(
            index=int(index), name=g.get("name"), uuid=g.get("uuid"), state=smi.WEDGED if wedged else g["state"],
            why=why_wedged[index] if wedged else "%s over the GPU watch's window" % g["state"],
            sm_clock_mhz=g.get("sm_clock_mhz"), sm_clock_min_mhz=g.get("sm_clock_mhz"), sm_clock_max_mhz=g.get("sm_clock_mhz"),
            power_w=g.get("power_w"), utilization_pct=g.get("utilization_pct"), pstates=[g["pstate"]] if g.get("pstate") else [],
            reasons=g.get("reasons", []), samples=0, raw=[])
        gpus.append(verdict)
        summary.append("GPU %s %s: %s, SM %s MHz, %s W, %s%% util (GPU watch, %.0f s ago): %s" % (
            verdict["index"], verdict["name"], verdict["state"], verdict["sm_clock_mhz"], verdict["power_w"],
            verdict["utilization_pct"], age, verdict["why"]))
    return gpus, summary, round(age, 1)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            load_command=dict(type="list", elements="str", default=[]),
            driver_load_seconds=dict(type="float", default=0.0),
            samples=dict(type="int", default=5),
            interval=dict(type="float", default=1.0),
            load_ready_timeout=dict(type="float", default=90.0),
            busy_util_pct=dict(type="int", default=50),
            min_clock_mhz=dict(type="int", default=1200),
            pinned_spread_mhz=dict(type="int", default=15),
            wedged_max_power_w=dict(type="float", default=30.0),
            ignored_reasons=dict(type="list", elements="str",
                                 default=["Idle", "Applications Clocks Setting", "Display Clock Setting"]),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            watch_state=dict(type="str", default=""),
            watch_max_age=dict(type="float", default=0.0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["samples"] < 2:
        module.fail_json(msg="samples must be at least 2 (a pinned clock is one value over several samples), got %s" % p["samples"])
    if p["interval"] <= 0:
        module.fail_json(msg="interval must be positive, got %s" % p["interval"])
    load = dict(ran=False, busy_after_s=None, exited_early=False, rc=None, output_tail="")
    if not p["load_command"] and p["driver_load_seconds"] > 0:
        # The built-in load, run by this node's Python as a script of its own (stopped with its process group).
        p["load_command"] = [sys.executable, "-c", gpu_burn.script(), str(p["driver_load_seconds"])]
    if not p["load_command"] and p["watch_state"]:
        watched = from_watch(p["watch_state"], time.time(), p["watch_max_age"])
        if watched:
            gpus, summary, age = watched
            module.exit_json(changed=False, gpus=gpus, load=load, summary=summary, source="watch", watch_age_s=age)
    diag = Diagnosis(module)
    diag.sample()  # nvidia-smi works and sees a GPU, before any load starts

    proc = None
    output = tempfile.TemporaryFile()
    samples = []
    try:
        if p["load_command"]:
            started = time.time()
            try:
                # A background process (sampled while it runs), which run_command cannot give.
                proc = background.start(p["load_command"], output=output)
            except OSError as exc:
                module.fail_json(msg="could not start the load command %s: %s" % (p["load_command"][0], exc))
            load["ran"] = True
            # Wait until every GPU is busy (container start, CUDA init), the load exits, or the timeout.
            while time.time() - started < p["load_ready_timeout"] and proc.poll() is None:
                if diag.busy(diag.sample()):
                    load["busy_after_s"] = round(time.time() - started, 1)
                    break
                time.sleep(min(p["interval"], 1.0))
            if proc.poll() is not None and proc.returncode != 0:
                module.fail_json(msg="the load command exited with rc %s before the GPUs were sampled under load; its output:\n%s"
                                 % (proc.returncode, background.tail(output)), load=dict(load, rc=proc.returncode, output_tail=background.tail(output)))
        for number in range(p["samples"]):
            if number:
                time.sleep(p["interval"])
            # Samples after a load that had made the GPUs busy has ended would read idle: stop there.
            if proc is not None and load["busy_after_s"] is not None and proc.poll() is not None:
                load["exited_early"] = True
                break
            samples.append(diag.sample())
        if len(samples) < 2:
            module.fail_json(msg="the load command ended after %d sample(s) under load; make it run at least %s s longer "
                             "(samples x interval after the GPUs are busy)" % (len(samples), p["samples"] * p["interval"]),
                             load=load)
    finally:
        if proc is not None:
            load["rc"] = background.stop(proc)
            load["output_tail"] = background.tail(output)
        output.close()

    gpus, summary = [], []
    for position in range(len(samples[0])):
        rows = [sample[position] for sample in samples if position < len(sample)]
        reasons = set()
        for row in rows:
            reasons.update(row.pop("active_reasons"))
        verdict = smi.classify(rows, reasons, min_clock_mhz=p["min_clock_mhz"], busy_util_pct=p["busy_util_pct"],
                               pinned_spread_mhz=p["pinned_spread_mhz"], wedged_max_power_w=p["wedged_max_power_w"])
        verdict.update(index=rows[0].get("index"), name=rows[0].get("name"), uuid=rows[0].get("uuid"), raw=rows)
        gpus.append(verdict)
        summary.append("GPU %s %s: %s, SM %s MHz (%s-%s), %s W, %s%% util, reasons: %s" % (
            verdict["index"], verdict["name"], verdict["state"], verdict["sm_clock_mhz"], verdict["sm_clock_min_mhz"],
            verdict["sm_clock_max_mhz"], verdict["power_w"], verdict["utilization_pct"], ", ".join(verdict["reasons"]) or "none"))
        if verdict["state"] == smi.THROTTLED:
            module.warn("GPU %s is throttled: %s" % (verdict["index"], verdict["why"]))
        elif verdict["state"] == smi.IDLE and load["ran"]:
            module.warn("GPU %s stayed idle under the load command (%s): its clocks were not judged; "
                        "check that the load reaches the GPU" % (verdict["index"], verdict["why"]))
    module.exit_json(changed=False, gpus=gpus, load=load, summary=summary, source="samples", watch_age_s=None)


if __name__ == "__main__":
    main()
