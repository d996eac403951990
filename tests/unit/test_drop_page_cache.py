"""The serving unit's page-cache drop (roles/serve/files/drop_page_cache.py): one task pinned to every live Ray node;
a node whose drop fails is named and the script says so by its exit, never by raising (the unit's ExecStartPre
ignores its status: the engine's own check then speaks)."""
import importlib.util
import pathlib
import sys
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
        return ("node-" + ref, 1000, 9000)


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


def test_all_dropped_is_a_clean_exit(monkeypatch):
    install_strategy(monkeypatch)
    assert load().main(FakeRay([{"NodeID": "a", "Alive": True}])) == 0
