"""The engine's own path (the fabric role's collective) on the pair the real engine serves (this scenario: the
stand-in engine's image has no torch): measured from the engine's image with the engine containers' settings before
Ray and the engine start, recorded with what it proves, and a figure below its threshold stops site.yml before Ray or
the engine change."""
import json
import re

import serving_checks as sc

HOSTS = sc.inventory()
HEAD, WORKER = sc.head_and_worker(HOSTS)
RECORD = "/var/lib/dgxspark-vllm/fabric-collective.json"


def record():
    return json.loads(sc.node(HEAD).check_output(f"sudo cat {RECORD}"))


def test_the_engines_path_was_measured_from_the_engines_image_and_recorded():
    data = record()
    running = json.loads(sc.node(HEAD).check_output("sudo docker inspect dgxspark-ray"))[0]["Image"]
    # The engine's image and the environment its containers get (the CPU build's ranks go over gloo).
    assert data["inputs"]["image_id"] == running
    assert data["backend"] == "gloo" and data["figures"] == "measured"
    assert data["inputs"]["nodes"] == [HEAD, WORKER]
    assert any(e.startswith("--env=GLOO_SOCKET_IFNAME=") for e in data["inputs"]["env"][WORKER]), data["inputs"]["env"]
    assert data["nccl"] == {"version": None, "file": None}, "a CPU build loads no NCCL"
    assert {(r["op"], r["bytes"]) for r in data["results"]} == {(op, size) for op in ("all_gather", "all_reduce")
                                                               for size in (4194304, 16777216)}
    assert all(r["busbw_gbytes"] > 0 for r in data["results"]), data["results"]
    assert [v["ok"] for v in data["verdicts"]] == [True, True]


def test_a_slow_engine_path_stops_site_before_ray_or_the_engine_change():
    head = sc.node(HEAD)
    pid = head.service("dgxspark-vllm").systemd_properties["MainPID"]
    # Only preflight, the fabric and the two phases that must not run: the others (node trust, headless, GPU health,
    # image, mods, models, caches) change nothing on this converged pair, and running them doubled the time and CPU.
    res = sc.playbook("site.yml", "--tags", "preflight,fabric,ray_cluster,serve", "-e", "fabric_remeasure=true",
                      "-e", "fabric_busbw_min_gbytes=1000")
    out = sc.flat(res.stdout)
    assert res.returncode != 0, out[-3000:]
    assert re.search(rf"{HEAD}, {WORKER}, over gloo: all_gather from the serving image: [0-9.]+ GB/s of bus bandwidth, "
                     r"below 1000\. Likely ", out), out[-3000:]
    assert "PLAY [Ray cluster" not in res.stdout and "PLAY [Serve the model" not in res.stdout
    assert head.service("dgxspark-vllm").systemd_properties["MainPID"] == pid
    # The failed record proves nothing: the next run measures again, and passes at the shipped threshold.
    res = sc.playbook("site.yml", "--tags", "fabric")
    assert res.returncode == 0, res.stdout[-3000:]
    assert "Measured before, for the same image" not in sc.flat(res.stdout)
    assert [v["ok"] for v in record()["verdicts"]] == [True, True]
