"""gpu_health and gpu_watch on a simulated pair: each stand-in GPU state ends as the roles promise.

Every gpu_health test switches the worker's stand-in GPU (its /etc/dgxspark-sim/scenario.json) and runs
the role again with ansible-playbook against the scenario inventory; the GPU is put back to healthy after.
The gpu_watch tests change the stand-in GPU under the running watch and wait for its finding.
"""

import base64
import json
import os
import pathlib
import subprocess
import time

import pytest
import testinfra

INVENTORY = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
SCENARIO = pathlib.Path(__file__).resolve().parents[1]
PROJECT = SCENARIO.parents[1]
HEAD, WORKER = "spark-head", "spark-worker-1"
SCENARIO_FILE = "/etc/dgxspark-sim/scenario.json"


def node(name):
    return testinfra.get_host(f"ansible://{name}", ansible_inventory=INVENTORY)


def set_gpu(name, state):
    host = node(name)
    scenario = json.loads(host.file(SCENARIO_FILE).content_string)
    scenario["gpu_state"] = state
    host.check_output("echo %s | sudo tee " + SCENARIO_FILE, json.dumps(scenario))


@pytest.fixture(name="worker_gpu")
def fixture_worker_gpu():
    yield lambda state: set_gpu(WORKER, state)
    set_gpu(WORKER, "healthy")


@pytest.fixture(name="head_gpu")
def fixture_head_gpu():
    yield lambda state: set_gpu(HEAD, state)
    set_gpu(HEAD, "healthy")


def playbook(*args, playbook_file=None):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(PROJECT / ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", PY_COLORS="0")
    out = subprocess.run(["ansible-playbook", "-i", INVENTORY, playbook_file or str(SCENARIO / "converge.yml"), *args],
                         capture_output=True, text=True, check=False, env=env, cwd=PROJECT)
    # Wrapped lines of the yaml callback joined back, so messages can be searched whole.
    return out.returncode, " ".join((out.stdout + out.stderr).split())


def test_healthy_pair_passes_and_names_the_slowest_node():
    rc, out = playbook()
    assert rc == 0, out
    for name in (HEAD, WORKER):
        assert f"{name} GPU 0 NVIDIA GB10: healthy, SM 2" in out
    assert "Slowest node: spark-" in out and "wedged" not in out.replace("fail on a wedged GPU", "")


def test_wedged_worker_fails_naming_the_worker_and_the_remedy(worker_gpu):
    worker_gpu("wedged")
    rc, out = playbook()
    assert rc != 0
    assert f"Wedged GPU clock on {WORKER}:" in out, out
    assert f"{WORKER} GPU 0: SM clock pinned at 611 MHz" in out
    assert "full AC power-cycle" in out and "A reboot does NOT clear" in out
    assert f"Slowest node: {WORKER} (GPU 0 at 611 MHz, wedged)" in out
    assert f"Wedged GPU clock on {HEAD}" not in out and f"{HEAD} GPU 0 NVIDIA GB10: healthy" in out


def test_throttled_worker_warns_and_is_the_slowest_node(worker_gpu):
    worker_gpu("throttled")
    rc, out = playbook()
    assert rc == 0, out
    assert "[WARNING]: GPU 0 is throttled" in out and "HW Slowdown, HW Thermal Slowdown" in out
    assert f"{WORKER} GPU 0 NVIDIA GB10: throttled" in out
    assert f"Slowest node: {WORKER} (GPU 0 at " in out and "throttled): tensor-parallel lockstep" in out


def test_throttled_worker_fails_when_asked_to(worker_gpu):
    worker_gpu("throttled")
    rc, out = playbook("-e", "gpu_health_fail_on_throttled=true")
    assert rc != 0 and f"Throttled GPU clock on {WORKER}:" in out, out


def test_gpu_the_load_does_not_reach_is_idle_with_a_warning(worker_gpu):
    worker_gpu("idle")
    rc, out = playbook()
    assert rc == 0, out
    assert f"{WORKER} GPU 0 NVIDIA GB10: idle" in out and "stayed idle under the load command" in out
    assert f"Slowest node: {HEAD}" in out


def serving_standin(host):
    """A container named as the engine's (a sleep in an image of its own), so the role sees serving running."""
    rootfs = "/tmp/serving-standin-rootfs"
    host.check_output(f"sudo mkdir -p {rootfs}/usr/bin && sudo cp /usr/bin/sleep {rootfs}/usr/bin/ && "
                      f"for f in $(ldd /usr/bin/sleep | grep -o '/[^ ]*'); do sudo cp --parents $f {rootfs}; done && "
                      f"sudo tar -C {rootfs} -c . | sudo docker import - localhost/serving-standin:sleep >/dev/null && "
                      "sudo docker run -d --name dgxspark-vllm localhost/serving-standin:sleep /usr/bin/sleep 300")
    return lambda: host.run(f"sudo docker rm -f dgxspark-vllm; sudo docker rmi localhost/serving-standin:sleep; "
                            f"sudo rm -rf {rootfs}")


def test_no_load_while_serving_runs(worker_gpu):
    # A wedged GPU reads idle without a load: if the role started its load here, the play would fail.
    worker_gpu("wedged")
    remove = serving_standin(node(WORKER))
    try:
        rc, out = playbook()
    finally:
        remove()
    assert rc == 0, out
    assert f"dgxspark-vllm running on {WORKER}: no load is started" in out
    assert f"{WORKER} GPU 0 NVIDIA GB10: idle" in out


WATCH_STATE = "/var/lib/dgxspark-vllm/gpu-watch/state.json"
WATCH_PROM = "/var/lib/dgxspark-vllm/gpu-watch/dgxspark_gpu_watch.prom"


def watch_state(name):
    return json.loads(node(name).check_output("sudo cat " + WATCH_STATE))


def wait_for_finding(name, finding, timeout=90):
    """Seconds until the node's watch reports the finding (the converge set 2 s samples, 6 s windows)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        state = watch_state(name)
        if any(f["finding"] == finding for f in state["findings"]):
            return time.monotonic() - started, state
        time.sleep(1)
    raise AssertionError(f"no {finding} finding on {name} within {timeout} s: {state}")


def diagnose(tmp_path):
    return playbook("-e", f"diagnose_report_dir={tmp_path}", playbook_file=str(PROJECT / "playbooks" / "diagnose.yml"))


def start_load(host, seconds=600):
    """gpu_health's built-in load (plugins/module_utils/_gpu_burn.py, through the node's libcuda) in the background."""
    # The module file defines the load; as gpu_clock_diagnosis sends it, a last line runs it.
    source = (PROJECT / "plugins" / "module_utils" / "_gpu_burn.py").read_text() + "\nraise SystemExit(main(sys.argv))\n"
    host.check_output(f"printf %s {base64.b64encode(source.encode()).decode()} | base64 -d > /tmp/dgxspark_gpu_load.py")
    host.check_output(f"sudo sh -c 'nohup python3 /tmp/dgxspark_gpu_load.py {seconds} >/dev/null 2>&1 &'")


def stop_load(host):
    host.run("sudo pkill -f dgxspark_gpu_load.py")


def test_the_watch_runs_on_every_node_and_exports_its_figures():
    for name in (HEAD, WORKER):
        host = node(name)
        assert host.service("dgxspark-gpu-watch").is_running and host.service("dgxspark-gpu-watch").is_enabled
        state = watch_state(name)
        assert state["node"] == name and state["findings"] == [] and state["gpus"]["0"]["name"] == "NVIDIA GB10"
        prom = host.check_output("sudo cat " + WATCH_PROM)
        assert f'dgxspark_gpu_wedged{{gpu="0",model_name="minimax-m3",node="{name}"}} 0' in prom, prom
        assert f'dgxspark_gpu_sm_clock_mhz{{gpu="0",model_name="minimax-m3",node="{name}"}} 208' in prom, prom


def test_a_wedge_appearing_under_load_is_caught_by_the_watch_and_named_by_diagnose(worker_gpu, tmp_path):
    host = node(WORKER)
    start_load(host)
    try:
        worker_gpu("wedged")
        seconds, state = wait_for_finding(WORKER, "wedged")
        print(f"wedge visible {seconds:.1f} s after the stand-in GPU wedged (modelled GPU, 2 s samples, 6 s window)")
        assert "pinned at 611 MHz" in state["findings"][0]["why"]
        assert "GPU 0 wedged: SM clock pinned at 611 MHz" in host.check_output(
            "sudo journalctl -u dgxspark-gpu-watch -p err --no-pager -o cat")
        prom = host.check_output("sudo cat " + WATCH_PROM)
        assert f'dgxspark_gpu_wedged{{gpu="0",model_name="minimax-m3",node="{WORKER}"}} 1' in prom, prom
        assert watch_state(HEAD)["findings"] == []
        rc, out = diagnose(tmp_path)
        assert rc == 0, out
        assert f"Wedged GPU clock on {WORKER} (GPU 0): SM clock pinned at 611 MHz" in out, out
        assert "Only a full AC power-cycle clears it" in out and f"Wedged GPU clock on {HEAD}" not in out
        report = json.loads(next(tmp_path.glob("diagnose-*.json")).read_text())
        assert report["findings"] and WORKER in report["findings"][0]
    finally:
        stop_load(host)
    worker_gpu("healthy")
    deadline = time.monotonic() + 60
    while watch_state(WORKER)["findings"] and time.monotonic() < deadline:
        time.sleep(1)
    assert watch_state(WORKER)["findings"] == [], "the finding was not cleared when the GPU recovered"


def test_a_rank_spinning_while_the_other_node_idles_is_named_a_stuck_collective(head_gpu, tmp_path):
    head_gpu("spinning")
    seconds, state = wait_for_finding(HEAD, "busy_low_power")
    print(f"busy at low power visible after {seconds:.1f} s (modelled GPU, 2 s samples, 6 s window)")
    assert "wedged" not in [f["finding"] for f in state["findings"]]
    rc, out = diagnose(tmp_path)
    assert rc == 0, out
    assert f"Stuck collective: {HEAD} GPU 0 busy (" in out and f"while {WORKER} is idle" in out, out


def test_while_serving_the_check_takes_the_watchs_verdict_and_fails_on_its_wedge(worker_gpu):
    """With serving running, gpu_health reads the node's GPU watch (fresh, judged over its window under the
    real load) instead of sampling for seconds: a wedge the watch saw fails the check with the remedy."""
    host = node(WORKER)
    start_load(host)
    remove = serving_standin(host)
    try:
        worker_gpu("wedged")
        wait_for_finding(WORKER, "wedged")
        rc, out = playbook()
    finally:
        remove()
        stop_load(host)
    assert rc != 0, out
    assert f"{WORKER} GPU 0 NVIDIA GB10: wedged, SM 611 MHz" in out and "(GPU watch," in out, out
    assert f"Wedged GPU clock on {WORKER}" in out and "for 6 s" in out and "AC power-cycle" in out, out
    assert f"{HEAD} GPU 0 NVIDIA GB10: healthy" in out  # the head, not serving, was loaded and sampled
    worker_gpu("healthy")
    deadline = time.monotonic() + 60
    while watch_state(WORKER)["findings"] and time.monotonic() < deadline:
        time.sleep(1)
