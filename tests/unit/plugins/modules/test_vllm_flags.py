"""vllm_flags: reads the image's parser once per image ID, then its cache; an absent image is not an error."""
import json

import pytest

from ansible.module_utils import basic
from ansible_collections.dgxspark.vllm.plugins.module_utils import _vllm_flags
from ansible_collections.dgxspark.vllm.plugins.modules import vllm_flags

ID = "sha256:" + "cd" * 32
DUMP = _vllm_flags.MARK + json.dumps({"version": "0.32.0", "flags": ["max-model-len"], "json_keys": {},
                                      "values": {}, "json_values": {}, "format": _vllm_flags.FORMAT})


@pytest.fixture
def cli(monkeypatch):
    calls = []
    state = {"present": True, "dump": DUMP, "id": ID, "nccl": None}

    def run_command(self, args, **kwargs):
        calls.append(args)
        if "inspect" in args:
            return (0, state["id"] + "\n", "") if state["present"] else (1, "", "Error: No such image")
        if "run" in args and _vllm_flags.NCCL_SCRIPT in args:
            return (0, _vllm_flags.NCCL_MARK + json.dumps(state["nccl"]) + "\n", "") if state["nccl"] else (1, "", "no")
        if "run" in args:
            return (0, "W warning\n" + state["dump"] + "\n", "") if state["dump"] else (1, "", "python3: not found")
        raise AssertionError(args)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    return calls, state


def test_reads_the_image_once_then_its_cache(run_module, cli, tmp_path):
    calls, _ = cli
    args = {"image": "img:latest", "cache_dir": str(tmp_path)}
    first = run_module(vllm_flags.main, args)
    assert first["found"] and not first["cached"] and not first["changed"]
    assert first["flagset"]["image_id"] == ID and first["flagset"]["flags"] == ["max-model-len"]
    assert first["source"] == "image"
    run = [c for c in calls if "run" in c][0]
    assert run[run.index("--network") + 1] == "none" and ID.split(":")[1] in run
    again = run_module(vllm_flags.main, args)
    assert again["cached"] and again["flagset"] == first["flagset"]
    assert len([c for c in calls if "run" in c]) == 1


def test_check_mode_reads_but_keeps_no_cache(run_module, cli, tmp_path):
    out = run_module(vllm_flags.main, {"image": "img", "cache_dir": str(tmp_path), "_ansible_check_mode": True})
    assert out["found"] and list(tmp_path.iterdir()) == []


def test_an_absent_image_or_one_without_vllm_is_not_found_with_the_reason(run_module, cli, tmp_path):
    _, state = cli
    state["present"] = False
    out = run_module(vllm_flags.main, {"container": "dgxspark-ray", "cache_dir": str(tmp_path)})
    assert not out["found"] and "container dgxspark-ray is not on this node" in out["reason"] and out["source"] == ""
    state.update(present=True, dump="")
    out = run_module(vllm_flags.main, {"image": "img", "cache_dir": str(tmp_path)})
    assert not out["found"] and "could not be read" in out["reason"] and "python3: not found" in out["reason"]


def test_an_image_without_vllm_is_read_once_and_a_failed_start_is_tried_again(run_module, cli, tmp_path, monkeypatch):
    calls, state = cli
    state["dump"] = ""
    args = {"image": "img", "cache_dir": str(tmp_path)}
    first, again = run_module(vllm_flags.main, args), run_module(vllm_flags.main, args)
    assert not first["found"] and not first["cached"]
    assert not again["found"] and again["cached"] and again["reason"] == first["reason"]
    # The dump, then the NCCL read alone; the cache answers the second time.
    assert len([c for c in calls if "run" in c]) == 2
    assert again["nccl"] == first["nccl"] == {"version": None, "file": None, "so_path_env": None}
    # A container that did not start says nothing about the image: not kept.
    real = basic.AnsibleModule.run_command
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, a, **kw: (
        (125, "", "Error: OCI runtime error") if "run" in a else real(self, a, **kw)))
    other = {"image": "img", "cache_dir": str(tmp_path / "other")}
    assert not run_module(vllm_flags.main, other)["found"]
    assert not (tmp_path / "other").exists()


def test_the_container_is_tried_first_then_the_image(run_module, cli, tmp_path, monkeypatch):
    calls, _ = cli
    real = basic.AnsibleModule.run_command

    def no_container(self, args, **kwargs):
        if args[1] == "inspect":
            calls.append(args)
            return 1, "", "Error: no such container dgxspark-ray"
        return real(self, args, **kwargs)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", no_container)
    out = run_module(vllm_flags.main, {"container": "dgxspark-ray", "image": "img:latest", "cache_dir": str(tmp_path)})
    assert out["found"] and out["image_id"] == ID and out["source"] == "image"
    assert [c[1] for c in calls if "inspect" in c][:2] == ["inspect", "image"]


def test_a_running_container_is_named_as_the_source(run_module, cli, tmp_path):
    out = run_module(vllm_flags.main, {"container": "dgxspark-ray", "image": "img:latest", "cache_dir": str(tmp_path)})
    assert out["found"] and out["source"] == "container"


def test_the_cache_follows_the_image_id_not_its_name(run_module, cli, tmp_path):
    # A tag moved to a rebuilt image has another vLLM: read again. Another name of the same image: the cache.
    calls, state = cli
    run_module(vllm_flags.main, {"image": "img:latest", "cache_dir": str(tmp_path)})
    state["id"] = "sha256:" + "ef" * 32
    moved = run_module(vllm_flags.main, {"image": "img:latest", "cache_dir": str(tmp_path)})
    assert not moved["cached"] and moved["image_id"] == state["id"]
    alias = run_module(vllm_flags.main, {"image": "other:tag", "cache_dir": str(tmp_path)})
    assert alias["cached"] and alias["flagset"]["image_id"] == state["id"]
    assert len([c for c in calls if "run" in c]) == 2


def test_a_flag_set_kept_by_an_older_dump_is_read_again(run_module, cli, tmp_path):
    calls, _ = cli
    args = {"image": "img:latest", "cache_dir": str(tmp_path)}
    first = run_module(vllm_flags.main, args)
    cache = next(tmp_path.iterdir())
    cache.write_text(json.dumps({k: v for k, v in first["flagset"].items() if k not in ("values", "format")}))
    again = run_module(vllm_flags.main, args)
    assert not again["cached"] and again["flagset"]["format"] == _vllm_flags.FORMAT
    assert len([c for c in calls if "run" in c]) == 2


def test_an_image_whose_vllm_cannot_be_read_still_has_its_nccl_read(run_module, cli, tmp_path):
    """Which NCCL the engine would load is a fact of the image's torch and wheels, not of vLLM's parser."""
    _, state = cli
    pip = {"version": "2.28.9", "file": "/opt/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
           "so_path_env": None}
    state.update(dump="", nccl=pip)
    out = run_module(vllm_flags.main, {"image": "img", "cache_dir": str(tmp_path)})
    assert not out["found"] and out["nccl"] == pip
    assert run_module(vllm_flags.main, {"image": "img", "cache_dir": str(tmp_path)})["nccl"] == pip


def test_a_kept_unreadable_vllm_without_its_nccl_is_read_again(run_module, cli, tmp_path):
    calls, state = cli
    state.update(dump="", nccl={"version": "2.30.4", "file": None, "so_path_env": None})
    (tmp_path / (ID.replace(":", "_") + ".json")).write_text(json.dumps({"found": False, "reason": "old"}))
    out = run_module(vllm_flags.main, {"image": "img", "cache_dir": str(tmp_path)})
    assert out["nccl"]["version"] == "2.30.4" and not out["cached"]
    assert len([c for c in calls if "run" in c]) == 2
