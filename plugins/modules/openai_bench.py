#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: openai_bench
short_description: Measure decode and prefill tokens/s of an OpenAI-compatible endpoint
version_added: 0.1.0
description:
  - Sends O(runs) streaming chat completions one after another (after O(warmup) unmeasured ones) and
    times the tokens as they arrive. Decode tokens/s is (generated tokens - 1) divided by the time
    between the first and the last token (tg32 when O(max_tokens=32)); prefill tokens/s is prompt
    tokens divided by the time to the first token. Reports every run and the medians.
  - Each run starts its prompt with its own number, so a prefix cache cannot make prefill look free.
  - Read-only towards the endpoint; it runs in check mode as well.
options:
  url:
    description: Base URL of the endpoint, without C(/v1).
    type: str
    required: true
  api_key:
    description: Bearer token for the endpoint, if it needs one.
    type: str
  model:
    description: Model name to request; the first model of C(/v1/models) when not given.
    type: str
  runs:
    description: Measured runs; the figures are their medians.
    type: int
    default: 5
  warmup:
    description: Unmeasured runs first (the first request after a start pays for compilation).
    type: int
    default: 1
  max_tokens:
    description: Tokens generated per run.
    type: int
    default: 32
  prompt:
    description: The prompt text; about a thousand tokens gives a meaningful prefill figure.
    type: str
    required: true
  ignore_eos:
    description: Ask the server to generate exactly O(max_tokens) tokens (a vLLM extension).
    type: bool
    default: true
  timeout:
    description: Seconds to wait for one request.
    type: int
    default: 600
  expected:
    description:
      - Figures to compare the medians with, e.g. the recipe's C(expected) (C(decode_tok_s), C(prefill_tok_s)).
      - The module itself never fails on them; RV(comparison) says which clear O(min_ratio).
    type: dict
    default: {}
  min_ratio:
    description: Lowest acceptable measured/expected ratio for RV(comparison).
    type: float
    default: 0.8
  duration:
    description:
      - Seconds after which no further run starts (the one under way finishes); C(0) runs them all.
      - For a load of known length, e.g. while the GPUs are sampled.
    type: float
    default: 0
  time_scale:
    description:
      - How many times slower than the wall clock the endpoint's clock runs. Only a simulated pair whose
        engine paces itself by a model, slowed so the host's real compute stays below the model, sets
        it; times are divided and rates multiplied by it before they are reported and compared.
    type: float
    default: 1.0
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes
attributes:
  check_mode:
    details: The module only reads from the endpoint, so it measures in check mode too.
author:
  - dgxspark.vllm contributors (@dgxspark)
"""

EXAMPLES = r"""
- name: Measure tg32 and prefill on the head's endpoint
  dgxspark.vllm.openai_bench:
    url: http://127.0.0.1:8000
    runs: 5
    prompt: "{{ 'Describe the history of computing in detail. ' * 120 }}"
  register: bench
"""

RETURN = r"""
model:
  description: The model that answered.
  returned: always
  type: str
  sample: minimax-m3
owned_by:
  description: The C(owned_by) field of that model in C(/v1/models).
  returned: always
  type: str
  sample: vllm
runs:
  description: Figures of each measured run.
  returned: always
  type: list
  elements: dict
  sample:
    - {prompt_tokens: 1012, completion_tokens: 32, chunks: 12, ttft_s: 1.01, decode_s: 0.85, decode_tok_s: 36.4, prefill_tok_s: 1002.0}
median:
  description: Medians over the runs of decode_tok_s, prefill_tok_s, ttft_s, completion_tokens, prompt_tokens.
  returned: always
  type: dict
  sample: {decode_tok_s: 36.3, prefill_tok_s: 1001.5, ttft_s: 1.01, completion_tokens: 32, prompt_tokens: 1012}
comparison:
  description: Per expected figure, the median measured, the expected value, their ratio and whether it clears O(min_ratio).
  returned: always
  type: dict
  sample: {decode_tok_s: {measured: 20.1, expected: 36.3, ratio: 0.554, ok: false}}
server_version:
  description: What C(/version) reports (vLLM's version), or C(unknown).
  returned: always
  type: str
  sample: 0.33.0
"""

import time
import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.vllm.plugins.module_utils import _bench


def main():
    module = AnsibleModule(
        argument_spec=dict(
            _bench.ENDPOINT_SPEC,
            runs=dict(type="int", default=5),
            warmup=dict(type="int", default=1),
            max_tokens=dict(type="int", default=32, no_log=False),
            prompt=dict(type="str", required=True),
            ignore_eos=dict(type="bool", default=True),
            timeout=dict(type="int", default=600),
            expected=dict(type="dict", default={}),
            min_ratio=dict(type="float", default=0.8),
            duration=dict(type="float", default=0.0),
            time_scale=dict(type="float", default=1.0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["runs"] < 1 or p["warmup"] < 0 or p["max_tokens"] < 2 or p["duration"] < 0 or p["time_scale"] <= 0:
        module.fail_json(msg="runs must be >= 1, warmup >= 0, max_tokens >= 2 (decode speed needs two tokens), "
                             "duration >= 0 and time_scale > 0; got runs=%(runs)s warmup=%(warmup)s "
                             "max_tokens=%(max_tokens)s duration=%(duration)s time_scale=%(time_scale)s" % p)
    client = _bench.Client(p["url"], p["api_key"], p["timeout"])
    try:
        entry = client.pick_model(p["model"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    model = entry["id"]

    runs = []
    started = time.monotonic()
    try:
        for index in range(p["warmup"] + p["runs"]):
            if p["duration"] and index and time.monotonic() - started >= p["duration"]:
                break
            prompt = f"Run {index}. {p['prompt']}"
            figures = _bench.rescale(client.run(model, prompt, p["max_tokens"], p["ignore_eos"]), p["time_scale"])
            if index >= p["warmup"]:
                runs.append(figures)
    except Exception as exc:  # pylint: disable=broad-except
        body = ""
        if hasattr(exc, "read"):  # an HTTP error: the server's own reason
            try:
                body = ": " + exc.read().decode("utf-8", "replace")[:500]
            except Exception:  # pylint: disable=broad-except
                body = ""
        module.fail_json(msg=f"benchmark request {len(runs) + 1} to {p['url']} failed: {exc}{body}",
                         runs=runs, exception=traceback.format_exc())
    median = _bench.summarize(runs)
    module.exit_json(changed=False, model=model, owned_by=str(entry.get("owned_by", "")),
                     server_version=client.version(), runs=runs, median=median,
                     comparison=_bench.compare(median, p["expected"], p["min_ratio"]))


if __name__ == "__main__":
    main()
