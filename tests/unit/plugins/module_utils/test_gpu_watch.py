"""The GPU watch's judgement (module_utils/_gpu_watch.py) and its daemon (roles/gpu_watch/files)."""
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

from ansible_collections.dgxspark.vllm.plugins.module_utils import _gpu_watch as watch

ROOT = pathlib.Path(__file__).resolve().parents[4]
FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "nvidia-smi"
FAST = {"wedge_seconds": 30, "stuck_seconds": 60}


def line(clock, power, util, mask="0x0000000000000000", name="NVIDIA GB10", index=0):
    return "%d, GPU-x, %s, P0, %s, %s, %s, %s" % (index, name, clock, power, util, mask)


def feed(window, lines, start=1000.0, step=10.0):
    """Samples every `step` s; returns the judgement after the last one."""
    report = None
    for i, text in enumerate(lines):
        now = start + i * step
        window.add(now, watch.parse_sample(text))
        report = window.judge(now)
    return report


@pytest.mark.parametrize("mask, names", [
    ("0x0000000000000000", []), ("0x0000000000000001", ["Idle"]), (0x4, ["SW Power Cap"]),
    ("0x0000000000000048", ["HW Slowdown", "HW Thermal Slowdown"]), (None, []),
])
def test_reasons_from_mask(mask, names):
    assert watch.reasons_from_mask(mask) == names


def test_a_real_h200_row_with_its_reasons_mask():
    # The shared fixture's real H200 csv: clocks_event_reasons.active 0x1 (idle) is no slowdown.
    row = (FIXTURES / "h200" / "smi_query_idle.csv").read_text().splitlines()[-1].split(", ")
    text = ", ".join([row[0], "GPU-x", row[1], row[2], row[3], row[7], row[9], row[11]])
    gpu = watch.parse_sample(text)["0"]
    assert gpu["clocks.sm"] == 1980 and gpu["power.draw"] == 121.66 and gpu["reasons"] == []


@pytest.mark.parametrize("name, state, reasons", [("idle", "idle", []), ("load", "healthy", ["SW Power Cap"])])
def test_real_h200_samples_of_the_watch_query(name, state, reasons):
    # Captured on an H200: at its 700 W cap under load, SW Power Cap is active and the clock 1470-1500 MHz.
    window = watch.Window(**FAST)
    lines = (FIXTURES / "h200" / f"watch_query_{name}.csv").read_text().splitlines()
    report = feed(window, lines, step=10)
    assert report["gpus"]["0"]["name"] == "NVIDIA H200" and report["gpus"]["0"]["reasons"] == reasons
    assert report["gpus"]["0"]["state"] == state and report["findings"] == []


def test_a_wedge_is_a_finding_only_once_it_held_the_whole_window():
    window = watch.Window(**FAST)
    report = feed(window, [line(611, 10.1, 95)] * 3)      # 20 s of samples: not yet
    assert report["findings"] == [] and "state" not in report["gpus"]["0"]
    report = feed(window, [line(611, 10.1, 95)] * 2, start=1030)  # 30 s covered
    assert [f["finding"] for f in report["findings"]] == ["wedged"]
    assert report["gpus"]["0"]["state"] == "wedged" and "pinned at 611 MHz" in report["findings"][0]["why"]


@pytest.mark.parametrize("sample, state", [
    (line(2405, 60.2, 99), "healthy"),
    (line(208, 4.5, 0, "0x0000000000000001"), "idle"),
    (line(611, 22.0, 99, "0x0000000000000048"), "throttled"),   # slow, but a reason says why
])
def test_what_is_not_a_wedge(sample, state):
    report = feed(watch.Window(**FAST), [sample] * 8)
    assert report["gpus"]["0"]["state"] == state and report["findings"] == []


def test_a_moving_slow_clock_at_high_power_is_no_wedge():
    lines = [line(c, 45.0, 99) for c in (700, 820, 640, 900, 760, 810)]
    report = feed(watch.Window(**FAST), lines)
    assert report["gpus"]["0"]["state"] == "throttled" and report["findings"] == []


def test_busy_at_low_power_is_flagged_after_the_stuck_window_and_cleared_after():
    window = watch.Window(**FAST)
    spinning = [line(2000 + 10 * i, 15.0, 96) for i in range(6)]
    assert feed(window, spinning)["findings"] == []                       # 50 s
    report = feed(window, spinning[:2], start=1060)                        # 70 s
    assert [f["finding"] for f in report["findings"]] == ["busy_low_power"]
    since = report["findings"][0]["since"]
    assert feed(window, [line(2010, 15.0, 96)], start=1080)["findings"][0]["since"] == since
    assert feed(window, [line(2400, 60.0, 99)], start=1090)["findings"] == []


def test_one_sample_of_load_in_the_window_clears_busy_low_power():
    lines = [line(2000, 15.0, 96)] * 3 + [line(2400, 70.0, 99)] + [line(2000, 15.0, 96)] * 4
    assert feed(watch.Window(**FAST), lines)["findings"] == []


def test_a_gpu_that_stops_answering_starts_afresh():
    window = watch.Window(**FAST)
    feed(window, [line(611, 10.1, 95)] * 5)
    window.add(1050, {})
    assert window.judge(1050) == {"gpus": {}, "findings": []}


def test_settings_from_a_json_template_are_numbers():
    window = watch.Window(wedge_seconds="60", stuck_seconds="120", wedged_max_power_w="30.0")
    assert window.settings["wedge_seconds"] == 60 and window.span == 120
    with pytest.raises(ValueError, match="unknown watch settings: wedge"):
        watch.Window(wedge=3)


def test_prometheus_text_is_well_formed_and_carries_the_labels():
    report = feed(watch.Window(**FAST), [line(611, 10.1, 95)] * 5)
    text = watch.prometheus_text(report, {"node": "spark-head", "model_name": 'm"3'}, 5, 1040.0)
    sample = re.compile(r'^[a-z_]+\{[a-z_]+="(?:[^"\\]|\\.)*"(?:,[a-z_]+="(?:[^"\\]|\\.)*")*\} -?[0-9.]+$')
    for row in text.splitlines():
        assert row.startswith("# HELP ") or row.startswith("# TYPE ") or sample.match(row), row
    assert 'dgxspark_gpu_wedged{gpu="0",model_name="m\\"3",node="spark-head"} 1' in text
    assert 'dgxspark_gpu_sm_clock_mhz{gpu="0",model_name="m\\"3",node="spark-head"} 611' in text
    assert "dgxspark_gpu_busy_low_power{" in text and text.endswith("\n")


def _state(findings=(), util=0):
    return {"gpus": {"0": {"utilization_pct": util}}, "findings": [{"gpu": "0", "finding": f, "why": "w"} for f in findings]}


def test_cross_node_names_a_stuck_collective_only_with_an_idle_peer():
    said = watch.cross_node({"spark-head": _state(["busy_low_power"], 96), "spark-worker-1": _state(util=0)})
    assert said == [s for s in said if s.startswith("Stuck collective: spark-head GPU 0")] and len(said) == 1
    assert "while spark-worker-1 is idle" in said[0]
    assert watch.cross_node({"a": _state(["busy_low_power"], 96), "b": _state(["busy_low_power"], 96)}) == []


def test_cross_node_judges_idle_by_each_nodes_own_threshold():
    peer = dict(_state(util=40), settings={"busy_util_pct": 30})  # 40% is busy for a watch set to 30%
    assert watch.cross_node({"spark-head": _state(["busy_low_power"], 96), "spark-worker-1": peer}) == []


def test_cross_node_names_a_wedge_and_not_a_stuck_collective():
    said = watch.cross_node({"spark-head": _state(["wedged", "busy_low_power"], 95), "spark-worker-1": _state(util=0)})
    assert len(said) == 1 and said[0].startswith("Wedged GPU clock on spark-head (GPU 0)")


class FakeNvml:
    """libnvidia-ml's calls as ctypes sees them: each writes through its last (byref) argument."""

    def __init__(self, values):
        self.values = values

    @staticmethod
    def _put(ref, value):
        if value is None:
            return 3  # NVML_ERROR_NOT_SUPPORTED
        ref._obj.value = value
        return 0

    def nvmlInit_v2(self):
        return 0

    def nvmlDeviceGetCount_v2(self, ref):
        return self._put(ref, 1)

    def nvmlDeviceGetHandleByIndex_v2(self, index, ref):
        return self._put(ref, 1234 + index.value)

    def nvmlDeviceGetName(self, handle, buf, size):
        buf.value = b"NVIDIA GB10"
        return 0

    def nvmlDeviceGetUUID(self, handle, buf, size):
        buf.value = b"GPU-5d0c"
        return 0

    def nvmlDeviceGetPerformanceState(self, handle, ref):
        return self._put(ref, 0)

    def nvmlDeviceGetClockInfo(self, handle, clock, ref):
        assert clock.value == 1  # NVML_CLOCK_SM
        return self._put(ref, self.values["clock"])

    def nvmlDeviceGetPowerUsage(self, handle, ref):
        return self._put(ref, self.values["milliwatts"])

    def nvmlDeviceGetUtilizationRates(self, handle, ref):
        ref._obj.gpu = self.values["util"]
        return 0

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle, ref):
        return self._put(ref, self.values["mask"])


class OldDriverNvml(FakeNvml):
    """A driver before R535: the reasons call has its older name only (ctypes finds no symbol: None here)."""

    nvmlDeviceGetCurrentClocksEventReasons = None

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle, ref):
        return self._put(ref, self.values["mask"])


@pytest.mark.parametrize("lib_class", [FakeNvml, OldDriverNvml])
def test_nvml_gives_the_sample_the_nvidia_smi_query_gives(lib_class):
    lib = lib_class({"clock": 611, "milliwatts": 10120, "util": 95, "mask": 0x48})
    got = watch.NvmlReader(lib).sample()["0"]
    want = watch.parse_sample(line(611, 10.12, 95, "0x0000000000000048").replace("GPU-x", "GPU-5d0c"))["0"]
    assert {k: got[k] for k in want if k != "clocks_event_reasons.active"} == \
        {k: v for k, v in want.items() if k != "clocks_event_reasons.active"}
    assert got["reasons"] == ["HW Slowdown", "HW Thermal Slowdown"]


def test_nvml_values_the_gpu_does_not_report_are_none():
    got = watch.NvmlReader(FakeNvml({"clock": 2405, "milliwatts": None, "util": 99, "mask": 0})).sample()["0"]
    assert got["power.draw"] is None and got["clocks.sm"] == 2405 and got["reasons"] == []


def test_no_nvml_is_an_nvml_error():
    class NoInit(FakeNvml):
        def nvmlInit_v2(self):
            return 9  # NVML_ERROR_DRIVER_NOT_LOADED
    with pytest.raises(watch.NvmlError, match="returned 9"):
        watch.NvmlReader(NoInit({}))


def test_the_daemon_raises_and_clears_a_wedge(tmp_path):
    # The installed layout: the daemon with the two module_utils files next to it, a fake nvidia-smi.
    lib = tmp_path / "lib"
    lib.mkdir()
    for src in (ROOT / "roles/gpu_watch/files/dgxspark_gpu_watch.py", ROOT / "plugins/module_utils/_gpu_watch.py", ROOT / "plugins/module_utils/_daemon.py",
                ROOT / "plugins/module_utils/_nvidia_smi.py"):
        (lib / src.name).write_text(src.read_text())
    reading = tmp_path / "reading"
    reading.write_text(line(611, 10.1, 95) + "\n")
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\ncat %s\n" % reading)
    smi.chmod(0o755)
    cfg = {"node": "n1", "interval": 1, "source": "nvidia-smi", "nvidia_smi": str(smi), "state_file": str(tmp_path / "state.json"),
           "textfile": str(tmp_path / "w.prom"), "labels": {"model_name": "m"},
           "thresholds": {"wedge_seconds": "2", "stuck_seconds": "2"}}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    env = dict(os.environ, PYTHONPATH="")  # the daemon must not need the collection on its path
    proc = subprocess.Popen([sys.executable, str(lib / "dgxspark_gpu_watch.py"), str(tmp_path / "cfg.json")],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        def state():
            try:
                return json.loads((tmp_path / "state.json").read_text())
            except (OSError, ValueError):
                return {}

        deadline = time.monotonic() + 20
        while "wedged" not in str(state().get("findings")) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert state()["findings"][0]["finding"] == "wedged", state()
        assert 'dgxspark_gpu_wedged{gpu="0",model_name="m",node="n1"} 1' in (tmp_path / "w.prom").read_text()
        reading.write_text(line(2405, 60.0, 99) + "\n")
        deadline = time.monotonic() + 20
        while (state().get("findings") or state()["gpus"]["0"].get("state") != "healthy") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert state()["findings"] == [] and state()["gpus"]["0"]["state"] == "healthy"
    finally:
        proc.terminate()
        out = proc.communicate(timeout=10)[0]
    assert "<3>GPU 0 wedged: SM clock pinned at 611 MHz" in out and "<5>GPU 0 wedged cleared" in out, out
