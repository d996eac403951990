"""The whole journey on the simulated pair, after site.yml converged (and ran a
second time with nothing changed): the endpoint answers and diagnose.yml collects one
report. bench.yml against the recipe's figures, healthy and wedged, is in
test_2_field_report.py, on this same pair; the mp backend across the nodes is the serve
scenario's (test_mp_backend_reaches_a_healthy_endpoint)."""

import json
import os
import pathlib
import shlex
import subprocess

import pytest
import testinfra

INVENTORY = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
PROJECT = pathlib.Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
import serving_checks as sc


def playbook(name, *args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(PROJECT / ".collections"), ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_CONFIG", None)
    return subprocess.run(["ansible-playbook", "-i", INVENTORY, str(PROJECT / "playbooks" / name), *args],
                          cwd=PROJECT, env=env, capture_output=True, text=True, timeout=900, check=False)


@pytest.fixture(scope="module")
def head():
    return testinfra.get_host("ansible://spark-head", ansible_inventory=INVENTORY)


def test_endpoint_lists_the_served_model(head):
    out = head.check_output("curl -sf -H 'Authorization: Bearer sim-default-key-0123' http://127.0.0.1:8000/v1/models")
    assert json.loads(out)["data"][0]["id"] == "minimax-m3", out


def test_a_client_of_the_launcher_asking_by_the_model_id_is_answered(head):
    # The launcher serves under the model id alone, and its clients send that (a 404 without it).
    model = sc.recipe_as_served()["model"]
    body = json.dumps({"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": "Hi"}]})
    out = head.check_output("curl -s -w '\\n%{http_code}' -H 'Authorization: Bearer sim-default-key-0123' "
                            "-H 'Content-Type: application/json' http://127.0.0.1:8000/v1/chat/completions -d "
                            + shlex.quote(body))
    text, status = out.rsplit("\n", 1)
    assert status == "200", out
    assert json.loads(text)["model"] in ("minimax-m3", model), text


def test_units_are_active_on_every_node():
    for name, units in (("spark-head", ["dgxspark-ray", "dgxspark-vllm"]), ("spark-worker-1", ["dgxspark-ray"])):
        host = testinfra.get_host(f"ansible://{name}", ansible_inventory=INVENTORY)
        for unit in units:
            assert host.service(unit).is_running, f"{unit} on {name}"


def test_diagnose_collects_one_report_from_every_node(tmp_path):
    res = playbook("diagnose.yml", "-e", f"diagnose_report_dir={tmp_path}")
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    reports = list(tmp_path.glob("diagnose-*.md"))
    assert len(reports) == 1, list(tmp_path.iterdir())
    text = reports[0].read_text()
    for node in ("spark-head", "spark-worker-1"):
        assert node in text
    assert text.count("present: eagle_prepare_next") == 2, "both nodes' Triton caches have the serving kernels"
    assert "Active: 2 nodes" in text or text.count("node_") >= 2, "ray status lists both nodes"
    # The fabric measured again (the sim's rail figures are modelled) and the host stack matched against the table.
    assert "spark-head -> spark-worker-1, rocep1s0f1: 95.0 Gb/s of RDMA writes" in text, text
    assert '"figures": "modelled"' in text
    assert text.count("none of the table's releases on this node") == 2, text
