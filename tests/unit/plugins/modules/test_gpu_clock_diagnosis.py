"""gpu_clock_diagnosis end to end on this machine: a fake nvidia-smi replays fixture outputs,
loaded ones while the module's load command runs (it leaves a marker file)."""
import json
import pathlib
import sys
import time

import pytest

from ansible_collections.dgxspark.vllm.plugins.module_utils import _gpu_watch as watch
from ansible_collections.dgxspark.vllm.plugins.modules import gpu_clock_diagnosis

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "nvidia-smi"

FAKE = r'''#!{python}
import pathlib, sys
d = pathlib.Path({dir!r})
fixtures = pathlib.Path({fixtures!r})
gpu, state = (d / "state").read_text().split()
loaded = (d / "load").exists() and state != "idle"
if loaded:
    (d / "seen").touch()  # a load can wait for this to end right after the GPU was seen busy
if gpu == "gb10":
    query, perf = ("gb10/query_%s_load.csv" % state, "gb10/perf_%s_load.txt" % state) if loaded else (
        "gb10/query_idle.csv", "gb10/perf_idle.txt")
else:  # real H200 outputs; the idle csv has a header line
    query, perf = ("h200/smi_query_load.csv", "h200/smi_q_performance_load.txt") if loaded else (
        "h200/smi_query_idle_header.csv", "h200/smi_q_performance_idle.txt")
args = sys.argv[1:]
if args[:1] and args[0].startswith("--query-gpu="):
    lines = [line for line in (fixtures / query).read_text().splitlines() if not line.startswith("index,")]
    counter = d / ("count-" + query.replace("/", "-"))
    n = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(n + 1))
    print(lines[n % len(lines)])
elif args[:3] == ["-q", "-d", "PERFORMANCE"]:
    print((fixtures / perf).read_text())
else:
    sys.exit("fake nvidia-smi: unexpected " + " ".join(args))
'''




@pytest.fixture(name="gpu")
def fixture_gpu(tmp_path):
    """A fake GB10: write its state, get the module arguments that use it."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text(FAKE.format(python=sys.executable, dir=str(tmp_path), fixtures=str(FIXTURES)))
    fake.chmod(0o755)
    marker = tmp_path / "load"

    def make(state, load=True, gpu_model="gb10", **args):
        (tmp_path / "state").write_text(f"{gpu_model} {state}")
        command = ["sh", "-c", f"trap 'rm -f {marker}; exit 143' TERM; touch {marker}; sleep 30 & wait"]
        return dict(dict(nvidia_smi=str(fake), interval=0.05, samples=5, load_ready_timeout=10,
                         load_command=command if load else []), **args)
    make.marker = marker
    return make


@pytest.fixture(name="run")
def fixture_run(run_module):
    return lambda check=False, **args: run_module(gpu_clock_diagnosis.main, args, check_mode=check)


@pytest.mark.parametrize("state, expected, clock", [
    ("healthy", "healthy", 2405), ("throttled", "throttled", 612), ("wedged", "wedged", 611),
])
def test_classifies_the_gpu_under_the_load_and_stops_the_load(gpu, state, expected, clock, run):
    out = run(**gpu(state))
    assert not out["failed"], out["msg"]
    (verdict,) = out["gpus"]
    assert verdict["state"] == expected and verdict["sm_clock_mhz"] == clock, verdict["why"]
    assert verdict["name"] == "NVIDIA GB10" and verdict["samples"] == 5 and verdict["raw"][0]["power.limit"] is None
    assert out["load"]["ran"] and out["load"]["busy_after_s"] is not None
    assert out["load"]["rc"] == 143 and not gpu.marker.exists()  # terminated, and it cleaned up
    assert out["changed"] is False
    assert out["summary"][0].startswith(f"GPU 0 NVIDIA GB10: {expected}, SM {clock} MHz")


def test_wedged_reports_the_figures(gpu, run):
    verdict = run(check=True, **gpu("wedged"))["gpus"][0]
    assert (verdict["sm_clock_min_mhz"], verdict["sm_clock_max_mhz"]) == (611, 611)
    assert verdict["utilization_pct"] == 95 and verdict["power_w"] < 11 and verdict["reasons"] == []


def test_without_a_load_an_idle_gpu_is_idle(gpu, run):
    out = run(**gpu("wedged", load=False))
    assert out["gpus"][0]["state"] == "idle" and out["load"]["ran"] is False


def test_a_load_that_never_reaches_the_gpu_leaves_it_idle(gpu, run):
    out = run(**gpu("idle", load_ready_timeout=0.5))
    assert not out["failed"] and out["gpus"][0]["state"] == "idle"


def test_a_failing_load_fails_with_its_output(gpu, run):
    args = gpu("healthy")
    args["load_command"] = ["sh", "-c", "echo no such image >&2; exit 3"]
    out = run(**args)
    assert out["failed"] and "rc 3" in out["msg"] and "no such image" in out["msg"]


def test_a_load_too_short_to_sample_fails(gpu, run):
    # The load ends as soon as the GPU has been seen busy once (no race with a sleep on a slow machine).
    seen = gpu.marker.parent / "seen"
    # interval 3 s: the load must end within one interval of being seen, which a starved shell on a busy
    # machine once missed at 1 s.
    args = gpu("healthy", interval=3.0)
    args["load_command"] = ["sh", "-c", f"touch {gpu.marker}; until [ -e {seen} ]; do sleep 0.02; done; rm -f {gpu.marker}"]
    out = run(**args)
    assert out["failed"] and "longer" in out["msg"]


def test_missing_nvidia_smi_fails_clearly(gpu, tmp_path, run):
    out = run(**gpu("healthy", nvidia_smi=str(tmp_path / "absent")))
    assert out["failed"] and "not found" in out["msg"] and "NVIDIA driver" in out["msg"]


def test_one_sample_is_refused(gpu, run):
    out = run(**gpu("healthy", samples=1))
    assert out["failed"] and "at least 2" in out["msg"]


def test_real_h200_outputs_under_load_read_healthy_at_the_power_cap(gpu, run):
    out = run(**gpu("load", gpu_model="h200"))
    assert not out["failed"], out["msg"]
    (verdict,) = out["gpus"]
    assert verdict["name"] == "NVIDIA H200" and verdict["state"] == "healthy", verdict["why"]
    assert verdict["sm_clock_mhz"] == 1500 and verdict["reasons"] == ["SW Power Cap"]
    assert verdict["raw"][0]["power.limit"] == 700.0


def test_real_h200_outputs_without_load_read_idle(gpu, run):
    out = run(**gpu("load", load=False, gpu_model="h200"))
    assert out["gpus"][0]["state"] == "idle" and out["gpus"][0]["sm_clock_mhz"] == 345


def watch_state(path, clock, power, util, age, interval=10.0, samples=5):
    """The state file the GPU watch daemon writes, from the watch's own judgement of `samples` readings."""
    window, now = watch.Window(wedge_seconds=30, stuck_seconds=60), time.time() - age
    start = now - (samples - 1) * interval
    for i in range(samples):
        window.add(start + i * interval, watch.parse_sample("0, GPU-x, NVIDIA GB10, P0, %s, %s, %s, 0x0" % (clock, power, util)))
    state = dict(window.judge(now), node="spark-head", updated_at=now, interval=interval, source="nvml")
    path.write_text(json.dumps(state))
    return str(path)


def test_while_serving_a_fresh_watch_state_stands_in_for_sampling(gpu, run, tmp_path):
    state = watch_state(tmp_path / "state.json", 611, 10.1, 95, age=5)
    # nvidia-smi is never run: the watch has already judged these GPUs (for longer, with the same classifier).
    out = run(**gpu("healthy", load=False, nvidia_smi=str(tmp_path / "absent"), watch_state=state))
    assert not out["failed"], out.get("msg")
    assert out["source"] == "watch" and 4 < out["watch_age_s"] < 30
    (verdict,) = out["gpus"]
    assert verdict["state"] == "wedged" and "pinned at 611 MHz" in verdict["why"] and verdict["sm_clock_mhz"] == 611
    assert "GPU watch" in out["summary"][0]


@pytest.mark.parametrize("age, load, samples", [(45, False, 5), (5, True, 5), (5, False, 2)])
def test_a_stale_or_unjudged_watch_state_or_a_load_means_sampling(gpu, run, tmp_path, age, load, samples):
    # Stale: older than three of its intervals; a load asks for a fresh reading; too few samples: no verdict yet.
    state = watch_state(tmp_path / "state.json", 611, 10.1, 95, age=age, samples=samples)
    out = run(**gpu("healthy", load=load, watch_state=state))
    assert not out["failed"], out.get("msg")
    assert out["source"] == "samples" and out["watch_age_s"] is None
    assert out["gpus"][0]["state"] == ("healthy" if load else "idle")


def test_an_unreadable_watch_state_means_sampling(gpu, run, tmp_path):
    (tmp_path / "state.json").write_text("{not json")
    out = run(**gpu("healthy", load=False, watch_state=str(tmp_path / "state.json")))
    assert out["source"] == "samples" and out["gpus"][0]["state"] == "idle"


def test_the_built_in_load_runs_with_the_nodes_python_when_no_command_is_given(gpu, run, monkeypatch):
    """driver_load_seconds starts the module's own load (module_utils/_gpu_burn.py, here a stand-in script that only
    marks the fake GPU busy) as `python -c SCRIPT SECONDS`, and stops it once the samples are taken."""
    seen = []

    def script():
        seen.append(True)
        return (f"import pathlib, sys, time\npathlib.Path({str(gpu.marker)!r}).touch()\n"
                "time.sleep(float(sys.argv[1]))\n")
    monkeypatch.setattr(gpu_clock_diagnosis.gpu_burn, "script", script)
    out = run(**gpu("healthy", load=False, driver_load_seconds=30))
    assert not out["failed"], out["msg"]
    assert seen and out["load"]["ran"] and out["load"]["busy_after_s"] is not None
    assert out["gpus"][0]["state"] == "healthy"
    # A command of the caller's wins over the built-in load.
    seen.clear()
    out = run(**gpu("healthy", driver_load_seconds=30))
    assert not seen and out["load"]["ran"] and out["gpus"][0]["state"] == "healthy"
