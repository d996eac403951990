#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: openai_soak
short_description: Load an OpenAI-compatible endpoint for a while and judge errors, latency and the decode rate over time
description:
  - Sends streaming chat completions from O(concurrency) clients side by side for O(duration) seconds, each client
    alternating a long prompt (prefill) and a decode of O(max_tokens) tokens, as the failures users report after
    20 minutes of mixed load need.
  - Reports the requests, the failures (a request with no answer within O(timeout) counts as one, a hang), latency
    and time-to-first-token percentiles, and the median decode rate in O(windows) spans of the soak.
  - Fails when more than O(max_errors) requests failed, or a span's decode rate fell below the first span's by more
    than O(max_drift).
  - Only reads from the endpoint; in check mode it sends nothing.
author:
  - dgxspark.vllm contributors (@dgxspark)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes.read_only
  - dgxspark.vllm.attributes
attributes:
  check_mode:
    details: In check mode it sends nothing and reports no figures.
options:
  url:
    description: Base URL of the endpoint (without C(/v1)).
    type: str
    required: true
  api_key:
    description: Bearer key, when the endpoint requires one.
    type: str
  model:
    description: Model to ask; the first one C(/v1/models) lists when omitted.
    type: str
  duration:
    description: Seconds during which clients start new requests.
    type: float
    default: 600
  concurrency:
    description: Clients sending side by side.
    type: int
    default: 4
  long_prompt:
    description: The long prompt (prefill load).
    type: str
    required: true
  long_max_tokens:
    description: Tokens a long-prompt request generates.
    type: int
    default: 8
  short_prompt:
    description: The prompt of a decode request.
    type: str
    default: Count from one to a thousand, one number a line.
  max_tokens:
    description: Tokens a decode request generates.
    type: int
    default: 64
  timeout:
    description: Seconds a request may take; past it, it counts as failed (a hang).
    type: float
    default: 600
  windows:
    description: Spans the soak is cut into for the decode rate over time.
    type: int
    default: 4
  max_drift:
    description: The largest fall of a span's median decode rate below the first span's, as a fraction.
    type: float
    default: 0.25
  max_errors:
    description: Failed requests allowed.
    type: int
    default: 0
  time_scale:
    description: How many times slower than the wall clock the endpoint's clock runs (a simulated pair paced by a model).
    type: float
    default: 1.0
"""

EXAMPLES = r"""
- name: Soak the head's endpoint for 20 minutes with 4 clients
  dgxspark.vllm.openai_soak:
    url: http://127.0.0.1:8000
    api_key: "{{ serve_api_key }}"
    duration: 1200
    concurrency: 4
    long_prompt: "{{ 'A long document about transistors. ' * 400 }}"
  register: soak
"""

RETURN = r"""
passed:
  description: Whether the soak passed (no more failures than allowed, no drift beyond the bound).
  returned: always
  type: bool
reasons:
  description: Why it did not pass.
  returned: always
  type: list
  elements: str
  sample: ["the decode rate fell to 61% of the first window's (36.2 tok/s to 22.1; at most 25% drift allowed)"]
requests:
  description: Requests sent, and how many failed (C(errors)); C(by_kind) counts the successful ones by kind (long, decode).
  returned: always
  type: int
  sample: 212
errors:
  description: Failed requests.
  returned: always
  type: int
  sample: 0
by_kind:
  description: Successful requests by kind.
  returned: always
  type: dict
  sample: {decode: 106, long: 106}
latency_s:
  description: Whole-request latency percentiles of the successful requests (p50, p90, p99, max), on the endpoint's clock.
  returned: always
  type: dict
  sample: {p50: 3.1, p90: 6.2, p99: 7.9, max: 8.4}
ttft_s:
  description: Time-to-first-token percentiles (p50, p99), queueing included.
  returned: always
  type: dict
  sample: {p50: 1.2, p99: 4.8}
decode_tok_s:
  description: Median decode tokens/s of the successful requests.
  returned: always
  type: float
  sample: 35.9
windows:
  description: The soak's spans with their request count and median decode tokens/s.
  returned: always
  type: list
  elements: dict
  sample: [{from_s: 0.0, to_s: 300.0, requests: 53, decode_tok_s: 36.1}]
drift:
  description: The lowest span's median decode rate over the first span's; null with fewer than two rated spans.
  returned: always
  type: float
  sample: 0.97
failures:
  description: The first failed requests (when they started, their kind, the error).
  returned: always
  type: list
  elements: dict
"""

import threading
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.vllm.plugins.module_utils import _bench


def client_loop(client, model, p, started, records, lock, index):
    """One client: long and decode requests in turn, until the soak's duration is over."""
    turn = index  # clients start on different kinds, so both run from the first second
    while time.monotonic() - started < p["duration"]:
        kind = "long" if turn % 2 == 0 else "decode"
        turn += 1
        t0 = time.monotonic()
        record = {"t": round(t0 - started, 3), "kind": kind, "client": index}
        try:
            prompt = p["long_prompt"] if kind == "long" else p["short_prompt"]
            tokens = p["long_max_tokens"] if kind == "long" else p["max_tokens"]
            figures = _bench.rescale(client.run(model, "Client %d, request %d. %s" % (index, turn, prompt), tokens),
                                     p["time_scale"])
            record.update(ok=True, latency_s=round((time.monotonic() - t0) / p["time_scale"], 4),
                          ttft_s=figures["ttft_s"], decode_tok_s=figures["decode_tok_s"] if kind == "decode" else None)
        except Exception as exc:  # pylint: disable=broad-except
            record.update(ok=False, error="%s: %s" % (type(exc).__name__, str(exc)[:300]))
        with lock:
            records.append(record)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            _bench.ENDPOINT_SPEC,
            duration=dict(type="float", default=600.0),
            concurrency=dict(type="int", default=4),
            long_prompt=dict(type="str", required=True),
            long_max_tokens=dict(type="int", default=8, no_log=False),
            short_prompt=dict(type="str", default="Count from one to a thousand, one number a line."),
            max_tokens=dict(type="int", default=64, no_log=False),
            timeout=dict(type="float", default=600.0),
            windows=dict(type="int", default=4),
            max_drift=dict(type="float", default=0.25),
            max_errors=dict(type="int", default=0),
            time_scale=dict(type="float", default=1.0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if (p["duration"] <= 0 or p["concurrency"] < 1 or p["windows"] < 1 or p["max_tokens"] < 2
            or not 0 <= p["max_drift"] < 1 or p["max_errors"] < 0 or p["timeout"] <= 0 or p["time_scale"] <= 0):
        module.fail_json(msg="duration > 0, concurrency >= 1, windows >= 1, max_tokens >= 2, 0 <= max_drift < 1, "
                             "max_errors >= 0, timeout > 0 and time_scale > 0; got duration=%(duration)s "
                             "concurrency=%(concurrency)s windows=%(windows)s max_tokens=%(max_tokens)s "
                             "max_drift=%(max_drift)s max_errors=%(max_errors)s timeout=%(timeout)s "
                             "time_scale=%(time_scale)s" % p)
    if module.check_mode:
        module.exit_json(changed=False, passed=True, reasons=["check mode: nothing sent"], requests=0, errors=0,
                         by_kind={}, latency_s={}, ttft_s={}, decode_tok_s=None, windows=[], drift=None, failures=[])
    client = _bench.Client(p["url"], p["api_key"], p["timeout"])
    try:
        entry = client.pick_model(p["model"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    records, lock, started = [], threading.Lock(), time.monotonic()
    clients = [threading.Thread(target=client_loop, args=(client, entry["id"], p, started, records, lock, i), daemon=True)
               for i in range(p["concurrency"])]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join()
    result = _bench.soak_verdict(records, p["duration"], p["windows"], p["max_drift"], p["max_errors"])
    result["failures"] = [{k: r[k] for k in ("t", "kind", "error")} for r in records if not r.get("ok")][:10]
    result["model"] = entry["id"]
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
