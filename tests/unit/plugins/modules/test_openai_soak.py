"""The soak: its judgement (module_utils/_bench.py) and the module against a loopback stream."""
import http.server
import threading
import time

import pytest

from ansible_collections.dgxspark.vllm.plugins.module_utils import _bench
from ansible_collections.dgxspark.vllm.plugins.modules import openai_soak
from ansible_collections.dgxspark.vllm.tests.unit.plugins.module_utils import test_bench


@pytest.fixture(name="run")
def fixture_run(run_module):
    return lambda args, check_mode=False: run_module(openai_soak.main, args, check_mode=check_mode)


def rec(t, rate=36.0, ok=True, kind="decode", latency=1.0, error=""):
    r = {"t": t, "kind": kind, "ok": ok}
    if ok:
        r.update(latency_s=latency, ttft_s=0.1, decode_tok_s=rate if kind == "decode" else None)
    else:
        r["error"] = error
    return r


def test_percentiles_by_nearest_rank():
    values = list(range(1, 101))
    assert _bench.percentile(values, 50) == 50 and _bench.percentile(values, 99) == 99
    assert _bench.percentile(values, 100) == 100 and _bench.percentile([], 50) is None


def test_a_steady_soak_passes_with_its_figures():
    records = [rec(t, kind="long" if t % 2 else "decode") for t in range(0, 100)]
    out = _bench.soak_verdict(records, 100, windows=4)
    assert out["passed"] and out["reasons"] == [] and out["drift"] == 1.0
    assert [w["requests"] for w in out["windows"]] == [25, 25, 25, 25]
    assert out["by_kind"] == {"decode": 50, "long": 50} and out["latency_s"]["p99"] == 1.0


def test_a_decode_rate_that_falls_beyond_the_bound_fails_naming_it():
    records = [rec(t, rate=36.0 if t < 75 else 20.0) for t in range(0, 100)]
    out = _bench.soak_verdict(records, 100, windows=4, max_drift=0.25)
    assert not out["passed"] and out["drift"] == 0.556
    assert "the decode rate fell to 56% of the first window's (36.0 tok/s to 20.0" in out["reasons"][0]
    assert _bench.soak_verdict(records, 100, windows=4, max_drift=0.5)["passed"]


def test_failed_requests_fail_it_beyond_the_allowance():
    records = [rec(t) for t in range(10)] + [rec(5.5, ok=False, error="TimeoutError: timed out")]
    out = _bench.soak_verdict(records, 10, windows=2)
    assert not out["passed"] and "1 of 11 requests failed (at most 0 allowed); first: TimeoutError: timed out" in out["reasons"][0]
    assert _bench.soak_verdict(records, 10, windows=2, max_errors=1)["passed"]


def test_the_module_loads_the_endpoint_from_side_by_side_clients_for_its_duration(run):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), test_bench.StreamingHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    test_bench.StreamingHandler.seen.clear()
    try:
        # A loopback stream's decode rate is scheduling noise (hundreds of thousands of tok/s): the drift bound is
        # the judgement's, tested above on set figures, and left out here.
        out = run({"url": "http://127.0.0.1:%d" % httpd.server_address[1], "api_key": "sk-soak", "duration": 0.6,
                   "concurrency": 3, "long_prompt": "long " * 50, "windows": 2, "max_drift": 0.99})
    finally:
        httpd.shutdown()
    assert out["passed"] and out["errors"] == 0 and out["model"] == "tiny", out
    assert out["by_kind"]["long"] >= 1 and out["by_kind"]["decode"] >= 1
    assert out["requests"] == len(test_bench.StreamingHandler.seen)
    assert {auth for _req, auth in test_bench.StreamingHandler.seen} == {"Bearer sk-soak"}


def test_an_endpoint_that_stops_answering_is_a_failed_soak(run):
    class Silent(test_bench.StreamingHandler):
        def do_POST(self):  # pylint: disable=invalid-name
            self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(2)  # past the request's deadline: a hang

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Silent)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        out = run({"url": "http://127.0.0.1:%d" % httpd.server_address[1], "duration": 0.2, "concurrency": 1,
                   "long_prompt": "x", "timeout": 0.5})
    finally:
        httpd.shutdown()
    assert not out["passed"] and out["errors"] >= 1 and "timed out" in out["reasons"][0], out
    assert out["failures"][0]["kind"] == "long"


def test_check_mode_sends_nothing_and_bad_settings_are_named(run):
    test_bench.StreamingHandler.seen.clear()
    out = run({"url": "http://127.0.0.1:9", "long_prompt": "x"}, check_mode=True)
    assert out["passed"] and out["requests"] == 0 and not test_bench.StreamingHandler.seen
    bad = run({"url": "http://127.0.0.1:9", "long_prompt": "x", "max_drift": 1.5})
    assert bad["failed"] and "max_drift=1.5" in bad["msg"]
