"""The serving watchdog: its judgement (module_utils/_watchdog.py) and its daemon
(roles/watchdog/files/dgxspark_watchdog.py) against a fake engine and a fake systemctl."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.dgxspark.vllm.plugins.module_utils import _gpu_watch as gpu_watch
from ansible_collections.dgxspark.vllm.plugins.module_utils import _watchdog as wd

ROOT = pathlib.Path(__file__).resolve().parents[4]


def obs(t, health=200, ok=False, tokens=100.0, running=1.0, error="no answer within 60 s"):
    return {"t": t, "health": health, "canary_ok": ok, "canary_error": "" if ok else error, "tokens": tokens,
            "running": running}


def feed(judge, observations):
    verdict = None
    for o in observations:
        judge.add(o)
        verdict = judge.verdict(o)
    return verdict


def test_metrics_are_summed_over_their_label_sets_and_others_ignored():
    text = ('# HELP x\nvllm:generation_tokens_total{model_name="a"} 10\nvllm:generation_tokens_total{model_name="b"} 5\n'
            'vllm:prompt_tokens_total{model_name="a"} 7.0\nvllm:num_requests_running{model_name="a"} 2\n'
            'vllm:other_total 99\ngarbage line\n')
    metrics = wd.parse_metrics(text)
    assert metrics == {"vllm:generation_tokens_total": 15.0, "vllm:prompt_tokens_total": 7.0,
                       "vllm:num_requests_running": 2.0}
    assert wd.tokens(metrics) == 22.0
    assert wd.tokens({}) is None


def test_failed_canaries_with_still_counters_are_a_hang_once_the_window_is_spanned():
    judge = wd.Judge(hang_seconds=180)
    assert feed(judge, [obs(0), obs(30), obs(90)])["state"] == "suspect"
    verdict = feed(judge, [obs(150), obs(180)])
    assert verdict["state"] == "hung" and verdict["since"] == 0
    assert "token counters did not move" in verdict["why"] and "5 times over 180 s" in verdict["why"]


def test_tokens_since_the_last_check_serve_as_the_canary():
    assert wd.moved(10.0, 14.0) and not wd.moved(10.0, 10.0) and not wd.moved(None, 5.0) and not wd.moved(5.0, None)
    judge = wd.Judge(hang_seconds=60)
    verdict = feed(judge, [obs(0), obs(30), dict(obs(60, ok=True), canary_skipped=True)])
    assert verdict["state"] == "serving" and "no canary sent" in verdict["why"]
    assert judge.failing == []


def test_one_slow_answer_is_not_a_hang_however_long():
    judge = wd.Judge(hang_seconds=60, min_failures=2)
    assert feed(judge, [obs(0, ok=True)]) ["state"] == "serving"
    judge = wd.Judge(hang_seconds=0, min_failures=2)
    assert feed(judge, [obs(500)])["state"] == "suspect"


def test_a_long_request_producing_tokens_is_busy_not_hung():
    judge = wd.Judge(hang_seconds=60)
    verdict = feed(judge, [obs(t, tokens=100.0 + t) for t in range(0, 400, 30)])
    assert verdict["state"] == "busy" and "busy, not hung" in verdict["why"]


def test_a_success_or_a_down_engine_starts_the_window_afresh():
    judge = wd.Judge(hang_seconds=60)
    feed(judge, [obs(0), obs(40)])
    assert feed(judge, [obs(50, ok=True)])["state"] == "serving"
    assert feed(judge, [obs(60), obs(100)])["state"] == "suspect"
    assert feed(judge, [obs(110, health=0)])["state"] == "down"
    assert feed(judge, [obs(120), obs(170)])["state"] == "suspect"
    assert feed(judge, [obs(180)])["state"] == "hung"


def test_a_health_silent_past_the_start_timeout_is_a_start_that_hangs():
    judge = wd.Judge(hang_seconds=60, start_seconds=100)
    assert feed(judge, [obs(0, health=0), obs(50, health=503)])["state"] == "down"
    verdict = feed(judge, [obs(100, health=503)])
    assert verdict["state"] == "hung" and verdict["since"] == 0 and "a start that hangs" in verdict["why"], verdict
    assert "503 for 100 s (3 checks)" in verdict["why"], verdict


def test_a_start_hang_needs_two_silent_checks_and_restarts_its_clock_on_an_answer_or_a_reset():
    judge = wd.Judge(hang_seconds=60, start_seconds=10)
    assert feed(judge, [obs(0, health=0)])["state"] == "down"  # one silent check is never enough
    assert feed(judge, [obs(5, ok=True)])["state"] == "serving"
    assert feed(judge, [obs(6, health=0), obs(15, health=0)])["state"] == "down"
    judge.reset()  # the unit was not active (systemd restarting the engine): a new start
    assert feed(judge, [obs(16, health=0), obs(25, health=0)])["state"] == "down"
    assert feed(judge, [obs(26, health=0)])["state"] == "hung"


def test_without_a_start_timeout_a_silent_health_stays_the_units_business():
    judge = wd.Judge(hang_seconds=60)
    assert feed(judge, [obs(t, health=0) for t in range(0, 100000, 1000)])["state"] == "down"


def test_without_metrics_the_canary_alone_decides():
    judge = wd.Judge(hang_seconds=20)
    verdict = feed(judge, [obs(0, tokens=None, running=None), obs(20, tokens=None, running=None)])
    assert verdict["state"] == "hung" and "no token counters" in verdict["why"]


def test_the_budget_counts_restarts_inside_its_window():
    assert wd.budget_left([], 1000, 3, 3600) == 3
    assert wd.budget_left([10, 500, 990], 1000, 3, 3600) == 0
    assert wd.budget_left([10, 500, 990], 4000, 3, 3600) == 1
    assert wd.budget_left([10, 500, 990], 5000, 3, 3600) == 3


def test_wedged_clocks_are_read_from_every_nodes_gpu_watch():
    states = {"w": {"findings": [{"gpu": 0, "finding": "wedged", "why": "pinned"}]},
              "h": {"findings": [{"gpu": 0, "finding": "busy_low_power", "why": "spin"}]}, "x": None}
    assert wd.wedged(states) == [("w", 0, "pinned")]


def test_prometheus_text_carries_the_verdict_and_the_alert():
    text = wd.prometheus_text({"state": "hung", "gave_up": True, "restarts_total": 3, "hangs_total": 4,
                               "canary_seconds": 60.0, "updated_at": 5}, {"node": "h", "model_name": 'a"b'})
    assert 'dgxspark_watchdog_state{model_name="a\\"b",node="h",state="hung"} 1' in text
    assert 'dgxspark_watchdog_gave_up{model_name="a\\"b",node="h"} 1' in text
    assert 'dgxspark_watchdog_restarts_total{model_name="a\\"b",node="h"} 3' in text


# The daemon, run as a process against a fake engine and a fake systemctl/journalctl on PATH.

class FakeEngine(BaseHTTPRequestHandler):
    hung = threading.Event()
    traffic = threading.Event()  # users' requests decoding: the token counter moves between checks
    silent = threading.Event()  # a start that hangs: /health never answers 200
    tokens = [0]
    canaries = [0]

    def log_message(self, *args):  # pylint: disable=arguments-differ
        pass

    def reply(self, code, body):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # pylint: disable=invalid-name
        if self.path == "/health":
            self.reply(503 if self.silent.is_set() else 200, "")
        elif self.path == "/metrics":
            if self.traffic.is_set():
                self.tokens[0] += 10
            self.reply(200, "vllm:generation_tokens_total %d\nvllm:num_requests_running 1\n" % self.tokens[0])
        elif self.path == "/v1/models":
            self.reply(200, json.dumps({"data": [{"id": "minimax-m3"}]}))

    def do_POST(self):  # pylint: disable=invalid-name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.canaries[0] += 1
        if self.hung.is_set():
            time.sleep(1.0)  # past the canary's deadline, no token
            return
        self.tokens[0] += 4
        self.reply(200, json.dumps({"choices": [{"text": "pong"}]}))


FAKE_SYSTEMCTL = """#!/bin/sh
echo "$*" >> "{calls}"
case "$1" in
  is-active) exit 0 ;;
  start) [ "$2" = "dgxspark-vllm.service" ] && rm -f "{hang}" ;;
esac
exit 0
"""


@pytest.fixture(name="daemon")
def fixture_daemon(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeEngine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    lib, binp = tmp_path / "lib", tmp_path / "bin"
    lib.mkdir()
    binp.mkdir()
    for src in (ROOT / "roles/watchdog/files/dgxspark_watchdog.py", ROOT / "plugins/module_utils/_watchdog.py", ROOT / "plugins/module_utils/_daemon.py",
                ROOT / "plugins/module_utils/_ssh.py"):
        shutil.copy(src, lib / src.name)
    calls, hang = tmp_path / "calls", tmp_path / "hang"
    (binp / "systemctl").write_text(FAKE_SYSTEMCTL.format(calls=calls, hang=hang))
    (binp / "ssh").write_text("#!/bin/sh\necho 'ssh: connect to host 10.0.0.2 port 22: No route to host' >&2\nexit 255\n")
    (binp / "journalctl").write_text("#!/bin/sh\necho 'engine: waiting in all_reduce'\n")
    for f in binp.iterdir():
        f.chmod(0o755)
    (tmp_path / "gpu.json").write_text(json.dumps({"findings": []}))

    def start(**over):
        cfg = {"node": "h", "nodes": [{"name": "h", "address": "10.0.0.1"}], "url": "http://127.0.0.1:%d" % server.server_port,
               "key_file": str(tmp_path / "none.env"), "model": "", "canary_tokens": 4, "canary_timeout": 0.3,
               "interval": 0.2, "hang_seconds": 1, "min_failures": 2, "budget": 1, "budget_window": 3600,
               "recover_timeout": 5, "lock_file": str(tmp_path / "lock"), "lock_max_age": 60, "backend": "ray",
               "engine_unit": "dgxspark-vllm", "ray_unit": "dgxspark-ray", "gpu_watch_state": str(tmp_path / "gpu.json"),
               "ssh": {"user": "spark", "home": str(tmp_path)}, "state_file": str(tmp_path / "state.json"),
               "textfile": str(tmp_path / "w.prom"), "labels": {}}
        cfg.update(over)
        (tmp_path / "cfg.json").write_text(json.dumps(cfg))
        env = dict(os.environ, PATH="%s:%s" % (binp, os.environ["PATH"]))
        return subprocess.Popen([sys.executable, str(lib / "dgxspark_watchdog.py"), str(tmp_path / "cfg.json")],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def state():
        try:
            return json.loads((tmp_path / "state.json").read_text())
        except (OSError, ValueError):
            return {}

    def until(pred, timeout=20):
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if pred(state()):
                return state()
            time.sleep(0.1)
        raise AssertionError(state())

    procs = []
    yield {"start": lambda **o: procs.append(start(**o)) or procs[-1], "state": state, "until": until,
           "calls": calls, "hang": hang, "lock": tmp_path / "lock", "gpu": tmp_path / "gpu.json"}
    for p in procs:
        p.kill()
        p.wait()
    FakeEngine.hung.clear()
    FakeEngine.traffic.clear()
    FakeEngine.silent.clear()
    server.shutdown()


def hang_until_restart(daemon):
    daemon["hang"].write_text("")
    FakeEngine.hung.set()

    def watch():  # the fake systemctl's engine start removes the hang file: the new engine answers
        while daemon["hang"].exists():
            time.sleep(0.05)
        FakeEngine.hung.clear()
    threading.Thread(target=watch, daemon=True).start()


def test_the_daemon_restarts_a_hung_group_in_order_and_serves_again(daemon):
    daemon["start"]()
    daemon["until"](lambda s: s.get("state") == "serving")
    hang_until_restart(daemon)
    done = daemon["until"](lambda s: s.get("restarts_total") == 1 and s.get("state") == "serving")
    assert done["last_hang"]["action"] == "restarted" and done["last_hang"]["engine_log"] == ["engine: waiting in all_reduce"]
    calls = daemon["calls"].read_text().splitlines()
    assert [c for c in calls if not c.startswith("is-active")] == [
        "stop dgxspark-vllm.service", "stop dgxspark-ray.service", "start dgxspark-ray.service", "start dgxspark-vllm.service"]


def test_a_start_that_hangs_is_restarted_as_a_hang(daemon):
    # The unit stays active and /health never answers: without start_timeout the daemon would wait for ever.
    daemon["hang"].write_text("")
    FakeEngine.silent.set()

    def watch():  # the restarted engine starts for real
        while daemon["hang"].exists():
            time.sleep(0.05)
        FakeEngine.silent.clear()
    threading.Thread(target=watch, daemon=True).start()
    daemon["start"](start_timeout=1)
    done = daemon["until"](lambda s: s.get("restarts_total") == 1 and s.get("state") == "serving")
    assert "a start that hangs" in done["last_hang"]["why"] and done["last_hang"]["action"] == "restarted", done


def test_the_daemon_waits_while_a_run_holds_the_deployment(daemon):
    daemon["lock"].write_text("")
    daemon["start"]()
    hang_until_restart(daemon)
    daemon["until"](lambda s: s.get("state") == "held")
    time.sleep(2)
    assert daemon["state"]()["restarts_total"] == 0
    daemon["lock"].unlink()
    daemon["until"](lambda s: s.get("restarts_total") == 1 and s.get("state") == "serving")


def test_the_daemon_reports_a_wedged_clock_instead_of_restarting(daemon):
    daemon["gpu"].write_text(json.dumps({"findings": [{"gpu": 0, "finding": "wedged", "why": "pinned at 2411 MHz"}]}))
    daemon["start"]()
    hang_until_restart(daemon)
    wedged = daemon["until"](lambda s: s.get("state") == "wedged")
    assert wedged["restarts_total"] == 0 and "power-cycle" in wedged["last_hang"]["action"]


def test_out_of_budget_the_daemon_stops_restarting_and_raises_the_alert(daemon):
    daemon["start"](budget=1)
    daemon["until"](lambda s: s.get("state") == "serving")
    hang_until_restart(daemon)
    daemon["until"](lambda s: s.get("restarts_total") == 1 and s.get("state") == "serving")
    FakeEngine.hung.set()  # hangs again, and this time a restart would not clear it
    gave_up = daemon["until"](lambda s: s.get("gave_up"))
    assert gave_up["restarts_total"] == 1 and "budget is spent" in gave_up["last_hang"]["action"]
    assert "dgxspark_watchdog_gave_up{node=\"h\"} 1" in (daemon["calls"].parent / "w.prom").read_text()
    FakeEngine.hung.clear()
    daemon["until"](lambda s: not s.get("gave_up") and s.get("state") == "serving")


def test_while_tokens_come_out_no_canary_is_sent_and_the_engine_is_serving(daemon):
    daemon["start"]()
    daemon["until"](lambda s: s.get("state") == "serving")
    FakeEngine.traffic.set()
    daemon["until"](lambda s: "no canary sent" in s.get("verdict", ""))
    sent = FakeEngine.canaries[0]
    time.sleep(1.5)  # ~7 checks
    seen = daemon["state"]()
    assert FakeEngine.canaries[0] == sent and seen["state"] == "serving", seen
    assert "no canary sent" in seen["verdict"], seen
    FakeEngine.traffic.clear()
    t0 = time.monotonic()
    while FakeEngine.canaries[0] == sent and time.monotonic() - t0 < 20:
        time.sleep(0.1)
    assert FakeEngine.canaries[0] > sent  # still counters: the canary checks again


def test_a_worker_it_cannot_reach_is_named_and_nothing_is_stopped(daemon):
    daemon["start"](nodes=[{"name": "h", "address": ""}, {"name": "w", "address": "10.0.0.2"}],
                    ssh={"user": "spark", "key": "/k", "known_hosts": "/kh"})
    daemon["until"](lambda s: s.get("state") == "serving")
    FakeEngine.hung.set()
    hung = daemon["until"](lambda s: (s.get("last_hang") or {}).get("action", "").startswith("none: cannot run"))
    assert "w (ssh: connect to host 10.0.0.2 port 22: No route to host)" in hung["last_hang"]["action"], hung
    assert hung["restarts_total"] == 0
    assert [c for c in daemon["calls"].read_text().splitlines() if not c.startswith("is-active")] == []


def test_a_wedge_as_the_gpu_watch_reports_it_is_what_the_watchdog_reads():
    # The finding name is the GPU watch's own: a fixture that spelled it otherwise let a wrong name pass.
    window = gpu_watch.Window(wedge_seconds=30, stuck_seconds=60)
    report = None
    for i in range(5):
        now = 1000.0 + 10 * i
        window.add(now, gpu_watch.parse_sample("0, GPU-x, NVIDIA GB10, P0, 611, 10.1, 95, 0x0000000000000000"))
        report = window.judge(now)
    assert [(node, gpu) for node, gpu, _ in wd.wedged({"spark-head": report})] == [("spark-head", "0")]
