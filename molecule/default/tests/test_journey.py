"""The whole journey on the simulated pair, after site.yml converged (and ran a
second time with nothing changed): the endpoint answers, bench.yml compares its
modelled figures with the recipe's, diagnose.yml collects one report, and the mp
backend serves too."""

import json
import os
import pathlib
import subprocess

import pytest
import testinfra

INVENTORY = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
PROJECT = pathlib.Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])


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


def test_units_are_active_on_every_node():
    for name, units in (("spark-head", ["dgxspark-ray", "dgxspark-vllm"]), ("spark-worker-1", ["dgxspark-ray"])):
        host = testinfra.get_host(f"ansible://{name}", ansible_inventory=INVENTORY)
        for unit in units:
            assert host.service(unit).is_running, f"{unit} on {name}"


def test_bench_compares_the_modelled_figures_with_the_recipe(tmp_path):
    res = playbook("bench.yml", "-e", f"bench_results_dir={tmp_path}", "-e", "bench_runs=2")
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    reports = list(tmp_path.glob("*.json"))
    assert reports, f"no JSON results in {tmp_path}: {list(tmp_path.iterdir())}"
    report = json.loads(reports[0].read_text())
    assert report["stand_in"] is False and report["enforced"] is True, report
    assert report["figures"] == "modelled", report
    assert report["comparison"]["decode_tok_s"]["ratio"] >= 0.8, report
    tables = list(tmp_path.glob("*.md"))
    assert tables and "FIGURES MODELLED" in tables[0].read_text().upper()


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


def test_the_mp_backend_serves_across_the_nodes_too():
    res = playbook("site.yml", "-e", "serve_executor_backend=mp")
    assert res.returncode == 0, res.stdout[-6000:]
    head = testinfra.get_host("ansible://spark-head", ansible_inventory=INVENTORY)
    worker = testinfra.get_host("ansible://spark-worker-1", ansible_inventory=INVENTORY)
    assert worker.service("dgxspark-vllm").is_running and not worker.service("dgxspark-ray").is_running
    body = json.dumps({"model": "minimax-m3", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})
    out = head.check_output("curl -sf -H 'Authorization: Bearer sim-default-key-0123' -H 'Content-Type: application/json' "
                            f"-d '{body}' http://127.0.0.1:8000/v1/chat/completions")
    assert json.loads(out)["usage"]["completion_tokens"] == 8
