"""Each countermeasure of the collection taken away in turn, on the real engine: the run fails, and
the message names what is missing. The converge before was the full, healthy deployment. The checks
that leave the Ray cluster as it is come first: each change of its containers restarts Ray on both
nodes."""
import json
import re
import shlex
import time

import serving_checks as sc

HOSTS = sc.inventory()
HEAD, WORKER = sc.head_and_worker(HOSTS)
KEY = HOSTS[HEAD]["serve_api_key"]
URL = "http://127.0.0.1:8000"


def run_and_record(case, *args):
    """A runtime-only bad input: the run must fail, and the health wait within seconds of the engine's exit."""
    started = time.monotonic()
    try:
        # The refusal is the point here; site.yml's rollback to the validated deployment is the serve scenario's.
        res = sc.playbook(*args, "-e", "deployment_rollback=false")
    finally:
        # The refused engine would restart every 10 s, re-importing vLLM, for as long as the next tests run:
        # load that slows the scenarios beside this one. The next test's run starts it again.
        sc.node(HEAD).run("sudo systemctl stop dgxspark-vllm")
    out = sc.flat(res.stdout)
    ago = sc.noticed_after_exit(out)
    reason = out[out.find("Reason: "):][:300] if "Reason: " in out else out[-300:]
    sc.record(case, "serve (engine_health, %s s after the engine's exit)" % ago, time.monotonic() - started, None, reason)
    assert res.returncode != 0, out[-3000:]
    assert ago is not None and ago <= 60, out[-4000:]
    return out


def image_ids(host):
    return sorted(set(host.check_output("sudo docker images -q").split()))


def test_the_measured_stack_serves_first():
    head = sc.node(HEAD)
    status, text = sc.api(head, URL + "/v1/models", KEY)
    assert status == 200 and json.loads(text)["data"][0]["id"] == "minimax-m3", text


def test_an_impossible_context_is_stopped_in_preflight_before_any_change():
    res = sc.playbook("site.yml", "--tags", "preflight",
                      *sc.overrides_with({"args": {"gpu-memory-utilization": 0.90, "max-model-len": 196608}}))
    out = sc.flat(res.stdout)
    assert res.returncode != 0, out[-3000:]
    assert "below max-model-len 196608 even at the top of its error" in out, out[-3000:]
    assert sc.changed_count(res.stdout, HEAD) == 0 and sc.changed_count(res.stdout, WORKER) == 0


def test_a_utilization_that_leaves_no_kv_cache_is_stopped_in_preflight_before_any_change():
    res = sc.playbook("site.yml", "--tags", "preflight", *sc.overrides_with({"args": {"gpu-memory-utilization": 0.85}}))
    out = sc.flat(res.stdout)
    assert res.returncode != 0, out[-3000:]
    assert "vLLM would refuse to start (No available memory for the cache blocks" in out, out[-3000:]
    assert sc.changed_count(res.stdout, HEAD) == 0 and sc.changed_count(res.stdout, WORKER) == 0


def test_the_published_utilization_under_ray_is_stopped_in_preflight_before_any_change():
    # util 0.93 was measured without Ray; under Ray its own processes hold memory a GB10 counts as used at the
    # start-up check (the recipe's memory.ray_gib). The text recipe's backends.ray lowers it; taken away:
    res = sc.playbook("site.yml", "--tags", "preflight", *sc.overrides_with({"args": {"gpu-memory-utilization": 0.93}}))
    out = sc.flat(res.stdout)
    assert res.returncode != 0, out[-3000:]
    assert "gpu-memory-utilization 0.93 wants 113.172 GiB free on each node at engine start" in out, out[-3000:]
    assert "that Ray's daemons hold on a node" in out and "or common_executor_backend: mp" in out, out[-3000:]
    assert sc.changed_count(res.stdout, HEAD) == 0 and sc.changed_count(res.stdout, WORKER) == 0


def test_a_socket_interface_the_nodes_lack_is_stopped_in_preflight_before_any_change():
    res = sc.playbook("site.yml", "--tags", "preflight", "-e", json.dumps({"ray_cluster_env": {"GLOO_SOCKET_IFNAME": "enp9s0"}}))
    out = sc.flat(res.stdout)
    assert res.returncode != 0, out[-3000:]
    assert "GLOO_SOCKET_IFNAME=enp9s0 names no interface of this node" in out and "It comes from ray_cluster_env" in out
    assert sc.changed_count(res.stdout, HEAD) == 0 and sc.changed_count(res.stdout, WORKER) == 0


def test_a_value_the_images_vllm_declares_out_of_bounds_is_stopped_in_preflight_before_any_change():
    # The bounds are read from the engine image's own vLLM (its config classes), once per image ID.
    res = sc.playbook("site.yml", "--tags", "preflight", *sc.overrides_with({"args": {"max-num-seqs": 0}}))
    out = sc.flat(res.stdout)
    assert res.returncode != 0, out[-3000:]
    assert re.search(r"--max-num-seqs \(from recipe_overrides \(args\).*\) is 0, and vLLM 0\.32\.0 in image sha256:\w+ "
                     r"declares >= 1 for it \(SchedulerConfig\), checked as the engine starts", out), out[-3000:]
    assert sc.changed_count(res.stdout, HEAD) == 0 and sc.changed_count(res.stdout, WORKER) == 0


def test_an_image_not_built_from_the_recipes_vllm_commit_is_named_in_preflight():
    # The recipe pins vLLM 979b56a6 (the launcher's --vllm-ref); the sim's engine image is vLLM's CPU release,
    # whose version names no commit: a warning naming both, and the run goes on (it is not a refusal).
    res = sc.playbook("site.yml", "--tags", "preflight")
    out = sc.flat(res.stdout)
    assert res.returncode == 0, out[-3000:]
    assert "The image runs vLLM 0.32.0" in out and "built from 979b56a66c96" in out, out[-3000:]


def test_without_the_memory_plan_the_engine_keeps_no_memory_for_the_cache_blocks():
    # Past preflight, the real engine's own KV check refuses what a GB10 would have left at util 0.85
    # (the weights and overheads take more than 0.85 of it; modelled by the sim plugin).
    out = run_and_record("kv_cache_no_memory", "site.yml", "--tags", "ray_cluster,serve",
                         *sc.overrides_with({"args": {"gpu-memory-utilization": 0.85}}))
    assert "Reason: ValueError: No available memory for the cache blocks" in out, out[-4000:]


def test_without_the_ray_utilization_the_engine_refuses_the_memory_rays_processes_hold():
    # Past preflight, the modelled GB10 counts what Ray's own processes on the node really hold (measured live by the
    # sim plugin) against the free memory the field report had without Ray: the published util 0.93 is refused.
    out = run_and_record("ray_share_at_published_util", "site.yml", "--tags", "serve",
                         *sc.overrides_with({"args": {"gpu-memory-utilization": 0.93}}))
    assert "Reason: ValueError: Free memory on device" in out and "Ray's own" in out, out[-4000:]


def test_without_the_page_cache_drop_the_engine_refuses_the_memory_the_weights_hold():
    # The models phase read the weights on every node (hashed, copied); on a GB10 that page cache counts as used
    # memory (modelled by the sim plugin from the weights' real residency). Read again every 0.2 s on the worker while
    # the run lasts, so a drop by a scenario beside this one (the cache is this machine's) cannot empty it.
    worker = sc.node(WORKER)
    refill = ("while [ -e /tmp/dgxspark-refill ]; do cat \"$HOME\"/.cache/huggingface/hub/models--*/blobs/* "
              ">/dev/null; sleep 0.2; done")
    worker.check_output("touch /tmp/dgxspark-refill && (setsid nohup sh -c %s >/dev/null 2>&1 </dev/null &)"
                        % shlex.quote(refill))
    try:
        out = run_and_record("page_cache_full", "site.yml", "--tags", "serve", "-e", "serve_drop_page_cache=false")
    finally:
        worker.run("rm -f /tmp/dgxspark-refill")
    assert "Reason: ValueError: Free memory on device" in out and "the page cache holds" in out, out[-4000:]


def test_without_auto_tool_choice_every_agent_request_is_refused():
    res = sc.playbook("site.yml", "--tags", "ray_cluster,serve,validate", "-e", "deployment_rollback=false",
                      *sc.overrides_with({"args": {"enable-auto-tool-choice": False}}))
    out = sc.flat(res.stdout)
    assert res.returncode != 0, out[-3000:]
    assert 'tool_choice "auto" was refused (status 400)' in out, out[-4000:]
    assert "--enable-auto-tool-choice" in out


def test_the_launchers_prometheus_mod_kills_the_build_as_it_killed_the_launch():
    # Without the collection's replacement the launcher's own mod runs, and the sim image's
    # instrumentator (8.1.0) no longer has the block it replaces: SystemExit, as the field report saw.
    head = sc.node(HEAD)
    before = image_ids(head)
    res = sc.playbook("site.yml", "--tags", "mods", "-e", json.dumps({"mods_definitions": []}))
    out = sc.flat(res.stdout)
    assert res.returncode != 0, out[-3000:]
    assert "fix-prometheus-fastapi-routing: failed" in out, out[-3000:]
    assert "Could not find expected prometheus_fastapi_instrumentator routing block" in out, out[-3000:]
    assert "aborts the launch" in out, out[-3000:]
    assert image_ids(head) == before, "a derived image was committed although a mod failed"


def test_without_the_mods_the_engine_refuses_the_b12x_backend():
    # The base image, as the launcher would run it without its mod group: vLLM's own argument check.
    out = run_and_record("engine_without_mods", "site.yml", "--tags", "ray_cluster,serve",
                         "-e", "ray_cluster_image=localhost/dgxspark-sim-vllm:latest")
    assert "Reason: ValueError: Unknown attention backend: 'B12X'" in out, out[-4000:]


def test_the_recipe_env_only_on_the_head_fails_the_workers_rank():
    # Upstream's Ray mode: the recipe env reaches the engine on the head, not the other node's container.
    engine_env = ("{{ {} if inventory_hostname == '%s' else "
                  "(recipe_data.env | default({}) | combine(serve_env | default({}))) }}" % WORKER)
    out = run_and_record("recipe_env_only_on_head", "site.yml", "--tags", "ray_cluster,serve",
                         "-e", json.dumps({"ray_cluster_engine_env": engine_env}))
    worker_ip = HOSTS[WORKER]["spark_fabric_ip"]
    assert f"the rank on {worker_ip} started with" in out, out[-4000:]
    for var in ("OMP_NUM_THREADS=unset", "VLLM_M3_FP8_KV_TEST_SCALE=unset", "B12X_TRITON_PREWARM_STRICT=unset"):
        assert var in out, var


def test_without_the_interface_check_gloo_fails_every_rank():
    # The same name given past the check (raw docker run arguments, which it does not read): the real
    # ranks' gloo refuses it at their first collective, and the health wait names it.
    run_args = sc.sim_var("ray_cluster_extra_run_args") + ["--env", "GLOO_SOCKET_IFNAME=enp9s0"]
    out = run_and_record("gloo_interface_missing", "site.yml", "--tags", "ray_cluster,serve",
                         "-e", json.dumps({"ray_cluster_extra_run_args": run_args}))
    assert "Unable to find address for: enp9s0" in out, out[-4000:]


def test_rays_default_object_store_takes_the_memory_the_engine_needs():
    out = run_and_record("ray_default_object_store", "site.yml", "--tags", "ray_cluster,serve",
                         "-e", "ray_cluster_object_store_memory=0")
    assert "Free memory on device" in out and "Ray's object store holds" in out, out[-4000:]


def test_the_launchers_own_recipe_file_serves_as_it_is():
    # A launcher user's switch: the recipe file from the checkout on the head, read as it is (with the
    # sim's swaps for what needs a GB10, as for the collection's own recipe). Its util 0.93 was published for the
    # launcher's mp mode; under Ray the user sets the recipe's own parameter, as preflight's message says (at 0.93
    # the modelled GB10 refuses the memory Ray's processes hold, as the collection's recipe shows above).
    recipe = "/home/spark/spark-vllm-docker/recipes/minimax-m3-w4a16-gptq-b12x-nvfp4-eagle3.yaml"
    res = sc.playbook("site.yml", "--tags", "mods,ray_cluster,serve,validate", "-e", f"recipe_name={recipe}",
                      "-e", "recipe_location=head",
                      "-e", json.dumps({"recipe_params": {"gpu_memory_utilization": 0.925}}))
    assert res.returncode == 0, res.stdout[-6000:]
    unit = sc.node(WORKER).file("/etc/systemd/system/dgxspark-ray.service").content_string
    assert "--env=VLLM_M3_FP8_KV_TEST_SCALE=1.0" in unit and "HF_TOKEN" not in unit
    argv = sc.engine_argv(sc.node(HEAD))
    assert sc.flag_value(argv, "default-chat-template-kwargs") == '{"thinking_mode":"adaptive"}'
    assert sc.flag_value(argv, "distributed-executor-backend") == "ray", "the deployment decides the backend"
