"""The driver-level GPU load, against the sim's stand-in libcuda (sim/standins/libcuda_standin.c, built here):
the calls a real driver answers, in the order a real driver needs them. The same code, run on an H100,
held it at 99% utilization at its top clock within a second (docs/benchmarks.md)."""
import ctypes
import glob
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time

import pytest

from ansible_collections.dgxspark.vllm.plugins.module_utils import _gpu_burn as gpu_burn

ROOT = pathlib.Path(__file__).resolve().parents[4]
pytestmark = pytest.mark.skipif(not shutil.which("gcc"), reason="builds the stand-in driver with gcc")


@pytest.fixture(name="driver")
def fixture_driver(tmp_path, monkeypatch):
    lib = tmp_path / "libcuda.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(lib), str(ROOT / "sim" / "standins" / "libcuda_standin.c")],
                   check=True)
    scenario = tmp_path / "scenario.json"
    scenario.write_text("{}")
    monkeypatch.setenv("DGXSPARK_SIM_SCENARIO", str(scenario))
    return lib


def test_it_loads_the_gpu_for_the_time_asked_and_lets_go_of_it(driver):
    seen = []
    watcher = threading.Thread(target=lambda: (time.sleep(0.3), seen.append(glob.glob(f"/tmp/dgxspark-sim-gpu-load.{os.getpid()}"))))
    watcher.start()
    started = time.monotonic()
    report = gpu_burn.burn(0.6, ctypes.CDLL(str(driver)))
    watcher.join()
    assert time.monotonic() - started >= 0.6
    assert list(report) == [0] and report[0] >= 4  # launched in batches of 4 between synchronizations
    assert seen == [[f"/tmp/dgxspark-sim-gpu-load.{os.getpid()}"]], "the GPU was held while the kernels ran"
    assert not glob.glob(f"/tmp/dgxspark-sim-gpu-load.{os.getpid()}"), "the context was destroyed at the end"


def test_no_gpu_is_the_drivers_own_error(driver, monkeypatch, tmp_path):
    monkeypatch.setenv("DGXSPARK_SIM_SCENARIO", str(tmp_path / "absent.json"))
    with pytest.raises(gpu_burn.CudaError, match=r"cuInit failed: CUDA error 100 \(no CUDA-capable device is detected\)"):
        gpu_burn.burn(0.1, ctypes.CDLL(str(driver)))


def test_the_kernel_is_ptx_the_driver_compiles_for_its_own_gpu():
    assert ".entry dgxspark_burn(" in gpu_burn.PTX and ".target sm_52" in gpu_burn.PTX
    assert gpu_burn.KERNEL.decode() in gpu_burn.PTX


def test_a_node_without_the_driver_is_told_so():
    with pytest.raises(gpu_burn.CudaError, match="libcuda.so.1.*not on this node"):
        gpu_burn.load_driver(("libdgxspark-no-such-driver.so",))


def test_as_a_script_it_runs_alone_and_says_what_it_did(driver):
    env = dict(os.environ, LD_LIBRARY_PATH=str(driver.parent))
    res = subprocess.run([sys.executable, "-c", gpu_burn.script(), "0.3"], env=env, capture_output=True, text=True,
                         timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("GPU 0: ") and " kernels in 0 s" in res.stdout
