"""The memory plan against the pair's measurements (roles/recipe/files/recipes)."""
import pathlib

import pytest
import yaml

from ansible_collections.dgxspark.vllm.plugins.module_utils._memory_plan import (
    MemoryPlanError, for_backend, plan, plan_recipe, video_enabled)

RECIPES = pathlib.Path(__file__).resolve().parents[4] / "roles" / "recipe" / "files" / "recipes"


def recipe(name, **args):
    data = yaml.safe_load((RECIPES / f"{name}.yml").read_text())
    data["args"].update(args)
    return data


@pytest.mark.parametrize("name", ["minimax-m3-text", "minimax-m3-vision"])
def test_every_published_point_is_reproduced_within_the_error(name):
    data = recipe(name)
    memory = data["memory"]
    assert memory["points"], "a recipe's constants name the measurements they were fitted to"
    for point in memory["points"]:
        result = plan_recipe(data, point["gpu_memory_utilization"])
        tokens_per_gib = 1024 ** 3 / memory["kv_bytes_per_token"][data["args"]["kv-cache-dtype"]]
        assert result["kv_pool_tokens_low"] <= point["kv_tokens"] <= result["kv_pool_tokens_high"], point
        assert abs(result["kv_pool_tokens"] - point["kv_tokens"]) <= memory["error_gib"] * tokens_per_gib, point
        if "kv_cache_gib" in point:
            assert abs(result["kv_cache_gib"] - point["kv_cache_gib"]) <= memory["error_gib"], point


def test_vision_recipe_fits_its_context():
    # Seed: util 0.92, vision on, video 0 -> a ~106k-token pool for max_model_len 98304.
    result = plan_recipe(recipe("minimax-m3-vision"))
    assert result["verdict"] == "fits"
    assert result["vision_tower_gib"] > 0 and result["video_profile_gib"] == 0


def test_text_recipe_at_196k_is_within_the_error_not_refused():
    # The recipe's own comment gives ~170k tokens at util 0.93, and it serves 196608: warn, never fail.
    result = plan_recipe(recipe("minimax-m3-text"))
    assert result["vision_tower_gib"] == 0
    assert result["kv_pool_tokens"] < 196608 <= result["kv_pool_tokens_high"]
    assert result["verdict"] == "uncertain"


def test_util_090_is_refused_like_vllm_refused_it():
    # Recipe comment: at util 0.90 only 0.62 GiB of KV were left, est. max length 25,728.
    result = plan_recipe(recipe("minimax-m3-text", **{"gpu-memory-utilization": 0.90}))
    assert result["verdict"] == "impossible"
    assert result["kv_pool_tokens_high"] < 196608


def test_video_budget_left_on_leaves_no_kv_memory():
    # Seed: without video 0, KV init failed with "No available memory for the cache blocks".
    result = plan_recipe(recipe("minimax-m3-vision", **{"limit-mm-per-prompt": {"image": 4}}))
    assert result["video_profile_gib"] > 0
    assert result["kv_cache_gib"] + result["error_gib"] < 0
    assert result["kv_pool_tokens"] == 0 and result["kv_pool_tokens_high"] == 0
    assert result["verdict"] == "impossible"


def test_short_context_fits_at_the_low_end():
    result = plan_recipe(recipe("minimax-m3-text", **{"max-model-len": 65536}))
    assert result["verdict"] == "fits"


def test_language_model_only_drops_the_vision_tower():
    with_tower = plan_recipe(recipe("minimax-m3-vision"))
    without = plan_recipe(recipe("minimax-m3-vision", **{"language-model-only": True}))
    assert without["vision_tower_gib"] == 0
    assert without["kv_pool_tokens"] > with_tower["kv_pool_tokens"]


def test_pool_grows_with_util_and_shrinks_with_wider_kv():
    memory = recipe("minimax-m3-text")["memory"]
    low = plan(memory, 0.90, "nvfp4", False, False, 128)["kv_pool_tokens"]
    high = plan(memory, 0.95, "nvfp4", False, False, 128)["kv_pool_tokens"]
    fp8 = plan(memory, 0.95, "fp8", False, False, 128)["kv_pool_tokens"]
    assert low < high
    assert fp8 < high


def test_pool_is_whole_blocks():
    memory = recipe("minimax-m3-text")["memory"]
    for util in (0.91, 0.93, 0.97):
        assert plan(memory, util, "nvfp4", False, False, 128)["kv_pool_tokens"] % 128 == 0


def test_hand_computed_plan():
    memory = {"node_total_gib": 100, "weights_gib": 50, "overhead_gib": 10, "vision_tower_gib": 4,
              "video_profile_gib": 6, "kv_bytes_per_token": {"fp8": 1024 * 1024}}
    # 0.9 * 100 - 50 - 10 - 4 = 26 GiB at 1 MiB per token = 26624 tokens = 1664 blocks of 16.
    result = plan(memory, 0.9, "fp8", True, False, 16)
    assert result["kv_cache_gib"] == pytest.approx(26)
    assert result["kv_pool_tokens"] == 26624


@pytest.mark.parametrize("limits,enabled", [
    (None, True), ({}, True), ({"image": 4}, True), ({"image": 4, "video": 0}, False), ({"video": 2}, True)])
def test_video_enabled(limits, enabled):
    assert video_enabled(limits) is enabled


@pytest.mark.parametrize("util", [0, -0.1, 1.01, "0.9", True])
def test_util_out_of_range(util):
    with pytest.raises(MemoryPlanError, match="gpu_memory_utilization"):
        plan(recipe("minimax-m3-text")["memory"], util, "nvfp4", False, False)


def test_unknown_kv_dtype_names_the_known_ones():
    with pytest.raises(MemoryPlanError, match="fp4_e2m1.*known: .*nvfp4"):
        plan(recipe("minimax-m3-text")["memory"], 0.9, "fp4_e2m1", False, False)


def test_missing_constants():
    with pytest.raises(MemoryPlanError, match="lacks weights_gib"):
        plan({"node_total_gib": 121.69, "overhead_gib": 1, "vision_tower_gib": 4, "video_profile_gib": 6,
              "kv_bytes_per_token": {"nvfp4": 1}}, 0.9, "nvfp4", False, False)
    with pytest.raises(MemoryPlanError, match="no 'memory' mapping"):
        plan_recipe({"args": {}})


def test_the_error_bounds_are_the_pools_at_the_kv_cache_minus_and_plus_the_error():
    # 1 MiB a token and blocks of one token: the pools read in MiB. A bound computed from half the error (a mutation
    # that survived the tests of the published points) moves them by 512 tokens.
    memory = {"node_total_gib": 100, "weights_gib": 40, "overhead_gib": 5, "vision_tower_gib": 0, "video_profile_gib": 0,
              "kv_bytes_per_token": {"auto": 1024 ** 2}, "error_gib": 1}
    result = plan(memory, 0.5, "auto", False, False, block_size=1)
    assert result["kv_cache_gib"] == 5
    assert (result["kv_pool_tokens_low"], result["kv_pool_tokens"], result["kv_pool_tokens_high"]) == (4096, 5120, 6144)


def as_served(name, backend, **args):
    data = for_backend(recipe(name), backend)
    data["args"] = dict(data["args"], **args)
    return data


def test_the_published_point_passes_the_start_up_check_without_ray():
    # The field report's headless pair ran util 0.93 in the launcher's mode (mp): its check passed.
    result = plan_recipe(as_served("minimax-m3-text", "mp"), backend="mp")
    assert result["startup"] == "passes" and result["budget_gib"] == 113.172
    assert 0 < result["startup_margin_gib"] < 0.5 and result["ray_gib"] == 0


def test_under_ray_the_published_util_is_refused_and_the_shipped_ray_args_pass():
    published = plan_recipe(as_served("minimax-m3-text", "ray", **{"gpu-memory-utilization": 0.93}), backend="ray")
    assert published["startup"] == "refused" and published["startup_util_max"] < 0.93
    assert published["startup_free_gib"] == round(113.37 - recipe("minimax-m3-text")["memory"]["ray_gib"], 3)
    shipped = as_served("minimax-m3-text", "ray")
    assert shipped["args"]["gpu-memory-utilization"] < 0.93 and shipped["args"]["max-model-len"] < 196608
    result = plan_recipe(shipped, backend="ray")
    assert result["startup"] == "passes" and result["verdict"] in ("fits", "uncertain")
    # mp keeps the published args.
    assert as_served("minimax-m3-text", "mp")["args"]["gpu-memory-utilization"] == 0.93


def test_the_vision_recipe_passes_under_either_backend():
    for backend in ("ray", "mp"):
        result = plan_recipe(as_served("minimax-m3-vision", backend), backend=backend)
        assert result["startup"] == "passes" and result["verdict"] == "fits", (backend, result)


def test_the_start_up_check_needs_its_constants_and_a_known_backend():
    memory = recipe("minimax-m3-text")["memory"]
    assert "startup" not in plan(memory, 0.93, "nvfp4", False, False, 128)
    with pytest.raises(MemoryPlanError, match="ray or mp"):
        plan(memory, 0.93, "nvfp4", False, False, 128, backend="tcp")
    with pytest.raises(MemoryPlanError, match="no ray_gib"):
        plan({k: v for k, v in memory.items() if k != "ray_gib"}, 0.93, "nvfp4", False, False, 128, backend="ray")
    without = {k: v for k, v in memory.items() if k != "startup_free_gib"}
    assert "startup" not in plan(without, 0.93, "nvfp4", False, False, 128, backend="ray")


def test_a_backends_changes_merge_over_the_recipe_and_a_bad_one_is_named():
    data = {"args": {"a": 1, "b": {"x": 1, "y": 2}}, "backends": {"ray": {"args": {"b": {"y": 3}}}}}
    assert for_backend(data, "ray")["args"] == {"a": 1, "b": {"x": 1, "y": 3}}
    assert for_backend(data, "mp") == data and data["args"]["b"]["y"] == 2
    with pytest.raises(MemoryPlanError, match="backends.ray must be a mapping"):
        for_backend({"args": {}, "backends": {"ray": [1]}}, "ray")
