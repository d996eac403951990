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
  - With O(backend), also vLLM's start-up check on each node, free memory at engine start against
    C(gpu-memory-utilization) x total. C(startup) is C(passes) or C(refused), and C(startup_util_max) the highest
    utilization it lets through. Under Ray, Ray's own share of the node (the recipe's C(memory.ray_gib)) comes off.
  - Also provides C(dgxspark.vllm.kv_pool_tokens), which returns only the pool size in tokens, and
    C(dgxspark.vllm.recipe_for_backend), the recipe as served on one executor backend (its C(backends.<backend>)
    mapping merged over it, as the serve role loads every recipe).
options:
  _input:
    description: The recipe as the serve role loads it (C(recipe_data)).
    type: dict
    required: true
  backend:
    description: The executor backend the engine runs on (C(serve_executor_backend)); omitted, no start-up check.
    type: str
    choices: [ray, mp]
"""

EXAMPLES = r"""
- name: Fail early when the context does not fit
  ansible.builtin.assert:
    that: (recipe_data | dgxspark.vllm.kv_pool_tokens) >= recipe_data.args['max-model-len']

- name: Show the plan, with the start-up check under Ray
  ansible.builtin.debug:
    msg: "{{ recipe_data | dgxspark.vllm.memory_plan(backend='ray') }}"
"""

RETURN = r"""
_value:
  description:
    - Sizes in GiB per node (budget, weights, overhead, vision tower, video budget, KV cache) and C(kv_pool_tokens).
    - With O(backend) and the recipe's C(startup_free_gib), also C(startup), C(startup_free_gib), C(startup_margin_gib),
      C(startup_util_max) and C(ray_gib).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.vllm.plugins.module_utils._memory_plan import MemoryPlanError, for_backend, plan_recipe


def memory_plan(recipe, backend=None):
    try:
        return plan_recipe(recipe, backend=backend)
    except MemoryPlanError as exc:
        raise AnsibleFilterError(f"memory plan: {exc}") from exc


def recipe_for_backend(recipe, backend):
    try:
        return for_backend(recipe, backend)
    except MemoryPlanError as exc:
        raise AnsibleFilterError(f"recipe: {exc}") from exc


def kv_pool_tokens(recipe):
    return memory_plan(recipe)["kv_pool_tokens"]


class FilterModule:
    def filters(self):
        return {"memory_plan": memory_plan, "kv_pool_tokens": kv_pool_tokens, "recipe_for_backend": recipe_for_backend}
