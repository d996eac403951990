"""fabric_probe against the sim's ib_write_bw stand-in on this machine: a fake `ssh` runs the worker's side here, and
the worker's fabric address is loopback."""
import json
import os
import pathlib
import sys

import pytest

from ansible_collections.dgxspark.vllm.plugins.modules import fabric_probe

STANDIN = pathlib.Path(__file__).resolve().parents[4] / "sim" / "standins" / "ib_write_bw_standin.py"


@pytest.fixture
def fabric(tmp_path, monkeypatch):
    """PATH with `ssh` (runs its last argument here) and `ib_write_bw` (the stand-in); the scenario file it reads."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text('#!/bin/sh\ncase "$*" in *127.0.0.2*) echo "ssh: connect to host: No route to host" >&2; '
                                 'exit 255;; esac\nfor last; do :; done\nexec sh -c "$last"\n')
    (bin_dir / "ib_write_bw").write_text("#!/bin/sh\nexec %s %s \"$@\"\n" % (sys.executable, STANDIN))
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    scenario = tmp_path / "scenario.json"
    monkeypatch.setenv("DGXSPARK_SIM_SCENARIO", str(scenario))
    return scenario


def probe(run_module, **args):
    return run_module(fabric_probe.main, dict({
        "workers": ["spark-worker-1"], "addresses": {"spark-worker-1": "127.0.0.1"}, "user": "spark",
        "devices": ["rocep1s0f1", "roceP2p1s0f1"], "seconds": 1, "port": 28515, "head_name": "spark-head",
        "host_key_checking": "off"}, **args))


def test_a_healthy_pair_passes_with_a_figure_per_rail_and_tcp(run_module, fabric):
    res = probe(run_module, _ansible_check_mode=True)
    assert res["failed_checks"] == [], res
    rails = [r for r in res["results"] if r["kind"] == "rdma"]
    assert [(r["device"], r["gbps"]) for r in rails] == [("rocep1s0f1", 95.0), ("roceP2p1s0f1", 95.0)]
    tcp = [r for r in res["results"] if r["kind"] == "tcp"][0]
    assert tcp["ok"] and tcp["gbps"] > 0


def test_a_degraded_rail_is_named_with_its_cause(run_module, fabric):
    fabric.write_text(json.dumps({"rdma_gbps": {"roceP2p1s0f1": 13.23}}))
    res = probe(run_module)
    (msg,) = res["failed_checks"]
    assert msg.startswith("spark-head -> spark-worker-1, roceP2p1s0f1: 13.2 Gb/s") and "degraded initialization" in msg


def test_a_worker_that_does_not_answer_gives_no_figure(run_module, fabric):
    # The worker's side ends at once (SSH cannot reach it): its words are named, and no client waits for a server
    # that is not there (that wait took minutes where the address dropped packets).
    res = probe(run_module, addresses={"spark-worker-1": "127.0.0.2"},
                devices=["rocep1s0f1"], port=28600)
    rdma, tcp = res["results"]
    assert not rdma["ok"] and "gave no figure" in rdma["message"] and "No route to host" in rdma["message"], rdma
    assert not tcp["ok"] and "No route to host" in tcp["message"], tcp


def test_without_perftest_it_says_what_to_install(run_module, monkeypatch):
    res = run_module(fabric_probe.main, {"workers": [], "devices": [], "user": "spark", "ib_write_bw": "no-such-ib-write-bw"})
    assert res["failed"] and "apt-get install perftest" in res["msg"]
