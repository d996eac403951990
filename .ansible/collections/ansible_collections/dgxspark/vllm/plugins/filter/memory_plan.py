# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters over the KV-cache memory plan of a recipe."""

from __future__ import annotations

DOCUMENTATION = r"""
name: memory_plan
short_description: The per-node memory plan of a serving recipe
description:
  - Estimates how much memory vLLM leaves for the KV cache on each node and how many tokens that pool holds,
    from the recipe's C(memory) constants, C(gpu-memory-utilization), C(kv-cache-dtype), C(block-size),
    whether the vision tower is loaded and whether the multimodal profiler keeps a video budget.
  - Also provides C(dgxspark.vllm.kv_pool_tokens), which returns only the pool size in tokens.
options:
  _input:
    description: The recipe as the serve role loads it (C(serve_recipe_data)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Fail early when the context does not fit
  ansible.builtin.assert:
    that: (serve_recipe_data | dgxspark.vllm.kv_pool_tokens) >= serve_recipe_data.args['max-model-len']

- name: Show the plan
  ansible.builtin.debug:
    msg: "{{ serve_recipe_data | dgxspark.vllm.memory_plan }}"
"""

RETURN = r"""
_value:
  description: Sizes in GiB per node (budget, weights, overhead, vision tower, video budget, KV cache) and C(kv_pool_tokens).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.vllm.plugins.module_utils._memory_plan import MemoryPlanError, plan_recipe


def memory_plan(recipe):
    try:
        return plan_recipe(recipe)
    except MemoryPlanError as exc:
        raise AnsibleFilterError(f"memory plan: {exc}") from exc


def kv_pool_tokens(recipe):
    return memory_plan(recipe)["kv_pool_tokens"]


class FilterModule:
    def filters(self):
        return {"memory_plan": memory_plan, "kv_pool_tokens": kv_pool_tokens}
