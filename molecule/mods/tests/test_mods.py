"""The mods role on the sim: a derived image with the fix, identical on both nodes; warnings and strict failures."""

import json
import os
import re
import shlex
import subprocess
import textwrap

import pytest
import testinfra

INVENTORY = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
PROJECT = os.environ["MOLECULE_PROJECT_DIRECTORY"]
SCENARIO = os.path.join(PROJECT, "molecule", "mods")
BASE = "localhost/dgxspark-mods-test:pfi-7.1.0"
FIX = "fix_prometheus_fastapi_routing"

# A FastAPI app like vLLM's: a router included with a prefix, instrumented; prints status and handler labels.
PROBE = textwrap.dedent('''
    import json
    from fastapi import APIRouter, FastAPI
    from fastapi.testclient import TestClient
    from prometheus_fastapi_instrumentator import Instrumentator
    app = FastAPI()
    models = APIRouter(prefix="/models")
    @models.get("/{name}")
    def get_model(name: str):
        return {"id": name}
    app.include_router(models, prefix="/v1")
    Instrumentator().instrument(app).expose(app)
    client = TestClient(app)
    try:
        status = client.get("/v1/models/m3").status_code
    except Exception as exc:
        status = type(exc).__name__
    labels = [l.split('handler="')[1].split('"')[0] for l in client.get("/metrics").text.splitlines()
              if l.startswith("http_requests_total{")]
    print(json.dumps({"status": status, "handlers": labels}))
''')


def node(name):
    return testinfra.get_host(f"ansible://{name}", ansible_inventory=INVENTORY)


HEAD, WORKER = node("spark-head"), node("spark-worker-1")


def inspect(host, ref):
    return json.loads(host.check_output(f"sudo docker image inspect {ref}"))[0]


def derived_refs(host):
    out = host.check_output("sudo docker images --format '{{.Repository}}:{{.Tag}}'")
    return sorted(r for r in out.split() if r.startswith("localhost/dgxspark-mods-test:mods-"))


@pytest.fixture(scope="module")
def derived():
    """The derived image of the converge (the first built; the negative tests add others later)."""
    refs = derived_refs(HEAD)
    assert refs, "no derived image on the head"
    return min(refs, key=lambda r: inspect(HEAD, r)["Created"])


def run_in(host, image, code):
    return host.run(f"sudo docker run --rm {image} python3 -c {shlex.quote(code)}")


def playbook(tmp_path, extra_vars, *args):
    """Run the role alone on the head (no distribution) with extra variables; return the process."""
    play = tmp_path / "play.yml"
    play.write_text(textwrap.dedent('''\
        - name: Mods alone on the head
          hosts: spark_head
          gather_facts: false
          roles:
            - role: dgxspark.vllm.mods
        '''))
    varfile = tmp_path / "vars.json"
    varfile.write_text(json.dumps(dict({"image_ref": BASE, "mods_distribute": False}, **extra_vars)))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(PROJECT, ".collections"), ANSIBLE_NOCOLOR="1", ANSIBLE_CALLBACK_RESULT_FORMAT="json",
               ANSIBLE_CALLBACKS_ENABLED="dgxspark.vllm.task_timer")
    res = subprocess.run(["ansible-playbook", "-i", INVENTORY, str(play), "-e", f"@{varfile}", *args],
                         capture_output=True, text=True, env=env, cwd=PROJECT, check=False)
    return res.returncode, res.stdout + res.stderr


def test_labels_record_every_result_and_the_base(derived):
    labels = inspect(HEAD, derived)["Config"]["Labels"]
    assert labels[f"dgxspark.mods.{FIX}"] == "applied"
    assert labels["dgxspark.mods.demo_missing_target"] == "target_missing"
    assert labels["dgxspark.mods.base"] == inspect(HEAD, BASE)["Id"]
    assert derived.endswith(":mods-" + labels["dgxspark.mods.hash"])


def test_both_nodes_run_the_same_bytes(derived):
    assert inspect(WORKER, derived)["Id"] == inspect(HEAD, derived)["Id"]


def test_image_config_is_the_base_config(derived):
    base, new = inspect(HEAD, BASE)["Config"], inspect(HEAD, derived)["Config"]
    # The base's entrypoint and command (none and none: [] and null both mean none), not the patch run's.
    assert (new.get("Entrypoint") or None, new.get("Cmd") or None) == (base.get("Entrypoint") or None, base.get("Cmd") or None)
    # docker commit keeps Env as it is (podman's added container=podman and TERM).
    assert sorted(new.get("Env") or []) == sorted(base.get("Env") or [])
    assert not any("dgxspark-mods" in v for v in (new.get("Volumes") or {}))


def test_patched_file_has_the_fix(derived):
    src = run_in(WORKER, derived, "import importlib.util as u; "
                 "print(open(u.find_spec('prometheus_fastapi_instrumentator.routing').origin).read())")
    assert src.rc == 0, src.stderr
    assert "Patched by dgxspark.vllm (mod fix_prometheus_fastapi_routing)" in src.stdout
    assert "def _get_included_route_name(" in src.stdout


def test_derived_image_serves_include_router_with_template_labels(derived):
    before = run_in(HEAD, BASE, PROBE)
    assert json.loads(before.stdout)["status"] == "AttributeError", before.stderr
    after = run_in(WORKER, derived, PROBE)
    assert after.rc == 0, after.stderr
    assert json.loads(after.stdout) == {"status": 200, "handlers": ["/v1/models/{name}"]}


def test_nothing_left_behind():
    assert HEAD.check_output("sudo docker ps -a --format '{{.Names}}' | grep -c '^dgxspark-mods-' || true") == "0"
    assert HEAD.check_output("ls -d /tmp/dgxspark-mods.* 2>/dev/null | wc -l") == "0"


def test_check_mode_on_a_converged_pair_changes_nothing():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(PROJECT, ".collections"), ANSIBLE_NOCOLOR="1")
    res = subprocess.run(["ansible-playbook", "-i", INVENTORY, os.path.join(SCENARIO, "converge.yml"), "--check", "--diff"],
                         capture_output=True, text=True, env=env, cwd=PROJECT, check=False)
    assert res.returncode == 0, res.stdout[-3000:]
    changed = re.findall(r"changed=(\d+)", res.stdout)
    assert changed and set(changed) == {"0"}, res.stdout[-3000:]


MISSING = {"name": "missing_for_test", "module": "no_such_package.settings", "old": "A = 1\n", "new": "A = 2\n"}


def test_missing_target_warns_and_the_play_goes_on(tmp_path):
    rc, out = playbook(tmp_path, {"mods_extra_definitions": [MISSING]})
    assert rc == 0, out[-3000:]
    assert "[WARNING]: mod on localhost/dgxspark-mods-test:mods-" in out
    # The first run has the engine's reason; a rerun reads the result back from the image label.
    assert "missing_for_test: target_missing - " in out
    assert "missing_for_test=target_missing" in out


def test_strict_mode_fails_and_commits_nothing(tmp_path):
    before = derived_refs(HEAD)
    rc, out = playbook(tmp_path, {"mods_extra_definitions": [dict(MISSING, name="strict_missing")], "mods_strict": True})
    assert rc != 0
    assert "strict mods failed on localhost/dgxspark-mods-test:mods-" in out
    assert "strict_missing: target_missing" in out
    assert derived_refs(HEAD) == before
    assert HEAD.check_output("sudo docker ps -a --format '{{.Names}}' | grep -c '^dgxspark-mods-' || true") == "0"


def test_check_mode_previews_the_patches_and_keeps_nothing(tmp_path):
    before = derived_refs(HEAD)
    preview = {"name": "preview_only", "module": "prometheus_fastapi_instrumentator.routing",
               "old": "from starlette.types import Scope\n",
               "new": "from starlette.types import Scope  # preview\n"}
    rc, out = playbook(tmp_path, {"mods_extra_definitions": [preview]}, "--check", "--diff")
    assert rc == 0, out[-3000:]
    assert "would build localhost/dgxspark-mods-test:mods-" in out
    assert "preview_only=applied" in out and f"{FIX}=applied" in out
    assert "+from starlette.types import Scope  # preview" in out
    assert derived_refs(HEAD) == before
    assert HEAD.check_output("sudo docker ps -a --format '{{.Names}}' | grep -c '^dgxspark-mods-' || true") == "0"
    assert HEAD.check_output("ls -d /tmp/dgxspark-mods.* 2>/dev/null | wc -l") == "0"


def test_missing_base_image_is_named_and_check_mode_waits_for_it(tmp_path):
    rc, out = playbook(tmp_path, {"image_ref": "localhost/not-loaded:1"})
    assert rc != 0
    assert "mods: the base image localhost/not-loaded:1 is not on spark-head" in out
    rc, out = playbook(tmp_path, {"image_ref": "localhost/not-loaded:1"}, "--check")
    assert rc == 0, out[-3000:]
    assert "would build a derived image of localhost/not-loaded:1 once it is on spark-head" in out


def test_bad_definition_is_refused_before_any_node_changes(tmp_path):
    before = derived_refs(HEAD)
    rc, out = playbook(tmp_path, {"mods_extra_definitions": [{"name": "no target", "old": "a", "new": "b"}]})
    assert rc != 0
    assert "mods_definitions / mods_extra_definitions are not valid" in out
    assert "no target: set exactly one of 'module'" in out
    assert derived_refs(HEAD) == before
