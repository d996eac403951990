"""The deployed stack on the real engine (vLLM's CPU build, TP 2 across the pair on Ray) is the
published one: the full mod group on every node, the recipe's flags and env on every rank, the
launcher's Ray limits and mounts; the real API answers with the key, tools and metrics."""
import json

import pytest

import serving_checks as sc

HOSTS = sc.inventory()
HEAD, WORKER = sc.head_and_worker(HOSTS)
KEY = HOSTS[HEAD]["serve_api_key"]
URL = "http://127.0.0.1:8000"
SERVED = sc.recipe_as_served()
LAUNCHER_MODS = ["fix-minimax-m3-reasoning-parser-robustness", "fix-minimax-m3-compressed-tensors-swiglu-clamp",
                 "fix-minimax-m3-indexer-proj-bf16-load", "fix-minimax-m3-b12x-indexer", "fix-minimax-m3-b12x-msa",
                 "fix-minimax-m3-b12x-dense", "fix-minimax-m3-b12x-triton-prewarm", "fix-eagle3-draft-embed-quant"]


def ray_unit(name):
    return sc.node(name).file("/etc/systemd/system/dgxspark-ray.service").content_string


@pytest.mark.parametrize("name", sorted(HOSTS))
def test_every_node_serves_the_derived_image_with_all_nine_mods(name):
    host = sc.node(name)
    image = json.loads(host.check_output("sudo docker inspect dgxspark-ray"))[0]["Image"]
    labels = json.loads(host.check_output(f"sudo docker image inspect {image}"))[0]["Config"]["Labels"]
    results = {k.split("dgxspark.mods.", 1)[1]: v for k, v in labels.items() if k.startswith("dgxspark.mods.")
               and k not in ("dgxspark.mods.base", "dgxspark.mods.hash")}
    assert len(results) == 9, results
    assert results.pop("fix_prometheus_fastapi_routing") == "not_needed"  # ours, in place of the launcher's
    assert results == {m: "applied" for m in LAUNCHER_MODS}


@pytest.mark.parametrize("name", sorted(HOSTS))
def test_every_nodes_container_has_the_recipe_env_and_the_launchers_ray_limits(name):
    unit = ray_unit(name)
    for var, value in SERVED["env"].items():
        assert f"--env={var}={value}" in unit, (name, var)
    ip = HOSTS[name]["spark_fabric_ip"]
    for word in ("--env=RAY_num_prestart_python_workers=0", f"--env=RAY_OVERRIDE_NODE_IP_ADDRESS={ip}",
                 "--env=RAY_object_store_memory=100000000", "--object-store-memory 100000000", "--num-cpus 1",
                 "--env=HF_HUB_OFFLINE=1", "--env=TRANSFORMERS_OFFLINE=1"):
        assert word in unit, (name, word)
    for mount in (".cache/b12x:/root/.cache/b12x", ".cache/container-nv:/root/.nv", ".triton:/root/.triton"):
        assert mount in unit, (name, mount)


def test_the_units_show_the_same_recipe_env_on_every_node():
    envs = {name: sorted(w for w in ray_unit(name).split() if w.startswith("--env=") and "IP" not in w
                         and "RAY_OVERRIDE" not in w) for name in HOSTS}
    assert len({json.dumps(v) for v in envs.values()}) == 1, envs


def test_the_running_engine_has_every_flag_of_the_recipe():
    argv = sc.engine_argv(sc.node(HEAD))
    sc.assert_argv_follows_recipe(argv, SERVED)
    assert sc.flag_value(argv, "distributed-executor-backend") == "ray"
    assert sc.flag_value(argv, "attention-backend") == "b12x"


def test_one_rank_runs_as_a_ray_actor_on_each_node():
    # Ray names an actor's process after its class (vLLM's Ray executor v2 or v1). The pair runs Ray
    # without its dashboard, so the process table, not `ray list`, is where to look: one rank per node.
    for name in (HEAD, WORKER):
        procs = sc.node(name).check_output("ps -eo args").splitlines()
        ranks = [p for p in procs if p.startswith(("ray::RayWorkerProc", "ray::RayWorkerWrapper"))]
        assert len(ranks) == 1, (name, [p for p in procs if p.startswith("ray::")])


def test_chat_answers_with_the_key_and_refuses_without():
    head = sc.node(HEAD)
    body = {"model": "minimax-m3", "max_tokens": 16, "messages": [{"role": "user", "content": "hello spark node"}]}
    status, text = sc.api(head, URL + "/v1/chat/completions", KEY, body)
    assert status == 200, text
    reply = json.loads(text)
    assert reply["usage"]["completion_tokens"] == 16 and reply["system_fingerprint"].startswith("vllm-0.32.0-tp2")
    assert sc.api(head, URL + "/v1/chat/completions", None, body)[0] == 401


def test_tool_requests_are_taken():
    body = {"model": "minimax-m3", "max_tokens": 16, "tool_choice": "auto",
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
            "messages": [{"role": "user", "content": "weather in paris"}]}
    status, text = sc.api(sc.node(HEAD), URL + "/v1/chat/completions", KEY, body)
    assert status == 200, text


def test_metrics_come_from_the_real_engine_with_route_labels():
    status, text = sc.api(sc.node(HEAD), URL + "/metrics")
    assert status == 200
    assert "vllm:generation_tokens_total" in text
    assert 'handler="/v1/chat/completions"' in text, "the instrumentator labels requests by route"


@pytest.mark.parametrize("name", sorted(HOSTS))
def test_every_node_compiled_the_serving_kernels_in_lockstep(name):
    out = sc.node(name).run("sudo find /home/spark/.triton/cache -name '*.json' -not -name '__grp__*'").stdout
    for kernel in ("eagle_prepare_next", "_nvfp4_write", "update_regular_decode", "rejection_sample"):
        assert f"/{kernel}.json" in out, (name, kernel)
