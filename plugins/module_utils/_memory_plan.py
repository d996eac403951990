# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""KV-cache memory plan for one node of a tensor-parallel vLLM deployment.

vLLM gives the KV cache what is left of ``gpu_memory_utilization x total``
after the weights, the vision tower, the multimodal profiling budget and the
runtime overheads; the pool is a whole number of blocks. All sizes are per
node (one GPU per node), so the constants in a recipe are per-node shares.

The constants are fitted to published measurements (the recipe's ``points``),
which are rounded and not quite consistent: ``error_gib`` is how far the plan
may be off. ``verdict`` says ``fits`` (even at the low end), ``uncertain``
(within the error) or ``impossible`` (out of reach even at the high end).

Before any of that, each rank's start-up check wants ``util x total`` free on
its device, and on a GB10 everything else resident on the node counts as used
(unified memory). With ``startup_free_gib`` (free memory at engine start on a
headless node in the launcher's published mode, mp) and ``ray_gib`` (what Ray
holds on a node besides that), ``startup`` says ``passes`` or ``refused`` for
the executor backend.
"""

from __future__ import annotations

GIB = 1024 ** 3

MEMORY_KEYS = ("node_total_gib", "weights_gib", "overhead_gib", "vision_tower_gib",
               "video_profile_gib", "kv_bytes_per_token")


class MemoryPlanError(ValueError):
    """The recipe lacks what the plan needs, or holds a value it cannot use."""


def _number(memory, key):
    value = memory.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise MemoryPlanError(f"recipe memory.{key} must be a number >= 0, got {value!r}")
    return float(value)


def video_enabled(limit_mm_per_prompt):
    """vLLM profiles a video budget unless the video limit is set to 0."""
    if not limit_mm_per_prompt:
        return True
    return int(limit_mm_per_prompt.get("video", 1)) > 0


def _pool(kv_gib, bytes_per_token, block_size):
    """Tokens in a pool of kv_gib: whole blocks only."""
    return int(kv_gib * GIB // (bytes_per_token * block_size)) * block_size if kv_gib > 0 else 0


def verdict(result, max_model_len):
    """fits, uncertain or impossible: can one request of max_model_len tokens get its KV cache?"""
    if result["kv_pool_tokens_low"] >= max_model_len:
        return "fits"
    if result["kv_pool_tokens_high"] >= max_model_len and result["kv_cache_gib"] + result["error_gib"] > 0:
        return "uncertain"
    return "impossible"


def startup(memory, budget, backend):
    """vLLM's start-up check on one node: free memory at engine start against util x total (GiB), or {}
    when the recipe has no ``startup_free_gib``. Under Ray, Ray's own share comes off the free memory."""
    if "startup_free_gib" not in memory:
        return {}
    if backend not in ("ray", "mp"):
        raise MemoryPlanError(f"executor backend must be ray or mp, got {backend!r}")
    if backend == "ray" and "ray_gib" not in memory:
        raise MemoryPlanError("recipe memory has startup_free_gib but no ray_gib (what Ray holds on a node)")
    ray = _number(memory, "ray_gib") if backend == "ray" else 0.0
    free = _number(memory, "startup_free_gib") - ray
    total = _number(memory, "node_total_gib")
    return {
        "backend": backend,
        "ray_gib": round(ray, 3),
        "startup_free_gib": round(free, 3),
        "startup_margin_gib": round(free - budget, 3),
        # The highest util the check lets through here, on vLLM's 0.001 steps of the flag.
        "startup_util_max": int(free / total * 1000) / 1000 if total else 0.0,
        "startup": "passes" if free >= budget else "refused",
    }


def plan(memory, gpu_memory_utilization, kv_cache_dtype, vision, video, block_size=16, backend=None):
    """Return the memory plan of one node as a dict (sizes in GiB, pool in tokens).

    memory: the recipe's ``memory`` mapping (see MEMORY_KEYS).
    vision: the vision tower is loaded; video: the profiler keeps a video budget.
    backend: ray or mp, for the start-up check (None: no check).
    """
    if not isinstance(memory, dict):
        raise MemoryPlanError("the recipe has no 'memory' mapping with the planner constants")
    missing = [k for k in MEMORY_KEYS if k not in memory]
    if missing:
        raise MemoryPlanError(f"recipe memory lacks {', '.join(missing)}")
    util = gpu_memory_utilization
    if isinstance(util, bool) or not isinstance(util, (int, float)) or not 0 < util <= 1:
        raise MemoryPlanError(f"gpu_memory_utilization must be in (0, 1], got {util!r}")
    per_token = memory["kv_bytes_per_token"]
    if not isinstance(per_token, dict) or kv_cache_dtype not in per_token:
        known = ", ".join(sorted(per_token)) if isinstance(per_token, dict) else "none"
        raise MemoryPlanError(f"no KV size for kv_cache_dtype {kv_cache_dtype!r} in the recipe (known: {known})")
    bytes_per_token = per_token[kv_cache_dtype]
    if isinstance(bytes_per_token, bool) or not isinstance(bytes_per_token, int) or bytes_per_token <= 0:
        raise MemoryPlanError(f"recipe memory.kv_bytes_per_token.{kv_cache_dtype} must be an integer > 0")
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size <= 0:
        raise MemoryPlanError(f"block_size must be an integer > 0, got {block_size!r}")

    total = _number(memory, "node_total_gib")
    budget = util * total
    used = {
        "weights_gib": _number(memory, "weights_gib"),
        "overhead_gib": _number(memory, "overhead_gib"),
        "vision_tower_gib": _number(memory, "vision_tower_gib") if vision else 0.0,
        "video_profile_gib": _number(memory, "video_profile_gib") if vision and video else 0.0,
    }
    error = _number(memory, "error_gib") if "error_gib" in memory else 0.0
    kv_gib = budget - sum(used.values())
    blocks = _pool(kv_gib, bytes_per_token, block_size) // block_size
    result = {
        "node_total_gib": round(total, 3),
        "budget_gib": round(budget, 3),
        "kv_cache_gib": round(kv_gib, 3),
        "kv_bytes_per_token": bytes_per_token,
        "block_size": block_size,
        "kv_pool_tokens": blocks * block_size,
        "error_gib": round(error, 3),
        "kv_pool_tokens_low": _pool(kv_gib - error, bytes_per_token, block_size),
        "kv_pool_tokens_high": _pool(kv_gib + error, bytes_per_token, block_size),
    }
    result.update({k: round(v, 3) for k, v in used.items()})
    if backend is not None:
        result.update(startup(memory, budget, backend))
    return result


def for_backend(recipe, backend):
    """The recipe as served on this executor backend: its ``backends.<backend>`` mapping (what that backend
    changes, e.g. the args Ray's memory needs) merged over it, recursively."""
    changes = (recipe.get("backends") or {}).get(backend) or {}
    if not isinstance(changes, dict):
        raise MemoryPlanError(f"recipe backends.{backend} must be a mapping, got {changes!r}")
    return _merged(recipe, changes)


def _merged(base, changes):
    out = dict(base)
    for key, value in changes.items():
        out[key] = _merged(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


def plan_recipe(recipe, gpu_memory_utilization=None, backend=None):
    """The plan for a recipe as the serve role loads it (``recipe_data``), with its verdict."""
    if not isinstance(recipe, dict) or not isinstance(recipe.get("args"), dict):
        raise MemoryPlanError("expected the recipe data (recipe_data) with an 'args' mapping")
    args = recipe["args"]
    vision = bool(recipe.get("vision")) and not args.get("language-model-only", False)
    result = plan(
        recipe.get("memory"),
        args.get("gpu-memory-utilization", 0.9) if gpu_memory_utilization is None else gpu_memory_utilization,
        args.get("kv-cache-dtype", "auto"),
        vision,
        video_enabled(args.get("limit-mm-per-prompt")),
        args.get("block-size", 16),
        backend,
    )
    max_len = args.get("max-model-len")
    if isinstance(max_len, int) and not isinstance(max_len, bool) and max_len > 0:
        result["max_model_len"] = max_len
        result["verdict"] = verdict(result, max_len)
    return result
