"""fabric_collective with a fake container CLI: the run it asks for (the engine's options, the rank's meeting point,
the image's python), and what it makes of the report (bus bandwidth, the verdict at the largest size, a failure)."""
import json
import os

import pytest

from ansible_collections.dgxspark.vllm.plugins.modules import fabric_collective

GIB = 1 << 30


@pytest.fixture
def docker(tmp_path, monkeypatch):
    """A `docker` that records its arguments and prints the report the test puts in report.json (or fails)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "docker"
    script.write_text("#!/bin/sh\n"
                      "[ \"$1\" = rm ] && exit 0\n"
                      "printf '%%s\\n' \"$@\" > %s/argv\n"
                      "[ -f %s/fail ] && { cat %s/fail >&2; exit 1; }\n"
                      "printf 'DGXSPARK-FABRIC-COLLECTIVE '; cat %s/report.json\n" % ((tmp_path,) * 4))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    return tmp_path


def run(run_module, tmp, results, nccl=None, **args):
    (tmp / "report.json").write_text(json.dumps({"results": results, "nccl": nccl or {"version": None, "file": None}}))
    return run_module(fabric_collective.main, dict({
        "image": "vllm-node:latest", "options": ["--network", "host", "--env=NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1"],
        "rank": 0, "world_size": 2, "master_addr": "10.0.0.1", "sizes": [GIB // 4, GIB], "backend": "nccl"}, **args))


def healthy(seconds_at_1g=0.1):
    # all_gather of 1 GiB in 0.1 s on 2 ranks: 10.7 GB/s algbw, 5.4 busbw; all_reduce 2x that factor.
    return [{"op": "all_gather", "bytes": GIB // 4, "seconds": seconds_at_1g / 4},
            {"op": "all_reduce", "bytes": GIB // 4, "seconds": seconds_at_1g / 4},
            {"op": "all_gather", "bytes": GIB, "seconds": seconds_at_1g},
            {"op": "all_reduce", "bytes": GIB, "seconds": seconds_at_1g}]


def test_it_runs_the_image_with_the_engines_options_and_the_ranks_meeting_point(run_module, docker):
    res = run(run_module, docker, healthy(0.02), rank=1)
    assert not res["failed"], res
    argv = (docker / "argv").read_text().splitlines()
    assert argv[:4] == ["run", "--rm", "--name", "dgxspark-fabric-collective"]
    assert argv[4:7] == ["--network", "host", "--env=NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1"]
    assert {"--env=DGXSPARK_RANK=1", "--env=DGXSPARK_WORLD=2", "--env=DGXSPARK_MASTER_ADDR=10.0.0.1",
            "--env=DGXSPARK_MASTER_PORT=29511"} <= set(argv)
    i = argv.index("--entrypoint")
    assert argv[i + 1:i + 3] == ["python3", "vllm-node:latest"] and argv[i + 3] == "-c"
    assert argv[-4:] == ["nccl", "%d,%d" % (GIB // 4, GIB), "5", "300"]
    # Only rank 0 judges.
    assert res["verdicts"] == []


def test_rank_0_reports_bus_bandwidth_and_judges_the_largest_size(run_module, docker):
    res = run(run_module, docker, healthy(0.02), nccl={"version": "2.28.9", "file": "/usr/lib/libnccl.so.2"})
    gather = [r for r in res["results"] if r["op"] == "all_gather" and r["bytes"] == GIB][0]
    assert gather["busbw_gbytes"] == pytest.approx(GIB / 0.02 / 1e9 / 2, rel=1e-3)
    assert [(v["op"], v["ok"]) for v in res["verdicts"]] == [("all_gather", True), ("all_reduce", True)]
    assert res["nccl"] == {"version": "2.28.9", "file": "/usr/lib/libnccl.so.2"}


def test_a_low_figure_is_named_with_its_likely_cause(run_module, docker):
    res = run(run_module, docker, healthy(0.5))  # 1 GiB all-gather in 0.5 s: 1.1 GB/s of bus bandwidth
    low = [v for v in res["verdicts"] if not v["ok"]]
    assert low and low[0]["message"].startswith("all_gather from the serving image: 1.1 GB/s of bus bandwidth, below 15.")
    assert "NCCL is not on RoCE" in low[0]["message"]


def test_zero_threshold_records_without_judging(run_module, docker):
    res = run(run_module, docker, healthy(0.5), min_busbw_gbytes=0)
    assert all(v["ok"] and "recorded, not judged" in v["message"] for v in res["verdicts"])


def test_a_failed_run_says_which_rank_and_why(run_module, docker):
    (docker / "fail").write_text("torch.distributed.DistStoreError: Timed out after 301 seconds waiting for clients. 1/2 clients joined.")
    res = run(run_module, docker, [])
    assert res["failed"] and res["msg"].startswith("rank 0 of 2: the collective from vllm-node:latest failed (exit 1): ")
    assert "1/2 clients joined" in res["msg"]


def test_the_script_is_valid_python():
    compile(fabric_collective.SCRIPT, "collective", "exec")


def test_over_gloo_the_cause_is_the_socket_path_not_roce(run_module, docker):
    res = run(run_module, docker, healthy(0.5), backend="gloo")
    low = [v for v in res["verdicts"] if not v["ok"]]
    assert low and "gloo does not use RoCE" in low[0]["message"] and "NCCL_IB_HCA" not in low[0]["message"]
