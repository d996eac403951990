"""Bench math: SSE parsing, decode/prefill figures from token timing, medians and ratios."""
import http.server
import json
import threading

import pytest

from ansible_collections.dgxspark.vllm.plugins.module_utils import _bench


def chunk(text=None, usage=None, field="content"):
    event = {"choices": [] if text is None else [{"index": 0, "delta": {field: text}}]}
    if usage:
        event["usage"] = usage
    return "data: " + json.dumps(event) + "\n"


class FakeClock:
    """Returns the given readings in order: one for the request start, then one per event."""

    def __init__(self, readings):
        self.readings = list(readings)

    def __call__(self):
        return self.readings.pop(0)


def test_measure_uses_usage_counts_and_token_times():
    lines = [chunk("a"), "\n", chunk("b"), chunk("c"),
             chunk(usage={"prompt_tokens": 1000, "completion_tokens": 32}), "data: [DONE]\n"]
    # events at t=2.0, 2.5, 3.0 (tokens) and 3.1 (usage); request sent at 1.0
    clock = FakeClock([2.0, 2.5, 3.0, 3.1])
    figures = _bench.measure(lines, 1.0, clock)
    assert figures["ttft_s"] == 1.0
    assert figures["prefill_tok_s"] == 1000.0
    assert figures["completion_tokens"] == 32
    assert figures["decode_tok_s"] == 31.0  # 31 tokens after the first, in 1.0 s
    assert figures["chunks"] == 3


def test_measure_counts_chunks_without_usage_and_reasoning_text():
    lines = [chunk("x", field="reasoning_content"), chunk("y"), chunk("z"), "data: [DONE]\n", chunk("after done")]
    figures = _bench.measure(lines, 0.0, FakeClock([0.5, 1.0, 1.5]))
    assert figures["completion_tokens"] == 3
    assert figures["decode_tok_s"] == 2.0
    assert figures["prefill_tok_s"] is None


def test_measure_rejects_a_stream_without_text():
    with pytest.raises(ValueError):
        _bench.measure([chunk(usage={"completion_tokens": 0}), "data: [DONE]\n"], 0.0, FakeClock([1.0]))


def test_median_and_compare():
    runs = [{"decode_tok_s": v, "prefill_tok_s": 900 + v} for v in (30.0, 36.0, 35.0, 20.0, 37.0)]
    summary = _bench.summarize(runs)
    assert summary["decode_tok_s"] == 35.0
    assert summary["prefill_tok_s"] == 935.0
    verdict = _bench.compare(summary, {"decode_tok_s": 36.3, "prefill_tok_s": 1000}, 0.8)
    assert verdict["decode_tok_s"]["ok"] is True
    assert verdict["decode_tok_s"]["ratio"] == round(35.0 / 36.3, 3)
    low = _bench.compare({"decode_tok_s": 20.0}, {"decode_tok_s": 36.3}, 0.8)
    assert low["decode_tok_s"]["ok"] is False and low["decode_tok_s"]["ratio"] == 0.551


def test_compare_marks_missing_figures_not_comparable():
    verdict = _bench.compare({"decode_tok_s": None}, {"decode_tok_s": 36.3}, 0.8)
    assert verdict["decode_tok_s"]["ok"] is None


def test_chat_body_asks_for_usage_and_fixed_length():
    body = _bench.chat_body("m", "hi", 32)
    assert body["stream"] and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 32 and body["ignore_eos"] is True
    assert "ignore_eos" not in _bench.chat_body("m", "hi", 32, ignore_eos=False)


class StreamingHandler(http.server.BaseHTTPRequestHandler):
    """Loopback test server: lists one model, streams 4 text chunks and a usage chunk."""
    seen = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = json.dumps({"data": [{"id": "tiny", "owned_by": "test"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        StreamingHandler.seen.append((request, self.headers.get("Authorization")))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for text in ("one", " two", " three", " four"):
            self.wfile.write(chunk(text).encode())
            self.wfile.flush()
        self.wfile.write(chunk(usage={"prompt_tokens": 7, "completion_tokens": 4}).encode())
        self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture
def server():
    httpd = http.server.HTTPServer(("127.0.0.1", 0), StreamingHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_client_against_a_loopback_stream(server):
    client = _bench.Client(server, api_key="sk-test", timeout=10)
    assert client.models()[0]["id"] == "tiny"
    figures = client.run("tiny", "Run 0. hello", 4)
    assert figures["completion_tokens"] == 4 and figures["prompt_tokens"] == 7
    assert figures["chunks"] == 4
    request, auth = StreamingHandler.seen[-1]
    assert auth == "Bearer sk-test"
    assert request["messages"][0]["content"] == "Run 0. hello" and request["stream"] is True


def test_rescale_divides_a_slowed_clock_out_of_times_and_rates():
    figures = {"ttft_s": 5.0, "decode_s": 4.0, "decode_tok_s": 7.5, "prefill_tok_s": 200.0, "completion_tokens": 31}
    out = _bench.rescale(figures, 5.0)
    assert out == {"ttft_s": 1.0, "decode_s": 0.8, "decode_tok_s": 37.5, "prefill_tok_s": 1000.0,
                   "completion_tokens": 31}
    assert _bench.rescale(figures, 1) is figures
    assert _bench.rescale({"decode_tok_s": None, "ttft_s": None}, 2.0) == {"decode_tok_s": None, "ttft_s": None}
