"""The serving watchdog on the real-engine pair. The sim's hang (sim/engine: the worker's rank stops its step loop,
/health stays green, no token comes out) stays hung without it, waits while a run holds the deployment, and is
recovered by a group restart in order; a long request is serving, not a hang (its tokens stand in for the canary); out of budget it stops
restarting and raises the alert; a start that hangs is named. Runs after the countermeasures (which end with the pair serving) and puts the
watchdog's defaults back at the end."""
import json
import time

import serving_checks as sc

HOSTS = sc.inventory()
HEAD, WORKER = sc.head_and_worker(HOSTS)
KEY = HOSTS[HEAD]["serve_api_key"]
URL = "http://127.0.0.1:8000"
LOCK = "/run/dgxspark-vllm/deployment.lock"
# The sim's hang switch on the worker (sim/engine/plugin/dgxspark_sim_vllm/faults.py), in the node's stand-in state
# that its Ray container mounts: "once" hangs the running engine for good, anything else while the file is there.
HANG = "/etc/dgxspark-sim/engine-hang"
# The sim's start hang: while it is there, the worker's rank stops before its device starts.
START_HANG = "/etc/dgxspark-sim/engine-start-hang"
# Short windows so the scenario sees a hang in seconds (the defaults: 30 s checks, 180 s of failed canaries).
# A 4-token canary takes ~3 s on the sim's slowed clock (~0.55 s a step).
FAST = {"watchdog_interval": 5, "watchdog_hang_seconds": 15, "watchdog_canary_timeout": 10, "watchdog_budget": 2,
        "watchdog_recover_timeout": 900}
# Bounds for a wait, not measurements.
BOUND_S = 900


def state(head):
    return json.loads(head.check_output(f"sudo cat {sc.WATCHDOG_STATE}"))


def completion(head, max_tokens=4, timeout=10):
    return sc.api(head, URL + "/v1/completions", KEY, {"prompt": "ping", "max_tokens": max_tokens}, timeout=timeout)[0]


def answered(head, path, timeout):
    """The JSON a background curl wrote to path, once it has written it."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            return json.loads(head.check_output(f"cat {path}"))
        except ValueError:
            time.sleep(2)
    raise AssertionError(f"no answer in {path} within {timeout} s")


def set_watchdog(extra):
    res = sc.playbook("site.yml", "--tags", "watchdog", "-e", json.dumps(extra))
    assert res.returncode == 0, res.stdout[-4000:]


def test_the_watchdog_runs_on_the_head_only_and_sees_the_endpoint_serving():
    set_watchdog(FAST)
    head = sc.node(HEAD)
    assert head.service("dgxspark-watchdog").is_running and head.service("dgxspark-watchdog").is_enabled
    assert not sc.node(WORKER).file("/etc/systemd/system/dgxspark-watchdog.service").exists
    assert head.file("/etc/dgxspark-vllm/watchdog.json").mode == 0o600
    sc.watchdog_state(head, lambda s: s["state"] == "serving", 120)
    # The key is read from the serve role's root-only file, never copied or logged.
    assert not KEY or KEY not in head.check_output("sudo cat /etc/dgxspark-vllm/watchdog.json")
    assert not KEY or KEY not in sc.journal(head, "dgxspark-watchdog")


def test_a_long_request_is_serving_not_a_hang():
    head = sc.node(HEAD)
    before = state(head)
    # The recipe serves one sequence at a time (max-num-seqs 1): behind ~80 tokens (~45 s) a canary would miss its
    # deadline. The engine's token counters move meanwhile, which the watchdog takes as proof instead of a canary.
    body = json.dumps({"prompt": "long", "max_tokens": 80, "min_tokens": 80, "ignore_eos": True})
    head.check_output(f"(curl -s -m 300 -H 'Authorization: Bearer {KEY}' -H 'Content-Type: application/json' "
                      f"-d '{body}' {URL}/v1/completions >/tmp/watchdog-long.json 2>&1 &)")
    seen = sc.watchdog_state(head, lambda s: "no canary sent" in s.get("verdict", "") or s["state"] == "busy", 120)
    assert seen["state"] in ("serving", "busy"), seen
    answer = answered(head, "/tmp/watchdog-long.json", 300)
    assert answer["usage"]["completion_tokens"] == 80, answer
    after = sc.watchdog_state(head, lambda s: s["state"] == "serving" and "canary answered" in s["verdict"], 120)
    assert after["restarts_total"] == before["restarts_total"] and after["hangs_total"] == before["hangs_total"], after


def test_a_hang_stays_without_the_watchdog_waits_for_a_held_deployment_and_is_recovered():
    head, worker = sc.node(HEAD), sc.node(WORKER)
    old_pid = sc.engine_pid(head)
    head.check_output("sudo systemctl stop dgxspark-watchdog")
    worker.check_output(f"echo once | sudo tee {HANG}")
    # A user's request: the worker's rank stops at its first step, and the request never ends by itself.
    head.check_output("rm -f /tmp/watchdog-lost.txt; (curl -s -m 900 -o /dev/null -w '%{http_code} %{time_total}' "
                      f"-H 'Authorization: Bearer {KEY}' -H 'Content-Type: application/json' "
                      f"-d '{{\"prompt\": \"lost\", \"max_tokens\": 8}}' {URL}/v1/completions >/tmp/watchdog-lost.txt 2>&1 &)")
    # Without the watchdog: /health stays green and nothing comes out, for as long as one cares to look.
    time.sleep(30)
    assert sc.api(head, URL + "/health")[0] == 200 and completion(head) == 0
    assert sc.engine_pid(head) == old_pid
    assert not worker.file(HANG).exists  # the rank took it: the engine is hung, not waiting for the file
    # A run holds the deployment: the watchdog waits.
    head.check_output(f"sudo mkdir -p /run/dgxspark-vllm && sudo touch {LOCK}")
    before = state(head)
    head.check_output("sudo systemctl start dgxspark-watchdog")
    time.sleep(FAST["watchdog_hang_seconds"] + 2 * FAST["watchdog_canary_timeout"])
    held = state(head)
    assert held["state"] == "held" and held["restarts_total"] == before["restarts_total"], held
    assert sc.engine_pid(head) == old_pid
    t0 = time.monotonic()
    head.check_output(f"sudo rm -f {LOCK}")
    done = sc.watchdog_state(head, lambda s: s["restarts_total"] == before["restarts_total"] + 1
                             and s["state"] == "serving", BOUND_S)
    took = time.monotonic() - t0
    hang = done["last_hang"]
    assert hang["action"] == "restarted" and "token counters did not move" in hang["why"], hang
    assert hang["engine_log"] and set(hang["gpu_findings"]) == set(HOSTS), hang
    # The user's request held by the hung engine ends with the restart: lost, with an error its client sees.
    lost = head.check_output("cat /tmp/watchdog-lost.txt").split()
    assert lost and lost[0] != "200", lost
    print(f"hang declared {hang['detected_after_s']} s after the first failed canary, serving again "
          f"{hang['recovered_after_s']} s after the restart began; {took:.1f} s from the lock's release to a canary; "
          f"the request in flight ended with HTTP {lost[0]} after {lost[-1]} s")
    sc.figure("watchdog_hang", {"detected_after_s": hang["detected_after_s"], "recovered_after_s": hang["recovered_after_s"],
                                "release_to_serving_s": round(took, 1),
                                "request_in_flight": {"status": lost[0], "after_s": float(lost[-1])},
                                "settings": FAST, "engine": "real vLLM (CPU build), modelled GB10 clock"})
    assert sc.engine_pid(head) != old_pid
    assert completion(head, timeout=60) == 200
    log = sc.journal(head, "dgxspark-watchdog", 80)
    assert "restarting the group in order: stop dgxspark-vllm, stop dgxspark-ray, stop dgxspark-ray, " \
           "start dgxspark-ray, start dgxspark-ray, start dgxspark-vllm" in log, log
    for name in HOSTS:
        assert sc.node(name).service("dgxspark-ray").is_running


def test_out_of_budget_it_stops_restarting_and_raises_the_alert():
    head, worker = sc.node(HEAD), sc.node(WORKER)
    # One restart is in the window already; a budget of one leaves none.
    set_watchdog(dict(FAST, watchdog_budget=1))
    before = state(head)
    pid = sc.engine_pid(head)
    worker.check_output(f"echo always | sudo tee {HANG}")
    try:
        gave_up = sc.watchdog_state(head, lambda s: s["gave_up"], 300)
        assert gave_up["restarts_total"] == before["restarts_total"], gave_up
        assert "budget is spent" in gave_up["last_hang"]["action"], gave_up
        assert sc.engine_pid(head) == pid
        prom = head.check_output("sudo cat /var/lib/dgxspark-vllm/watchdog/dgxspark_watchdog.prom")
        assert f'dgxspark_watchdog_gave_up{{node="{HEAD}"}} 1' in prom, prom
        assert "not restarting: 1 restarts in the last 3600 s already" in sc.journal(head, "dgxspark-watchdog", 40)
    finally:
        worker.check_output(f"sudo rm -f {HANG}")
    # The rank steps again; serving again opens the budget.
    sc.watchdog_state(head, lambda s: not s["gave_up"] and s["state"] == "serving", 300)


def test_a_start_that_hangs_is_named_though_the_unit_stays_active():
    """A start whose rank never comes up: the unit stays active, /health stays silent, systemd never acts. The
    watchdog names it past watchdog_start_timeout (the budget is spent, so it names it without a restart); with
    watchdog_start_timeout 0 it would stay "down" for ever."""
    head, worker = sc.node(HEAD), sc.node(WORKER)
    set_watchdog(dict(FAST, watchdog_budget=1, watchdog_start_timeout=30))
    hangs = state(head)["hangs_total"]
    worker.check_output(f"echo always | sudo tee {START_HANG}")
    try:
        head.check_output("sudo systemctl restart dgxspark-vllm")
        named = sc.watchdog_state(head, lambda s: s["hangs_total"] > hangs, BOUND_S)
        assert "a start that hangs" in named["last_hang"]["why"], named
        assert "budget is spent" in named["last_hang"]["action"], named
        assert head.service("dgxspark-vllm").is_running
    finally:
        worker.check_output(f"sudo rm -f {START_HANG}")
    # The rank goes on starting; the engine serves and the budget opens again.
    sc.watchdog_state(head, lambda s: not s["gave_up"] and s["state"] == "serving", BOUND_S)
    set_watchdog({})
