# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Decode and prefill speed of an OpenAI-compatible endpoint, from one streaming request at a time.

A run is one streaming chat completion. Its figures:
  - ttft: request sent -> first generated token arrives (prefill plus one step);
  - prefill tok/s = prompt tokens / ttft;
  - decode tok/s = (generated tokens - 1) / (last token time - first token time),
    the same "tg" figure as llama-bench's tg32 when 32 tokens are generated.
Token counts come from the final usage chunk (stream_options.include_usage);
without it, every chunk that carries text counts as one token.
"""

from __future__ import annotations

import json
import statistics
import time

from ansible.module_utils.urls import open_url

# The endpoint options the modules that load it share (openai_bench, openai_soak).
ENDPOINT_SPEC = dict(
    url=dict(type="str", required=True),
    api_key=dict(type="str", no_log=True),
    model=dict(type="str"),
)

# Fields a chunk's delta may carry generated text in (reasoning parsers split it out).
TEXT_FIELDS = ("content", "reasoning_content", "reasoning")


def sse_events(lines):
    """Yield the JSON payloads of a server-sent event stream until [DONE]."""
    for raw in lines:
        line = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        line = line.strip()
        if not line.startswith("data:"):
            continue
        payload = line[len("data:"):].strip()
        if payload == "[DONE]":
            return
        if payload:
            yield json.loads(payload)


def has_text(event):
    for choice in event.get("choices") or []:
        delta = choice.get("delta") or {}
        if any(delta.get(field) for field in TEXT_FIELDS):
            return True
    return False


def measure(lines, started, clock):
    """Figures of one streamed response; `started` is the clock reading when the request was sent."""
    token_times = []
    usage = None
    for event in sse_events(lines):
        now = clock()
        if has_text(event):
            token_times.append(now)
        if event.get("usage"):
            usage = event["usage"]
    if not token_times:
        raise ValueError("the stream carried no generated text")
    completion = (usage or {}).get("completion_tokens") or len(token_times)
    prompt = (usage or {}).get("prompt_tokens")
    ttft = token_times[0] - started
    span = token_times[-1] - token_times[0]
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "chunks": len(token_times),
        "ttft_s": round(ttft, 4),
        "decode_s": round(span, 4),
        "decode_tok_s": round((completion - 1) / span, 2) if completion > 1 and span > 0 else None,
        "prefill_tok_s": round(prompt / ttft, 1) if prompt and ttft > 0 else None,
    }


def rescale(figures, time_scale):
    """Figures of an endpoint whose clock runs `time_scale` times slower than the wall clock (a
    simulated pair paced by a model, slowed to stay above its host's real compute) on its own clock."""
    if time_scale == 1:
        return figures
    out = dict(figures)
    for key in ("ttft_s", "decode_s"):
        if out.get(key) is not None:
            out[key] = round(out[key] / time_scale, 4)
    for key, digits in (("decode_tok_s", 2), ("prefill_tok_s", 1)):
        if out.get(key) is not None:
            out[key] = round(out[key] * time_scale, digits)
    return out


def median_of(runs, key):
    values = [run[key] for run in runs if run.get(key) is not None]
    return round(statistics.median(values), 2) if values else None


def summarize(runs):
    return {
        "decode_tok_s": median_of(runs, "decode_tok_s"),
        "prefill_tok_s": median_of(runs, "prefill_tok_s"),
        "ttft_s": median_of(runs, "ttft_s"),
        "completion_tokens": median_of(runs, "completion_tokens"),
        "prompt_tokens": median_of(runs, "prompt_tokens"),
    }


def compare(measured, expected, min_ratio):
    """Ratio measured/expected per figure and whether each clears min_ratio (None = not comparable)."""
    verdicts = {}
    for key, want in (expected or {}).items():
        got = measured.get(key)
        if got is None or not want:
            verdicts[key] = {"measured": got, "expected": want, "ratio": None, "ok": None}
            continue
        ratio = round(got / float(want), 3)
        verdicts[key] = {"measured": got, "expected": want, "ratio": ratio, "ok": ratio >= min_ratio}
    return verdicts


def chat_body(model, prompt, max_tokens, ignore_eos=True):
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if ignore_eos:
        # vLLM extension: keep generating to max_tokens, so every run has the same length.
        body["ignore_eos"] = True
    return body


class Client:
    """Tiny HTTP client for the endpoint (stdlib only, the nodes need nothing installed)."""

    def __init__(self, base_url, api_key=None, timeout=600, clock=time.monotonic):
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.clock = clock

    def _open(self, path, body=None):
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        return open_url(self.base_url + path, data=data, headers=headers, timeout=self.timeout,
                        method="POST" if data is not None else "GET")

    def models(self):
        with self._open("/v1/models") as response:
            return json.loads(response.read().decode("utf-8")).get("data") or []

    def pick_model(self, model=None):
        """The /v1/models entry to ask: `model`, or the first one listed. ValueError names what is wrong."""
        try:
            listed = self.models()
        except Exception as exc:  # pylint: disable=broad-except
            raise ValueError("cannot list models at %s/v1/models: %s; is the endpoint up (systemctl status dgxspark-vllm)?"
                             % (self.base_url, exc)) from exc
        entry = next((m for m in listed if m.get("id") == model), None) if model else (listed[0] if listed else None)
        if entry is None:
            raise ValueError("model %s not served at %s; served: %s" % (model or "(any)", self.base_url,
                                                                        [m.get("id") for m in listed]))
        return entry

    def version(self):
        """vLLM's /version, or 'unknown' where the server has none."""
        try:
            with self._open("/version") as response:
                return str(json.loads(response.read().decode("utf-8")).get("version", "unknown"))
        except Exception:  # pylint: disable=broad-except
            return "unknown"

    def run(self, model, prompt, max_tokens, ignore_eos=True):
        started = self.clock()
        with self._open("/v1/chat/completions", chat_body(model, prompt, max_tokens, ignore_eos)) as response:
            return measure(response, started, self.clock)


# The soak: many requests side by side for a while, judged on errors, latency and the decode rate over time.

def percentile(values, q):
    """The q-th percentile (0-100) by nearest rank; None for no values."""
    ordered = sorted(v for v in values if v is not None)
    if not ordered:
        return None
    rank = max(1, -(-len(ordered) * q // 100))  # ceil
    return round(ordered[int(rank) - 1], 4)


def soak_windows(records, duration, windows):
    """The decode rate over time: the soak cut into `windows` equal spans by each request's start, the median
    decode tok/s of the requests that decoded in each ({"from_s", "to_s", "requests", "decode_tok_s"})."""
    span = float(duration) / windows
    out = []
    for index in range(windows):
        inside = [r for r in records if r.get("ok") and min(int(r["t"] // span), windows - 1) == index]
        rates = [r["decode_tok_s"] for r in inside if r.get("decode_tok_s") is not None]
        out.append({"from_s": round(index * span, 1), "to_s": round((index + 1) * span, 1), "requests": len(inside),
                    "decode_tok_s": round(statistics.median(rates), 2) if rates else None})
    return out


def soak_verdict(records, duration, windows=4, max_drift=0.25, max_errors=0):
    """The soak's figures and whether it passed: no more than `max_errors` failed requests (a request past its
    deadline is one: a hang), and no window's median decode rate below the first window's by more than
    `max_drift` (a fraction)."""
    ok = [r for r in records if r.get("ok")]
    errors = [r for r in records if not r.get("ok")]
    spans = soak_windows(records, duration, windows)
    rated = [w for w in spans if w["decode_tok_s"]]
    drift = round(min(w["decode_tok_s"] for w in rated) / rated[0]["decode_tok_s"], 3) if len(rated) > 1 else None
    reasons = []
    if len(errors) > max_errors:
        reasons.append("%d of %d requests failed (at most %d allowed); first: %s" % (
            len(errors), len(records), max_errors, "; ".join(sorted({e["error"] for e in errors}))[:600]))
    if drift is not None and drift < 1 - max_drift:
        reasons.append("the decode rate fell to %.0f%% of the first window's (%s tok/s to %s; at most %.0f%% drift "
                       "allowed)" % (drift * 100, rated[0]["decode_tok_s"], min(w["decode_tok_s"] for w in rated),
                                     max_drift * 100))
    if not ok:
        reasons.append("no request succeeded")
    latency = [r["latency_s"] for r in ok]
    ttft = [r.get("ttft_s") for r in ok]
    return {
        "passed": not reasons,
        "reasons": reasons,
        "requests": len(records),
        "errors": len(errors),
        "by_kind": {k: len([r for r in ok if r["kind"] == k]) for k in sorted({r["kind"] for r in records})},
        "latency_s": {"p50": percentile(latency, 50), "p90": percentile(latency, 90), "p99": percentile(latency, 99),
                      "max": percentile(latency, 100)},
        "ttft_s": {"p50": percentile(ttft, 50), "p99": percentile(ttft, 99)},
        "decode_tok_s": median_of(ok, "decode_tok_s"),
        "windows": spans,
        "drift": drift,
    }
