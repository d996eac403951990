"""The whole journey on the simulated pair, after site.yml converged (and ran a
second time with nothing changed): the endpoint answers on every name and the units run.
diagnose.yml's one report from every node is checked in test_2_field_report.py, with the
kernels the cold worker lacks; bench.yml against the recipe's figures, healthy and wedged, is in
test_2_field_report.py, on this same pair; the mp backend across the nodes is the serve
scenario's (test_mp_backend_reaches_a_healthy_endpoint)."""

import json
import os
import shlex

import pytest
import testinfra

INVENTORY = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
import serving_checks as sc


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
