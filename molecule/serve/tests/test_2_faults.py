"""Faults on the pair: a lost worker container, a stopped worker node, and the mp backend.
Runs after test_1_serve (it changes the cluster)."""
import json
import re
import shlex
import time

import serving_checks as sc

HOSTS = sc.inventory()
HEAD = next(n for n, hv in HOSTS.items() if hv["group"] == "spark_head")
WORKER = next(n for n, hv in HOSTS.items() if hv["group"] == "spark_workers")
HV = HOSTS[HEAD]
KEY = HV["serve_api_key"]
URL = f"http://{HV['common_api_host']}:8000"
CLUSTER = "serve"
# Bound for the recovery, not a measurement: Ray notices a dead node in ~15 s, the engine
# unit restarts after RestartSec, Ray and the engine come back.
RECOVERY_BOUND_S = 240


def test_killed_worker_container_recovers_by_itself():
    head, worker = sc.node(HEAD), sc.node(WORKER)
    old_pid = head.service("dgxspark-vllm").systemd_properties["MainPID"]
    t0 = time.monotonic()
    worker.check_output("sudo docker kill dgxspark-ray")
    # The engine must notice the lost rank (not stay half-alive), then come back.
    down = sc.wait_health(head, URL, RECOVERY_BOUND_S, want=0) or sc.wait_health(head, URL, 5, want=503)
    assert down is not None, "the engine kept answering healthy after losing its worker"
    back = sc.wait_health(head, URL, RECOVERY_BOUND_S)
    assert back is not None, f"not healthy again within {RECOVERY_BOUND_S}s"
    elapsed = time.monotonic() - t0
    print(f"recovery after killing the worker's Ray container: {elapsed:.1f}s")
    assert head.service("dgxspark-vllm").systemd_properties["MainPID"] != old_pid
    assert worker.service("dgxspark-ray").is_running
    sc.chat_with_image(head, URL, KEY, "minimax-m3")


def test_a_rank_an_earlier_engine_left_is_ended_before_the_page_cache_drop():
    # A rank is a Ray actor: Ray ends a dead engine's ranks once it notices, seconds later under load. One still
    # alive when the next engine starts holds its memory and may read weights into the cache the drop just emptied
    # (the next start is then refused on a GB10). A process titled as vLLM's rank actor stands in for it.
    head, worker = sc.node(HEAD), sc.node(WORKER)
    stand_in = "import os; os.execvp('sleep', ['ray::RayWorkerProc.load_model', '900'])"
    find = "sudo docker exec dgxspark-ray sh -c 'grep -l \"RayWorkerProc[.]load_model\" /proc/[0-9]*/cmdline'"
    worker.check_output("sudo docker exec -d dgxspark-ray python3 -c %s" % shlex.quote(stand_in))
    for _ in range(20):
        if worker.run(find).rc == 0:
            break
        time.sleep(0.5)
    else:
        raise AssertionError("the stand-in rank did not start")
    head.check_output("sudo systemctl restart dgxspark-vllm")
    assert sc.wait_health(head, URL, RECOVERY_BOUND_S) is not None, "not healthy after the restart"
    assert worker.run(find).rc != 0, "the earlier engine's rank outlived the next engine's start"
    log = sc.journal(head, "dgxspark-vllm", 3000)
    assert re.search(r"ranks an earlier engine left on \S+ \([\d.]+\), ended before the drop: .*"
                     r"ray::RayWorkerProc\.load_model \(killed after 10 s\)", log), log[-3000:]


def test_stopped_worker_fails_the_run_before_anything_changes():
    head = sc.node(HEAD)
    # The engine itself may restart meanwhile (it loses a rank when the worker stops): what must
    # not change is what the playbook owns, the unit files.
    units = [f"/etc/systemd/system/{u}.service" for u in ("dgxspark-vllm", "dgxspark-ray")]
    before = {u: (head.file(u).sha256sum, head.file(u).mtime) for u in units}
    sc.sim_node("stop-node", CLUSTER, WORKER, "--grace", "5")
    try:
        res = sc.playbook("site.yml", timeout=300)
    finally:
        sc.sim_node("start-node", CLUSTER, WORKER)
    out = res.stdout
    assert res.returncode != 0, out
    # Preflight names the node that is down; nothing past it ran (preflight itself
    # only reads the recipe through the serve role).
    assert "Not reachable over SSH from this machine" in out and WORKER in out, out
    assert "Ray |" not in out, out
    assert "Serve | engine units" not in out and "Serve | wait for the endpoint" not in out, out
    assert {u: (head.file(u).sha256sum, head.file(u).mtime) for u in units} == before
    recap = re.search(rf"^{re.escape(HEAD)}\s*:.*\bchanged=(\d+)", out, re.M)
    assert recap and recap.group(1) == "0", out[-3000:]


def serving_units():
    """Every node's serving unit files (Ray: the engine's on the head only)."""
    found = {}
    for name in HOSTS:
        for unit in ("dgxspark-ray", "dgxspark-vllm"):
            f = sc.node(name).file(f"/etc/systemd/system/{unit}.service")
            found[(name, unit)] = f.content_string if f.exists else None
    return found


# A recipe change that passes preflight and the flag check (a flag without choices) and that only the engine
# refuses, as its API server sets up: a tool call parser it does not have (a --tool-parser-plugin could add one at
# start, so no list read before can refuse it).
REFUSED_AT_START = {"recipe_overrides": {"args": {"tool-call-parser": "minimax_m4"}}}


def test_a_change_the_engine_refuses_is_rolled_back_to_the_validated_deployment():
    head = sc.node(HEAD)
    units = serving_units()
    t0 = time.monotonic()
    res = sc.playbook("site.yml", "-e", json.dumps(REFUSED_AT_START))
    took = time.monotonic() - t0
    out = sc.flat(res.stdout)
    assert res.returncode != 0, out[-4000:]
    assert "site.yml failed and was rolled back. What broke:" in out, out[-4000:]
    assert "KeyError: 'invalid tool call parser: minimax_m4 (chose from {" in out, out[-4000:]
    m = re.search(r"healthy again ([\d.]+) s after the failure, and validated \(the endpoint was down at most ([\d.]+) s", out)
    assert m, out[-4000:]
    # The recorded deployment serves again, as it was: its units, its answers.
    assert serving_units() == units
    sc.chat_with_image(head, URL, KEY, "minimax-m3")
    assert not head.file("/run/dgxspark-vllm/deployment.lock").exists
    print(f"rolled back: healthy again {m.group(1)} s after the failure, the endpoint down at most {m.group(2)} s; "
          f"the whole run {took:.0f} s")
    sc.figure("site_rollback", {"healthy_again_after_failure_s": float(m.group(1)), "down_at_most_s": float(m.group(2)),
                                "run_s": round(took, 1), "change": REFUSED_AT_START, "engine": "stand-in"})


def test_rays_own_refusal_of_its_start_is_named_with_its_words_without_waiting_out_the_join():
    # An option `ray start` does not take: Ray exits at once on every node and systemd starts it again every 10 s.
    started = time.monotonic()
    res = sc.playbook("site.yml", "--tags", "ray_cluster", "-e", json.dumps({"ray_cluster_extra_start_args": ["--bogus-option"]}),
                      "-e", "deployment_rollback=false")
    took = time.monotonic() - started
    out = sc.flat(res.stdout)
    assert res.returncode != 0, out[-4000:]
    assert "Ray exits as it starts on" in out, out[-4000:]
    assert "Error: No such option '--bogus-option'" in out, out[-4000:]
    sc.record("ray_start_refused", "ray_cluster (the join wait, after 2 restarts of Ray's unit)", took, None,
              out[out.find("Ray exits as it starts"):][:300])


def test_a_worker_that_cannot_join_is_named_with_its_log():
    # A wrong head address for the workers only (the head's own unit does not use it). Not rolled back here: the
    # run must stop before the engine starts.
    res = sc.playbook("site.yml", "--tags", "ray_cluster,serve", "-e", "ray_cluster_head_ip=10.231.106.99",
                      "-e", "ray_cluster_join_timeout=20", "-e", "deployment_rollback=false")
    out = res.stdout
    assert res.returncode != 0, out[-4000:]
    assert f"Ray: {WORKER} did not join the cluster" in out, out[-4000:]
    assert f"--- {WORKER}: journalctl -u dgxspark-ray" in out, out[-4000:]
    # The engine never starts (preflight only reads the recipe through the serve role).
    assert "Serve | engine units" not in out and "Serve | wait for the endpoint" not in out


def test_mp_backend_reaches_a_healthy_endpoint():
    # The mp run replaces Ray altogether (and repairs what the tests before left broken).
    res = sc.playbook("site.yml", "--tags", "ray_cluster,serve", "-e", "common_executor_backend=mp")
    assert res.returncode == 0, res.stdout[-6000:]
    head, worker = sc.node(HEAD), sc.node(WORKER)
    for host in (head, worker):
        assert not host.service("dgxspark-ray").is_running
        assert host.service("dgxspark-vllm").is_running
    wargv = sc.container_cmd(worker, "dgxspark-vllm")
    assert "--headless" in wargv and sc.flag_value(wargv, "node-rank") == "1", wargv
    hargv = sc.container_cmd(head, "dgxspark-vllm")
    assert "--headless" not in hargv and sc.flag_value(hargv, "nnodes") == "2", hargv
    assert sc.flag_value(hargv, "distributed-executor-backend") == "mp"
    assert sc.flag_value(hargv, "master-addr") == HV["spark_fabric_ip"]
    sc.assert_argv_follows_recipe(hargv, sc.recipe("minimax-m3-vision"))
    assert sc.api(head, URL + "/v1/models")[0] == 401
    sc.chat_with_image(head, URL, KEY, "minimax-m3")
