"""gpu_health on a simulated pair: each stand-in GPU state ends as the role promises.

Every test switches the worker's stand-in GPU (its /etc/dgxspark-sim/scenario.json) and runs the
role again with ansible-playbook against the scenario inventory; the worker is put back to healthy after.
"""

import json
import os
import pathlib
import subprocess

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


def playbook(*args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(PROJECT / ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", PY_COLORS="0")
    out = subprocess.run(["ansible-playbook", "-i", INVENTORY, str(SCENARIO / "converge.yml"), *args],
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


def test_no_load_while_serving_runs(worker_gpu):
    # A wedged GPU reads idle without a load: if the role started its load here, the play would fail.
    worker_gpu("wedged")
    host = node(WORKER)
    rootfs = "/tmp/serving-standin-rootfs"
    host.check_output(f"sudo mkdir -p {rootfs}/usr/bin && sudo cp /usr/bin/sleep {rootfs}/usr/bin/ && "
                      f"for f in $(ldd /usr/bin/sleep | grep -o '/[^ ]*'); do sudo cp --parents $f {rootfs}; done && "
                      f"sudo docker run -d --name dgxspark-vllm --rootfs {rootfs} /usr/bin/sleep 300")
    try:
        rc, out = playbook()
    finally:
        host.run(f"sudo docker rm -f -t 0 dgxspark-vllm; sudo rm -rf {rootfs}")
    assert rc == 0, out
    assert f"dgxspark-vllm running on {WORKER}: no load is started" in out
    assert f"{WORKER} GPU 0 NVIDIA GB10: idle" in out
