"""Day two: site.yml records the validated deployment on every node; playbooks/upgrade.yml checks (--check),
switches to a new image and recipe and validates them, rolls a new image whose engine dies back to the last
good deployment, and prunes the deployment that falls out of the state file. The tests run in order."""
import json
import pathlib
import re
import shlex

import serving_checks as sc

HOSTS = sc.inventory()
HEAD, WORKER = sc.head_and_worker(HOSTS)
NODES = (HEAD, WORKER)
URL = "http://127.0.0.1:8000"
STATE = "/var/lib/dgxspark-vllm/deployment.json"
FILES = pathlib.Path(__file__).resolve().parents[1] / "files"
REF = "localhost/dgxspark-sim-serving"


def state(name):
    return json.loads(sc.node(name).check_output(f"sudo cat {STATE}"))


def running(name):
    """The image ID the serving container runs on a node (inspect's JSON: no templates in commands)."""
    return json.loads(sc.node(name).check_output("sudo docker inspect dgxspark-ray"))[0]["Image"]


def image_id(name, ref):
    out = sc.node(name).run(f"sudo docker image inspect {ref}")
    return json.loads(out.stdout)[0]["Id"] if out.rc == 0 else ""


def upgrade(build, tag, *args):
    """upgrade.yml to an image built on the head from molecule/upgrade/files/<build> (on the stand-in image)."""
    head = sc.node(HEAD)
    context = f"/srv/dgxspark-upgrade/{build}"
    dockerfile = (FILES / build / "Dockerfile").read_text()
    head.check_output(f"sudo mkdir -p {context} && printf %s {shlex.quote(dockerfile)} | sudo tee {context}/Dockerfile >/dev/null")
    new = {"image_source": "build", "image_build_context": context, "image_build_command": "", "image_ref": f"{REF}:{tag}", "image_build_poll": 2,
           "image_build_args": ["--label", f"org.dgxspark.test.tag={tag}"]}
    return sc.playbook("playbooks/upgrade.yml", "-e", json.dumps(new), *args, timeout=1500)


def test_site_recorded_the_validated_deployment_on_every_node():
    for name in NODES:
        data = state(name)
        assert data["current"]["image"]["id"] == running(name), name
        assert data["current"]["info"]["recipe"]["name"] == "minimax-m3-vision", name
        assert data["current"]["base_image"]["ref"] == f"{REF}:latest", name
        assert not data["previous"], name


def test_a_check_run_shows_the_switch_and_changes_nothing():
    before = {n: (running(n), state(n)) for n in NODES}
    res = upgrade("next", "next", "--check", "--diff", "-e", "recipe_name=minimax-m3-text")
    assert res.returncode == 0, res.stdout[-6000:]
    assert f"would build {REF}:next" in res.stdout
    unit_diff = res.stdout.split("--- before: /etc/systemd/system/dgxspark-vllm.service", 1)
    assert len(unit_diff) == 2 and "--language-model-only" in unit_diff[1].split("TASK [")[0], res.stdout[-6000:]
    assert {n: (running(n), state(n)) for n in NODES} == before
    assert not image_id(HEAD, f"{REF}:next")


def test_a_good_upgrade_switches_to_the_new_image_and_recipe_validates_and_records_them():
    old = {n: running(n) for n in NODES}
    res = upgrade("next", "next", "-e", "recipe_name=minimax-m3-text")
    assert res.returncode == 0, res.stdout[-6000:]
    assert "TASK [Upgrade | validate the new endpoint]" in res.stdout
    for name in NODES:
        data = state(name)
        assert data["current"]["image"]["id"] == running(name) != old[name], name
        assert data["current"]["base_image"]["id"] == image_id(name, f"{REF}:next"), name
        assert data["current"]["info"]["recipe"]["name"] == "minimax-m3-text", name
        assert data["previous"]["image"]["id"] == old[name], name
    assert "--language-model-only" in sc.engine_argv(sc.node(HEAD))
    assert sc.api(sc.node(HEAD), URL + "/v1/models")[0] == 200


def test_a_new_image_whose_engine_dies_is_rolled_back_and_named():
    good = {n: running(n) for n in NODES}
    recorded = {n: state(n) for n in NODES}
    # The vision recipe again, on a build whose engine dies at start: the rollback must bring back the text one.
    res = upgrade("broken", "broken")
    assert res.returncode != 0, res.stdout[-6000:]
    out = sc.flat(res.stdout)
    assert "The upgrade failed and was rolled back" in out, res.stdout[-6000:]
    assert "no kernel image is available for execution on the device" in out
    assert "Serve | fail with the engine's log" in out
    seconds = re.search(r"healthy again ([\d.]+) s after the failure", out)
    assert seconds, out[-3000:]
    print(f"rollback: the old deployment healthy again {seconds.group(1)} s after the failed health check (modelled engine)")
    for name in NODES:
        assert running(name) == good[name], name
        assert state(name) == recorded[name], name
    assert image_id(HEAD, f"{REF}:broken"), "the broken build stays staged for a look at it"
    head = sc.node(HEAD)
    assert sc.api(head, URL + "/v1/models")[0] == 200
    assert "--language-model-only" in sc.engine_argv(head)
    assert head.service("dgxspark-vllm").is_running and sc.node(WORKER).service("dgxspark-ray").is_running


def test_a_new_image_whose_engine_loads_pips_nccl_2_28_9_is_refused_before_the_switch():
    """The known-bad table against the NCCL the new image's engine would load, read with its flags: nothing
    switches, the deployment that serves keeps serving."""
    good = {n: running(n) for n in NODES}
    recorded = {n: state(n) for n in NODES}
    res = upgrade("nccl-pip", "nccl-pip")
    assert res.returncode != 0, res.stdout[-6000:]
    out = sc.flat(res.stdout)
    errors = re.findall(r"Task failed: Action failed: (the new image sha256:[0-9a-f]+ runs a known-bad release\. .*?)"
                        r"(?: Origin:|$)", out)
    assert errors, out[-6000:]
    assert "nccl_version 2.28.9" in errors[0] and "preflight_known_bad_accept: [nccl-2.28.9-pip-wheel]" in errors[0], errors
    assert "vllm-project/vllm/issues/42354" in errors[0]
    assert "PLAY [Upgrade | switch" not in res.stdout and "rolled back" not in out
    for name in NODES:
        assert running(name) == good[name], name
        assert state(name) == recorded[name], name
    assert sc.api(sc.node(HEAD), URL + "/v1/models")[0] == 200


def test_a_third_deployment_prunes_the_one_that_falls_out_and_keeps_the_previous():
    before = {n: state(n) for n in NODES}
    res = upgrade("next", "third", "--diff")
    assert res.returncode == 0, res.stdout[-6000:]
    for name in NODES:
        data = state(name)
        assert data["previous"]["image"]["id"] == before[name]["current"]["image"]["id"], name
        # The previous deployment's images stay for the next rollback.
        assert image_id(name, data["previous"]["image"]["id"]), name
        assert image_id(name, data["previous"]["base_image"]["id"]), name
    # The first deployment fell out: the worker (its images loaded, no parents) no longer holds them.
    dropped = before[WORKER]["previous"]
    assert not image_id(WORKER, dropped["image"]["id"]) and not image_id(WORKER, dropped["base_image"]["id"])
    assert "pruned " + dropped["image"]["id"] in sc.flat(res.stdout)
