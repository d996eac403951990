"""engine_health: healthy ends the wait; a dead or restarted engine fails at once with its log; a stall fails."""
import pytest

from ansible.module_utils import basic
from ansible_collections.dgxspark.vllm.plugins.modules import engine_health


class FakeEngine:
    """systemctl show / journalctl answers that follow a script of states, one per poll."""

    def __init__(self, states, cursors=None):
        self.states, self.cursors, self.polls = states, cursors, 0
        self.last_entry = ""
        self.log_queries = []

    def state(self):
        return self.states[min(self.polls, len(self.states) - 1)]

    def run_command(self, module, args, **kwargs):
        if args[1] == "show":
            s = self.state()
            self.polls += 1
            return 0, "".join("%s=%s\n" % kv for kv in s.items() if kv[0] != "healthy"), ""
        if "json" in args:
            return 0, self.last_entry, ""
        if "--show-cursor" in args:
            cursor = self.cursors[min(self.polls, len(self.cursors) - 1)] if self.cursors else "c%d" % self.polls
            return 0, "-- cursor: %s\n" % cursor, ""
        self.log_queries.append(args)
        return 0, ("(EngineCore pid=9) ERROR [core.py:1510] ValueError: Unknown attention backend: 'B12X'\n"
                   "EngineCore failed to start.\nRuntimeError: Engine core initialization failed. See root cause above.\n"), ""


RUNNING = {"ActiveState": "active", "SubState": "running", "NRestarts": "0", "InvocationID": "aaa",
           "ExecMainStatus": "0", "Result": "success", "healthy": False}


@pytest.fixture
def engine(monkeypatch):
    def make(states, cursors=None):
        fake = FakeEngine(states, cursors)
        monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, args, **kw: fake.run_command(self, args))
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: name)
        monkeypatch.setattr(engine_health, "healthy", lambda url: fake.state().get("healthy", False))
        monkeypatch.setattr(engine_health.time, "sleep", lambda s: None)
        return fake
    return make


ARGS = {"url": "http://127.0.0.1:8000/health", "unit": "dgxspark-vllm", "poll": 1}


def test_healthy_ends_the_wait(run_module, engine):
    engine([RUNNING, RUNNING, dict(RUNNING, healthy=True)])
    out = run_module(engine_health.main, ARGS)
    assert not out["failed"] and out["changed"] is False


def test_a_restart_fails_at_once_with_the_old_invocations_log(run_module, engine):
    fake = engine([RUNNING, dict(RUNNING, SubState="auto-restart", ExecMainStatus="1"),
                   dict(RUNNING, InvocationID="bbb", NRestarts="1")])
    out = run_module(engine_health.main, ARGS)
    assert out["failed"] and fake.polls <= 3
    assert "died" in out["msg"] and "exit status 1" in out["msg"]
    assert "Reason: ValueError: Unknown attention backend: 'B12X'." in out["msg"]
    assert fake.log_queries[-1][-1] == "_SYSTEMD_INVOCATION_ID=aaa"


def test_the_failure_says_how_long_after_the_exit_it_was_noticed(run_module, engine, monkeypatch):
    monkeypatch.setattr(engine_health.time, "monotonic", lambda: 1000.0)
    engine([RUNNING, dict(RUNNING, SubState="auto-restart", ExecMainStatus="1",
                          ExecMainExitTimestampMonotonic=str(996_500_000))])
    out = run_module(engine_health.main, ARGS)
    assert out["failed"] and out["exited_ago"] == 3.5
    assert "(noticed 4 s after the exit)" in out["msg"] or "(noticed 3 s after the exit)" in out["msg"]


def test_after_a_restart_the_old_engines_last_line_dates_the_exit(run_module, engine, monkeypatch):
    monkeypatch.setattr(engine_health.time, "time", lambda: 2000.0)
    fake = engine([RUNNING, dict(RUNNING, InvocationID="bbb", NRestarts="1")])
    fake.last_entry = '{"MESSAGE": "bye", "__REALTIME_TIMESTAMP": "1988000000"}\n'
    out = run_module(engine_health.main, ARGS)
    assert out["failed"] and out["exited_ago"] == 12.0 and "(noticed 12 s after the exit)" in out["msg"]


def test_a_new_invocation_counts_as_a_death(run_module, engine):
    fake = engine([RUNNING, dict(RUNNING, InvocationID="bbb", NRestarts="1")])
    out = run_module(engine_health.main, ARGS)
    assert out["failed"] and "restarted it" in out["msg"]
    # The log is the dead engine's (the wait's first invocation), not the one systemd started after it.
    assert fake.log_queries and all(q[-1] == "_SYSTEMD_INVOCATION_ID=aaa" for q in fake.log_queries)


def test_a_new_invocation_alone_counts_as_a_death(run_module, engine):
    # A restart systemd did not count (systemctl restart by hand or by another run) leaves NRestarts as it was.
    engine([RUNNING, dict(RUNNING, InvocationID="bbb")])
    out = run_module(engine_health.main, dict(ARGS, timeout=5))  # missed, it would wait the whole timeout
    assert out["failed"] and "restarted it" in out["msg"]


def test_progress_keeps_the_wait_going_and_silence_ends_it(run_module, engine, monkeypatch):
    clock = iter(range(0, 10000, 30))
    monkeypatch.setattr(engine_health.time, "monotonic", lambda: next(clock))
    # the journal moves for a while, then stays put: "stuck" after stall_timeout, not the whole timeout
    fake = engine([RUNNING], cursors=["c0", "c1", "c2", "c3"] + ["c3"] * 100)
    out = run_module(engine_health.main, dict(ARGS, stall_timeout=100, timeout=5000))
    assert out["failed"] and "stuck" in out["msg"] and "no new log line" in out["msg"]
    assert 4 < fake.polls < 20


def test_timeout_while_progressing(run_module, engine, monkeypatch):
    clock = iter(range(0, 10000, 50))
    monkeypatch.setattr(engine_health.time, "monotonic", lambda: next(clock))
    engine([RUNNING])
    out = run_module(engine_health.main, dict(ARGS, stall_timeout=10000, timeout=300))
    assert out["failed"] and "not healthy within 300 s" in out["msg"]


def test_reason_skips_the_wrappers_around_the_root_cause():
    log = ("(APIServer pid=7) WARNING 12-01 [system_utils.py:255] Found ulimit of 1024. This can cause fd limit errors "
           "like `OSError: [Errno 24] Too many open files`.\n"
           "ray.exceptions.RayTaskError(RuntimeError): ray::RayWorkerProc.initialize_worker() (pid=1)\n"
           "RuntimeError: dgxspark-sim (modelled): the rank on 10.0.0.2 started with OMP_NUM_THREADS=unset\n"
           "RuntimeError: Engine core initialization failed. See root cause above.\n")
    assert engine_health.reason(log).startswith("RuntimeError: dgxspark-sim (modelled): the rank on 10.0.0.2")
    assert engine_health.reason("no error here") == ""


def test_a_pending_restart_reads_as_such_not_as_success():
    # systemd keeps Result=success while a restart is scheduled, even after a failed process.
    start = {"InvocationID": "a", "NRestarts": "0", "ActiveState": "active", "SubState": "running"}
    now = dict(start, ActiveState="activating", SubState="auto-restart", Result="success")
    assert engine_health.died(start, now) == "it exited (auto-restart)"
    assert engine_health.died(start, dict(now, Result="exit-code")) == "it exited (exit-code)"
    assert engine_health.died(start, start) is None
