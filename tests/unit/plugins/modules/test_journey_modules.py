"""The modules of the journey (test_image, model_cache, openai_bench) run through AnsibleModule."""
import base64
import hashlib
import os

import pytest

from ansible_collections.dgxspark.vllm.plugins.modules import model_cache, openai_bench, test_image


@pytest.fixture(name="run")
def fixture_run(run_module):
    return lambda module, args, check_mode=False: run_module(module.main, args, check_mode=check_mode)


def test_test_image_returns_content_and_writes_dest_once(tmp_path, run):
    dest = tmp_path / "synthetic.png"
    checked = run(test_image, {"name": "synthetic", "dest": str(dest)}, check_mode=True)
    assert checked["changed"] is True and not dest.exists()
    first = run(test_image, {"name": "synthetic", "dest": str(dest)})
    data = base64.b64decode(first["base64"])
    assert first["changed"] is True and dest.read_bytes() == data
    assert first["sha256"] == hashlib.sha256(data).hexdigest() and first["size"] == len(data)
    again = run(test_image, {"name": "synthetic", "dest": str(dest)})
    assert again["changed"] is False


def test_model_cache_inspect_seal_and_verify(tmp_path, run, make_model):
    path = make_model(tmp_path / "src")
    args = {"cache_dir": str(tmp_path / "src"), "model": "Org/Tiny"}
    before = run(model_cache, args)
    assert before["exists"] and not before["complete"] and before["marker"] is None
    assert before["present_bytes"] > 0 and before["free_bytes"] > 0
    assert run(model_cache, dict(args, state="sealed"), check_mode=True)["changed"] is True
    assert not os.path.exists(os.path.join(path, ".dgxspark-complete.json"))
    sealed = run(model_cache, dict(args, state="sealed"))
    assert sealed["changed"] and sealed["complete"] and sealed["total_bytes"] == 1014
    assert run(model_cache, dict(args, state="sealed"))["changed"] is False

    # a copy with a different config does not get sealed
    make_model(tmp_path / "dst", files={"config.json": b'{"a": 9}', "model.safetensors": b"\x00" * 1000})
    bad = run(model_cache, {"cache_dir": str(tmp_path / "dst"), "model": "Org/Tiny", "state": "sealed",
                            "expected": sealed["marker"]})
    assert bad["failed"] and "does not match its source" in bad["msg"]
    assert bad["differences"]["different"] == ["snapshots/abc123/config.json"]


def test_model_cache_refuses_to_seal_nothing_and_bad_ids(tmp_path, run):
    empty = run(model_cache, {"cache_dir": str(tmp_path), "model": "Org/None", "state": "sealed"})
    assert empty["failed"] and "nothing to seal" in empty["msg"]
    bad = run(model_cache, {"cache_dir": str(tmp_path), "model": "no-slash"})
    assert bad["failed"] and "ORG/NAME" in bad["msg"]


def test_openai_bench_names_an_unreachable_endpoint(run):
    # port 9 on loopback (discard) is closed in test environments
    out = run(openai_bench, {"url": "http://127.0.0.1:9", "prompt": "x", "runs": 1, "timeout": 2})
    assert out["failed"] and "cannot list models" in out["msg"]


def test_openai_bench_measures_a_loopback_server(run):
    from ansible_collections.dgxspark.vllm.tests.unit.plugins.module_utils import test_bench
    import http.server
    import threading
    httpd = http.server.HTTPServer(("127.0.0.1", 0), test_bench.StreamingHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        out = run(openai_bench, {"url": f"http://127.0.0.1:{httpd.server_address[1]}", "prompt": "hello",
                                 "runs": 3, "warmup": 1, "max_tokens": 4})
    finally:
        httpd.shutdown()
    assert out["changed"] is False and out["model"] == "tiny" and out["owned_by"] == "test"
    assert len(out["runs"]) == 3 and out["median"]["completion_tokens"] == 4
    prompts = [req["messages"][0]["content"] for req, _ in test_bench.StreamingHandler.seen[-4:]]
    assert prompts == ["Run 0. hello", "Run 1. hello", "Run 2. hello", "Run 3. hello"]


def test_openai_bench_stops_starting_runs_after_its_duration_and_rescales(run):
    from ansible_collections.dgxspark.vllm.tests.unit.plugins.module_utils import test_bench
    import http.server
    import threading
    httpd = http.server.HTTPServer(("127.0.0.1", 0), test_bench.StreamingHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        # A duration already spent after the first run: the first always runs, no second starts.
        short = run(openai_bench, {"url": url, "prompt": "x", "runs": 50, "warmup": 0, "max_tokens": 4,
                                   "duration": 1e-9})
        plain = run(openai_bench, {"url": url, "prompt": "x", "runs": 1, "warmup": 0, "max_tokens": 4})
        scaled = run(openai_bench, {"url": url, "prompt": "x", "runs": 1, "warmup": 0, "max_tokens": 4,
                                    "time_scale": 1e6})
    finally:
        httpd.shutdown()
    assert len(short["runs"]) == 1
    # The same loopback stream on a clock a million times slower: its rate is a million times higher.
    assert scaled["runs"][0]["prefill_tok_s"] > 1000 * plain["runs"][0]["prefill_tok_s"]


def test_openai_bench_refuses_a_scale_of_zero_naming_it(run):
    out = run(openai_bench, {"url": "http://127.0.0.1:9", "prompt": "x", "time_scale": 0})
    assert out["failed"] and "time_scale=0.0" in out["msg"]
