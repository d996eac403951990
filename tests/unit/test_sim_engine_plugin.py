"""The sim engine plugin (sim/engine/plugin): its mods stand-in runs without importing vLLM, and vLLM's queue
readers sleep where vLLM spins."""
import pathlib
import subprocess
import sys

PLUGIN = pathlib.Path(__file__).resolve().parents[2] / "sim" / "engine" / "plugin"


def test_the_mods_stand_in_does_not_import_vllm(tmp_path):
    # Each of the nine mod runs of a converge imported vLLM (and torch) for two constants: seconds of a
    # shared core each. A vLLM that fails when imported proves it is not.
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("raise SystemExit('vllm was imported')\n")
    code = ("import sys; import dgxspark_sim_vllm.mods, dgxspark_sim_vllm.faults as f; "
            "assert 'torch' not in sys.modules; print(f.MARK)")
    res = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": f"{PLUGIN}:{tmp_path}"},
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "dgxspark-sim mod applied" in res.stdout


def test_the_queue_readers_sleep_instead_of_spinning_in_vllms_busy_window(tmp_path):
    # vLLM's SpinCondition.wait spins on sched_yield within busy_loop_s of the last read; the plugin makes it
    # sleep 1 ms there and leaves the socket wait after the window to vLLM. A stand-in SpinCondition counts
    # the calls that reach vLLM's own wait.
    mq = tmp_path / "vllm" / "distributed" / "device_communicators"
    mq.mkdir(parents=True)
    for folder in (tmp_path / "vllm", tmp_path / "vllm" / "distributed", mq):
        (folder / "__init__.py").write_text("")
    (mq / "shm_broadcast.py").write_text(
        "class SpinCondition:\n"
        "    calls = 0\n"
        "    def __init__(self, last_read, busy_loop_s=1):\n"
        "        self.last_read, self.busy_loop_s = last_read, busy_loop_s\n"
        "    def wait(self, timeout_ms=None):\n"
        "        SpinCondition.calls += 1\n")
    code = ("import time; from dgxspark_sim_vllm import faults; "
            "from vllm.distributed.device_communicators.shm_broadcast import SpinCondition as S; "
            "faults._readers_poll_without_spinning(); faults._readers_poll_without_spinning(); "
            "busy = S(time.monotonic()); t0 = time.monotonic(); [busy.wait() for _ in range(20)]; "
            "slept = time.monotonic() - t0; idle = S(time.monotonic() - 5); idle.wait(); "
            "print(S.calls, slept >= 0.02)")
    res = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": f"{PLUGIN}:{tmp_path}"},
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    # Only the wait after the window reached vLLM's; the 20 in the window slept 1 ms each.
    assert res.stdout.split() == ["1", "True"], res.stdout
