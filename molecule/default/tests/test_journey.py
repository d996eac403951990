"""The whole journey on the simulated pair, after site.yml converged (and ran a
second time with nothing changed): the endpoint answers, bench.yml runs and
labels the stand-in's figures as such, diagnose.yml collects one report."""

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
    out = head.check_output("curl -sf http://127.0.0.1:8000/v1/models")
    assert "minimax-m3" in out, out


def test_units_are_active_on_every_node():
    for name, units in (("spark-head", ["dgxspark-ray", "dgxspark-vllm"]), ("spark-worker-1", ["dgxspark-ray"])):
        host = testinfra.get_host(f"ansible://{name}", ansible_inventory=INVENTORY)
        for unit in units:
            assert host.service(unit).is_running, f"{unit} on {name}"


def test_bench_runs_and_labels_stand_in_figures(tmp_path):
    res = playbook("bench.yml", "-e", f"bench_results_dir={tmp_path}", "-e", "bench_runs=2")
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    reports = list(tmp_path.glob("*.json"))
    assert reports, f"no JSON results in {tmp_path}: {list(tmp_path.iterdir())}"
    report = json.loads(reports[0].read_text())
    assert report["stand_in"] is True and report["enforced"] is False, report
    assert report["median"], report
    tables = list(tmp_path.glob("*.md"))
    assert tables and "STAND-IN" in tables[0].read_text().upper()


def test_diagnose_collects_one_report_from_every_node(tmp_path):
    res = playbook("diagnose.yml", "-e", f"diagnose_report_dir={tmp_path}")
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    reports = list(tmp_path.glob("diagnose-*.md"))
    assert len(reports) == 1, list(tmp_path.iterdir())
    text = reports[0].read_text()
    for node in ("spark-head", "spark-worker-1"):
        assert node in text
    assert "ray" in text.lower()
