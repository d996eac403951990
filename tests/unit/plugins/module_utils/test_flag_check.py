"""The flag check: typos named with the closest real flag, where they came from; JSON keys; strict or not."""
import json
import pathlib

from ansible_collections.dgxspark.vllm.plugins.module_utils import _vllm_flags

ROOT = pathlib.Path(__file__).resolve().parents[4]
SHIPPED = json.loads((ROOT / "roles/serve/files/vllm-flags-0.32.0.json").read_text())
FLAGSET = {"version": "0.32.0", "image_id": "sha256:" + "ab" * 32,
           "flags": ["max-model-len", "tensor-parallel-size", "speculative-config", "enable-auto-tool-choice"],
           "json_keys": {"speculative-config": ["method", "model", "num_speculative_tokens"]}}


def test_a_typo_is_named_with_the_closest_flag_and_its_source():
    found = _vllm_flags.problems({"max-model-lenght": 4096, "tensor-parallel-size": 2}, FLAGSET,
                                 overrides={"max-model-lenght": 4096}, recipe="recipe minimax-m3-text")
    assert len(found) == 1 and found[0]["fatal"]
    msg = found[0]["message"]
    assert "--max-model-lenght" in msg and "Did you mean --max-model-len?" in msg
    assert "recipe_overrides (args)" in msg and "sha256:abababababab" in msg


def test_underscores_and_unrendered_flags_are_not_problems():
    assert _vllm_flags.problems({"max_model_len": 1, "no-such-flag": False, "other-missing": None}, FLAGSET) == []


def test_json_keys_are_checked_where_vllm_checks_them():
    found = _vllm_flags.problems({"speculative-config": {"method": "eagle3", "num_speculative_token": 3}}, FLAGSET,
                                 recipe="recipe x")
    assert len(found) == 1 and "key 'num_speculative_token'" in found[0]["message"]
    assert "Did you mean 'num_speculative_tokens'?" in found[0]["message"] and "recipe x" in found[0]["message"]


def test_json_given_as_text_is_parsed_as_vllm_would_and_its_keys_checked():
    bad = _vllm_flags.problems({"speculative-config": '{"method": "eagle3", num_speculative_tokens: 3}'}, FLAGSET,
                               overrides={"speculative-config": ""})
    assert len(bad) == 1 and bad[0]["fatal"], bad
    assert "--speculative-config (from recipe_overrides (args)" in bad[0]["message"]
    assert "takes JSON, and" in bad[0]["message"] and "does not parse: Expecting property name" in bad[0]["message"]
    typo = _vllm_flags.problems({"speculative-config": '{"method": "eagle3", "num_speculative_token": 3}'}, FLAGSET)
    assert len(typo) == 1 and "key 'num_speculative_token'" in typo[0]["message"]
    assert _vllm_flags.problems({"speculative-config": '{"method": "eagle3"}'}, FLAGSET) == []


def test_the_shipped_list_refuses_typos_and_only_warns_about_unknown_flags():
    shipped = {k: v for k, v in FLAGSET.items() if k != "image_id"}
    found = _vllm_flags.problems({"max-model-lenght": 1, "some-flag-of-a-newer-vllm": 1}, shipped, strict=False)
    fatal = {f["message"].split()[0]: f["fatal"] for f in found}
    assert fatal == {"--max-model-lenght": True, "--some-flag-of-a-newer-vllm": False}
    assert all("shipped with the collection (the image is not on the head yet)" in f["message"] for f in found)


def test_the_shipped_list_knows_every_flag_of_both_recipes_and_what_the_role_adds():
    import yaml
    for name in ("text", "vision"):
        recipe = yaml.safe_load((ROOT / f"roles/recipe/files/recipes/minimax-m3-{name}.yml").read_text())
        args = dict(recipe["args"], **{"served-model-name": "m", "host": "0.0.0.0", "port": 8000,
                                       "distributed-executor-backend": "mp", "nnodes": 2, "node-rank": 1,
                                       "master-addr": "10.0.0.1", "master-port": 29500, "headless": True})
        assert _vllm_flags.problems(args, SHIPPED) == [], name


def test_parse_dump_takes_the_marked_line():
    out = "some warning\n" + _vllm_flags.MARK + json.dumps({"version": "1", "flags": ["a"], "json_keys": {}}) + "\n"
    assert _vllm_flags.parse_dump(out)["flags"] == ["a"]
    assert _vllm_flags.parse_dump("Traceback ...") is None


BUILD = {"vllm_ref": "979b56a66c969ab67655d2155ab4c6c5bed15f65", "vllm_patches": ["minimax-m3-fused-fp8-kv.patch"]}


def test_the_build_the_recipe_pins_is_found_in_the_images_version():
    # setuptools-scm's version of a patched checkout: the commit's short hash, then the date of the dirty tree.
    assert _vllm_flags.build_problem("0.1.dev21830+g979b56a66.d20260702", BUILD) is None
    assert _vllm_flags.build_problem("0.32.0", {}) is None


def test_another_build_or_a_release_warns_naming_both():
    other = _vllm_flags.build_problem("0.1.dev21830+g8244d1c44", BUILD, "recipe minimax-m3-text")
    assert "built from commit 8244d1c44" in other and "979b56a66c96" in other and "minimax-m3-fused-fp8-kv.patch" in other
    assert "recipe minimax-m3-text" in other
    release = _vllm_flags.build_problem("0.32.0", BUILD)
    assert "no commit in its version" in release and "979b56a66c96" in release


def test_the_build_warning_joins_the_flag_problems_only_against_the_images_own_flag_set():
    found = _vllm_flags.problems({"max-model-len": 1}, dict(FLAGSET, version="0.32.0"), strict=True, build=BUILD)
    assert [p["fatal"] for p in found] == [False] and "979b56a66c96" in found[0]["message"]
    # The shipped list's version is not the image's: nothing to compare.
    assert _vllm_flags.problems({"max-model-len": 1}, FLAGSET, strict=False, build=BUILD) == []


VALUES = dict(FLAGSET, flags=FLAGSET["flags"] + ["max-num-seqs", "gpu-memory-utilization", "kv-cache-dtype"],
              values={"max-num-seqs": {"type": "int", "config": "SchedulerConfig", "ge": 1},
                      "gpu-memory-utilization": {"type": "float", "config": "CacheConfig", "gt": 0, "le": 1},
                      "max-model-len": {"config": "ModelConfig", "ge": -1},
                      "kv-cache-dtype": {"choices": ["auto", "bfloat16", "fp8", "fp8_e4m3"]}},
              json_values={"speculative-config": {"num_speculative_tokens": {"config": "SpeculativeConfig", "gt": 0}}})


def only(found):
    assert len(found) == 1, found
    return found[0]


def test_a_value_the_parser_cannot_convert_is_refused_with_what_it_takes():
    bad = only(_vllm_flags.problems({"max-num-seqs": "two"}, VALUES, overrides={"max-num-seqs": "two"}))
    assert bad["fatal"] and bad["message"].startswith("--max-num-seqs (from recipe_overrides (args)")
    assert "is 'two', and vLLM 0.32.0 in image sha256:abababababab takes a whole number there." in bad["message"]
    assert "takes a whole number" in only(_vllm_flags.problems({"max-num-seqs": 1.5}, VALUES))["message"]
    assert "takes a number" in only(_vllm_flags.problems({"gpu-memory-utilization": "most"}, VALUES))["message"]
    assert _vllm_flags.problems({"max-num-seqs": "4", "gpu-memory-utilization": "0.9", "max-model-len": "128k"}, VALUES) == []


def test_a_value_outside_the_bounds_the_config_class_declares_is_refused_with_them():
    for args, declared in (({"gpu-memory-utilization": 1.5}, "> 0 and <= 1 for it (CacheConfig)"),
                           ({"gpu-memory-utilization": 0}, "> 0 and <= 1 for it (CacheConfig)"),
                           ({"max-num-seqs": 0}, ">= 1 for it (SchedulerConfig)")):
        bad = only(_vllm_flags.problems(args, VALUES, recipe="recipe x"))
        assert bad["fatal"] and "(from recipe x)" in bad["message"] and declared in bad["message"], bad
    for edge in ({"gpu-memory-utilization": 1}, {"max-num-seqs": 1}, {"max-model-len": -1}):
        assert _vllm_flags.problems(edge, VALUES) == [], edge


def test_a_choice_is_checked_and_a_close_one_named():
    bad = only(_vllm_flags.problems({"kv-cache-dtype": "fp8_e4m2"}, VALUES))
    assert bad["fatal"] and "takes one of auto, bfloat16, fp8, fp8_e4m3. Did you mean 'fp8_e4m3'?" in bad["message"]
    assert _vllm_flags.problems({"kv-cache-dtype": "fp8"}, VALUES) == []


def test_json_keys_have_their_bounds_checked_too():
    bad = only(_vllm_flags.problems({"speculative-config": {"method": "eagle3", "num_speculative_tokens": 0}}, VALUES))
    assert bad["fatal"] and "--speculative-config key 'num_speculative_tokens'" in bad["message"]
    assert "is 0, and vLLM 0.32.0 in image sha256:abababababab declares > 0 for it (SpeculativeConfig)" in bad["message"]
    assert _vllm_flags.problems({"speculative-config": '{"method": "eagle3", "num_speculative_tokens": 3}'}, VALUES) == []


def test_against_the_shipped_list_types_and_bounds_are_fatal_and_only_a_close_choice_is():
    shipped = {k: v for k, v in VALUES.items() if k != "image_id"}
    found = _vllm_flags.problems({"max-num-seqs": "two", "gpu-memory-utilization": 2, "kv-cache-dtype": "fp8_e4m2"}, shipped,
                                 strict=False)
    assert [f["fatal"] for f in found] == [True, True, True], found
    assert all("vLLM 0.32.0 (the list shipped with the collection)" in f["message"] for f in found)
    newer = only(_vllm_flags.problems({"kv-cache-dtype": "nvfp4_e2m1"}, shipped, strict=False))
    assert not newer["fatal"] and "takes one of" in newer["message"]
    assert only(_vllm_flags.problems({"kv-cache-dtype": "nvfp4_e2m1"}, VALUES))["fatal"]
