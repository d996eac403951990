"""The serving unit's page-cache drop (roles/serve/files/drop_page_cache.py): one task pinned to every live Ray node;
a node whose drop fails is named and the script says so by its exit, never by raising (the unit's ExecStartPre
ignores its status: the engine's own check then speaks)."""
import importlib.util
import pathlib
import subprocess
import sys
import time
import types

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "roles" / "serve" / "files" / "drop_page_cache.py"


def load():
    spec = importlib.util.spec_from_file_location("drop_page_cache", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeRay:
    """Ray as the script uses it: nodes, a remote task placed by node, get with a timeout."""

    def __init__(self, nodes, fail=()):
        self._nodes, self.fail, self.placed = nodes, set(fail), []

    def init(self, **kwargs):
        self.init_kwargs = kwargs

    def nodes(self):
        return self._nodes

    def remote(self, **options):
        assert options == {"num_cpus": 0, "max_retries": 0}
        ray = self

        class Task:
            def __init__(self, fn):
                self.fn = fn

            def options(self, scheduling_strategy):
                ray.placed.append((scheduling_strategy.node_id, scheduling_strategy.soft))
                return types.SimpleNamespace(remote=lambda: scheduling_strategy.node_id)
        return Task

    def get(self, ref, timeout):
        assert timeout > 0
        if ref in self.fail:
            raise RuntimeError("task failed\nPermissionError: [Errno 13] Permission denied: '/proc/sys/vm/drop_caches'")
        return ("node-" + ref, 1000, 9000, ["77 ray::RayWorkerProc (killed after 10 s)"] if ref == "a" else [])


def install_strategy(monkeypatch):
    strategies = types.ModuleType("ray.util.scheduling_strategies")
    strategies.NodeAffinitySchedulingStrategy = lambda node_id, soft: types.SimpleNamespace(node_id=node_id, soft=soft)
    for name, module in (("ray", types.ModuleType("ray")), ("ray.util", types.ModuleType("ray.util")),
                         ("ray.util.scheduling_strategies", strategies)):
        monkeypatch.setitem(sys.modules, name, module)


def test_every_live_node_gets_a_pinned_drop_and_a_failed_one_is_named(monkeypatch, capsys):
    install_strategy(monkeypatch)
    ray = FakeRay([{"NodeID": "a", "Alive": True, "NodeManagerAddress": "10.0.0.1"},
                   {"NodeID": "b", "Alive": False, "NodeManagerAddress": "10.0.0.2"},
                   {"NodeID": "c", "Alive": True, "NodeManagerAddress": "10.0.0.3"}], fail={"c"})
    assert load().main(ray) == 1
    assert ray.placed == [("a", False), ("c", False)]
    assert ray.init_kwargs["address"] == "auto"
    out = capsys.readouterr().out
    assert "page cache dropped on node-a (10.0.0.1): MemFree 1000 -> 9000 MiB" in out
    assert "page cache NOT dropped on 10.0.0.3: PermissionError: [Errno 13]" in out
    assert "ranks an earlier engine left on node-a (10.0.0.1), ended before the drop: 77 ray::RayWorkerProc" in out


def test_all_dropped_is_a_clean_exit(monkeypatch):
    install_strategy(monkeypatch)
    assert load().main(FakeRay([{"NodeID": "a", "Alive": True}])) == 0


def rank(tmp_path, title, seconds):
    """A process titled as a Ray rank actor, seen through a /proc of its own (the real one may hold a sim's ranks)."""
    child = subprocess.Popen([title, str(seconds)], executable="sleep")
    for _ in range(200):  # the new title shows in /proc a moment after the exec (empty before)
        if pathlib.Path("/proc/%d/cmdline" % child.pid).read_bytes():
            break
        time.sleep(0.01)
    proc = tmp_path / "proc"
    proc.mkdir(exist_ok=True)
    (proc / str(child.pid)).symlink_to("/proc/%d" % child.pid)
    return child, str(proc)


def test_a_rank_an_earlier_engine_left_is_killed_before_the_drop(tmp_path):
    child, proc = rank(tmp_path, "ray::RayWorkerProc.load_model", 60)
    other, _ = rank(tmp_path, "ray::IDLE", 60)
    try:
        module = load()
        assert module.ranks(proc) == [(child.pid, "ray::RayWorkerProc.load_model")]
        ended = module.end_ranks(grace=0.5, proc=proc)
        assert ended == ["%d ray::RayWorkerProc.load_model (killed after 0 s)" % child.pid], ended
        assert child.wait(timeout=5) == -9
        assert other.poll() is None, "an idle Ray worker is not a rank"
    finally:
        for process in (child, other):
            process.kill()
            process.wait()


def test_a_rank_that_ends_in_the_grace_is_left_to_ray_and_none_is_a_no_op(tmp_path):
    child, proc = rank(tmp_path, "ray::RayWorkerWrapper", 2)
    try:
        ended = load().end_ranks(grace=10, proc=proc)
        assert len(ended) == 1 and "ended by Ray after" in ended[0], ended
        assert child.wait(timeout=5) == 0
    finally:
        child.kill()
        child.wait()
    assert load().end_ranks(grace=10, proc=str(tmp_path / "proc")) == []
