"""The sim engine plugin (sim/engine/plugin): its mods stand-in runs without importing vLLM, and vLLM's queue
readers sleep where vLLM spins."""
import os
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


def test_the_modelled_page_cache_is_the_weights_resident_share(tmp_path, monkeypatch):
    # The GB10's page cache is modelled from the node's real one: weights read since the last drop hold memory, weights
    # evicted hold none. Eviction here is the file's own (fadvise DONTNEED), the same pages a drop would take.
    faults = _faults()
    model = tmp_path / "models--org--tiny" / "snapshots" / "abc"
    model.mkdir(parents=True)
    weights = model / "model.safetensors"
    weights.write_bytes(_safetensors(4 << 20))
    (model / "tokenizer.json").write_bytes(b"{}")  # read at every start, before the memory check: not counted
    monkeypatch.setenv("HF_HOME", str(tmp_path.parent))
    (tmp_path.parent / "hub").mkdir(exist_ok=True)
    monkeypatch.setenv("DGXSPARK_SIM_RECIPE_MEMORY", '{"weights_gib": 60}')
    assert faults._weight_files(str(model)) == [str(weights)]
    weights.read_bytes()
    cache, share = faults.page_cache_gib(str(model))
    assert share > 0.9 and cache > 54
    _evict(weights)
    cache, share = faults.page_cache_gib(str(model))
    assert share < 0.1, share
    monkeypatch.delenv("DGXSPARK_SIM_RECIPE_MEMORY")
    assert faults.page_cache_gib(str(model)) == (0.0, 0.0)


def _evict(path):
    """Take the file's pages out of the page cache (the same pages a drop would take)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _safetensors(data_bytes, header_bytes=20000):
    """A safetensors file's bytes: the 8-byte header length, the JSON header (padded with spaces, as the format
    allows, to a real model's header size: reading it takes more than one read), then tensor data."""
    header = b'{"w": {"dtype": "U8", "shape": [%d], "data_offsets": [0, %d]}}' % (data_bytes, data_bytes)
    header = header.ljust(header_bytes)
    return len(header).to_bytes(8, "little") + header + b"\1" * data_bytes


def test_a_header_read_holds_no_modelled_page_cache(tmp_path, monkeypatch):
    # vLLM reads every safetensors header at start, after the unit's page-cache drop. On a GB10 that caches a few
    # KiB of 96.5 GiB; counted as a share of the tiny model's file, it was 1.3 GiB, and the restart was refused.
    faults = _faults()
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(_safetensors(4 << 20))
    monkeypatch.setenv("DGXSPARK_SIM_RECIPE_MEMORY", '{"weights_gib": 96.5}')
    _evict(weights)
    with open(weights, "rb") as handle:  # as a reader of the header does: buffered, with the kernel's read-ahead
        handle.read(int.from_bytes(handle.read(8), "little"))
    assert faults.resident_share([str(weights)]) == 0.0
    assert faults.page_cache_gib(str(tmp_path)) == (0.0, 0.0)


def test_a_point_read_in_the_weights_holds_no_modelled_page_cache_and_a_partial_load_counts(tmp_path, monkeypatch):
    # One small read deep in the tensor data caches a few pages (its first read-ahead window): on a GB10 a few KiB, not
    # a share of the weights. Weights read through count, a part read through as that part.
    faults = _faults()
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(_safetensors(4 << 20))
    _evict(weights)
    with open(weights, "rb") as handle:
        handle.seek(3 << 20)
        handle.read(64)
    points = []
    assert faults.resident_share([str(weights)], points) == 0.0
    assert points and points[0] > 0, points
    with open(weights, "rb") as handle:
        handle.seek(2 << 20)
        handle.read(1 << 20)
    share = faults.resident_share([str(weights)])
    assert 0.25 < share < 0.95, share  # the read-ahead past it depends on the disk
    assert faults._bulk_pages([1, 1, 0, 1, 1, 1, 0, 1], 3) == 3


def _faults():
    sys.path.insert(0, str(PLUGIN))
    try:
        from dgxspark_sim_vllm import faults  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.remove(str(PLUGIN))
    return faults


def test_rays_own_processes_are_counted_and_the_engines_are_not(tmp_path):
    # Under Ray a GB10 loses what Ray's daemons and its idle workers hold; the engine's rank (a Ray actor) and
    # driver are the engine's own memory, which the field report's free memory already had.
    faults = _faults()
    # Command lines as a sim head shows them under Ray (vLLM 0.32's ranks are ray::RayWorkerProc).
    procs = {
        "1": ("/opt/venv/bin/python3 /opt/venv/bin/ray start --block --head --port 29501", 88 * 1024),
        "2": ("/opt/venv/lib/python3.11/site-packages/ray/core/src/ray/gcs/gcs_server --log_dir=/tmp/ray", 45 * 1024),
        "3": ("/opt/venv/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet --raylet_socket_name=x", 26 * 1024),
        "4": ("/opt/venv/bin/python3 /opt/venv/lib/python3.11/site-packages/ray/dashboard/dashboard.py --host=127.0.0.1",
              69 * 1024),
        "5": ("ray::DashboardAgent", 64 * 1024),
        "6": ("/opt/venv/bin/python3 -m ray.util.client.server --address=10.231.101.10:29501", 50 * 1024),
        "7": ("ray::IDLE", 100 * 1024),
        "8": ("ray::RayWorkerProc.run", 1497 * 1024),
        "9": ("ray::RayWorkerWrapper.execute_method", 900 * 1024),
        "10": ("/opt/venv/bin/python3 /opt/venv/bin/vllm serve m --distributed-executor-backend ray", 485 * 1024),
        "11": ("VLLM::EngineCore", 460 * 1024),
        "12": ("docker run --rm --name dgxspark-ray image ray start --block", 16 * 1024),
        "13": ("/usr/sbin/sshd -D", 5 * 1024),
    }
    for pid, (cmd, pss) in procs.items():
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "cmdline").write_bytes(cmd.replace(" ", "\0").encode() + b"\0")
        (tmp_path / pid / "smaps_rollup").write_text(f"Rss: {pss * 2} kB\nPss: {pss} kB\n")
    (tmp_path / "99").mkdir()  # a process that ended between the listing and the read
    gib, count = faults.ray_own_gib(str(tmp_path))
    assert count == 7
    assert abs(gib - (88 + 45 + 26 + 69 + 64 + 50 + 100) / 1024) < 1e-9
