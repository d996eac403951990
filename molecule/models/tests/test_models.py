"""The models role on a simulated pair: both models on both nodes, verified, repairable, disk-checked."""
import json
import os
import subprocess

import pytest
import testinfra

INVENTORY = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
SCENARIO = os.environ["MOLECULE_SCENARIO_DIRECTORY"]
NODES = ["spark-head", "spark-worker-1"]
CACHE = "/home/spark/.cache/huggingface/hub"
MODELS = ["Sebesky/MiniMax-M3-W4A16-GPTQ", "Sebesky/MiniMax-M3-EAGLE3-RTN-INT4"]
MARKER = ".dgxspark-complete.json"


def node(name):
    return testinfra.get_host(f"ansible://{name}", ansible_inventory=INVENTORY)


def folder(model):
    return f"{CACHE}/models--{model.replace('/', '--')}"


def marker(host, model):
    return json.loads(host.file(f"{folder(model)}/{MARKER}").content_string)


def converge(*extra):
    """Run the scenario's converge again; returns (rc, output)."""
    res = subprocess.run(["ansible-playbook", "-i", INVENTORY, f"{SCENARIO}/converge.yml", *extra],
                         capture_output=True, text=True, check=False)
    return res.returncode, res.stdout + res.stderr


@pytest.mark.parametrize("name", NODES)
@pytest.mark.parametrize("model", MODELS)
def test_model_is_complete_and_resolves_offline_as_the_hub_cache_does(name, model):
    # Offline (HF_HUB_OFFLINE=1) the hub library resolves refs/main to a snapshot and reads from there.
    host = node(name)
    revision = host.file(f"{folder(model)}/refs/main").content_string.strip()
    assert revision, f"{model} has no refs/main on {name}"
    assert host.file(f"{folder(model)}/snapshots/{revision}/config.json").exists, f"refs/main -> {revision} has no config.json"
    sealed = marker(host, model)
    assert sealed["model"] == model and sealed["file_count"] >= 4
    assert host.file(folder(model)).user == "spark"


@pytest.mark.parametrize("model", MODELS)
def test_worker_copy_matches_the_head_file_by_file(model):
    head, worker = node("spark-head"), node("spark-worker-1")
    assert marker(worker, model)["files"] == marker(head, model)["files"]
    # and the bytes really are the same (not only the markers)
    cmd = f"cd {folder(model)} && find -L snapshots refs -type f | sort | xargs sha256sum"
    assert worker.check_output(cmd) == head.check_output(cmd)


def test_worker_is_not_seeded_from_the_mirror():
    assert not node("spark-worker-1").file("/srv/dgxspark-sim/hf-mirror").exists


def test_damaged_worker_copy_is_found_and_repaired():
    worker = node("spark-worker-1")
    model = MODELS[1]
    weights = worker.check_output(f"readlink -f {folder(model)}/snapshots/*/model-00001-of-00001.safetensors")
    worker.run(f"truncate -s 100 {weights}")
    head = node("spark-head")
    cmd = f"cd {folder(model)} && find -L snapshots -type f | sort | xargs sha256sum"
    assert worker.check_output(cmd) != head.check_output(cmd), "the damage did not happen"
    rc, out = converge()
    assert rc == 0, out
    assert "Models | copy from the head over the fabric" in out
    assert worker.check_output(cmd) == head.check_output(cmd)


def test_too_little_disk_fails_with_figures_before_copying():
    worker = node("spark-worker-1")
    model = MODELS[0]
    worker.run(f"rm -rf {folder(model)}")
    rc, out = converge("-e", "models_disk_margin_gb=100000")
    assert rc != 0
    assert "not enough disk on spark-worker-1" in out and "GiB are free" in out, out[-3000:]
    assert not worker.file(folder(model)).exists
    rc, out = converge()
    assert rc == 0, out
    assert marker(worker, model)["files"] == marker(node("spark-head"), model)["files"]


def test_missing_mirror_is_named():
    head = node("spark-head")
    model = MODELS[1]
    head.run(f"rm -rf {folder(model)}")
    rc, out = converge("-e", "models_local_source_dir=/srv/nowhere")
    assert rc != 0
    assert "the local mirror /srv/nowhere on spark-head has no snapshot of " + model in out, out[-3000:]
    rc, out = converge()
    assert rc == 0, out


def test_check_mode_reports_the_copy_and_changes_nothing():
    worker = node("spark-worker-1")
    model = MODELS[1]
    worker.run(f"rm -rf {folder(model)}")
    rc, out = converge("--check")
    assert rc == 0, out
    assert "would copy " + model in out
    assert not worker.file(folder(model)).exists
    rc, out = converge()
    assert rc == 0, out


def test_diagnose_reports_every_node_and_the_models(tmp_path):
    res = subprocess.run(["ansible-playbook", "-i", INVENTORY, f"{SCENARIO}/../../playbooks/diagnose.yml",
                          "-e", f"diagnose_report_dir={tmp_path}"], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout[-3000:]
    report = json.loads(next(tmp_path.glob("diagnose-*.json")).read_text())
    assert set(report["nodes"]) == set(NODES)
    for name in NODES:
        sections = {s["name"]: s for s in report["nodes"][name]["sections"]}
        assert report["nodes"][name]["reachable"]
        models = sections["Models in the Hugging Face cache"]
        assert models["rc"] == 0
        for model in MODELS:
            assert f"models--{model.replace('/', '--')} " in models["output"]
        assert "INCOMPLETE" not in models["output"]
        assert "10.231.111." in sections["Fabric interface"]["output"]
    assert (tmp_path / next(tmp_path.glob("diagnose-*.json")).name.replace(".json", ".md")).exists()


def test_hub_download_failure_is_named_and_the_token_never_shown():
    """The sim's serving image has no huggingface_hub: the download must fail with the reason, token unseen."""
    head = node("spark-head")
    model = MODELS[1]
    image = "localhost/dgxspark-sim-serving:latest"
    if head.run(f"sudo docker image inspect {image} >/dev/null 2>&1").rc != 0:
        head.check_output("sudo docker load -q -i /srv/dgxspark-sim/serving-image.tar")
    head.run(f"rm -rf {folder(model)}")
    secret = "hf_TESTTOKEN0123456789"
    rc, out = converge("-vvv", "-e", "models_source=hub", "-e", f"models_image={image}", "-e", f"models_hf_token={secret}")
    assert rc != 0
    assert f"downloading {model} on spark-head with {image} failed" in out, out[-3000:]
    assert "huggingface_hub" in out
    assert secret not in out
    rc, out = converge()
    assert rc == 0, out
