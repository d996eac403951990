"""The filters over the flag check and the launcher's recipe format pass their options through: strict decides what is
fatal, params fill the recipe's placeholders (each survived a one-line mutation while only module_utils was tested)."""
from ansible_collections.dgxspark.vllm.plugins.filter.launcher_recipe import FilterModule as RecipeFilters
from ansible_collections.dgxspark.vllm.plugins.filter.vllm_flag_problems import FilterModule as FlagFilters

vllm_flag_problems = FlagFilters().filters()["vllm_flag_problems"]
launcher_recipe = RecipeFilters().filters()["launcher_recipe"]
FLAGSET = {"version": "0.32.0", "flags": ["max-model-len", "tensor-parallel-size"], "json_keys": {}}
RECIPE = {"recipe_version": "1", "name": "Demo", "model": "Org/Model", "defaults": {"port": 8000, "util": 0.93},
          "command": "vllm serve Org/Model --port {port} --gpu-memory-utilization {util}\n"}


def test_strict_makes_every_unknown_flag_fatal_and_lenient_only_typos():
    args = {"totally-new-flag": 1, "max-model-lenght": 2}
    strict = {p["message"].split(" ")[0]: p["fatal"] for p in vllm_flag_problems(args, FLAGSET, strict=True)}
    lenient = {p["message"].split(" ")[0]: p["fatal"] for p in vllm_flag_problems(args, FLAGSET, strict=False)}
    assert strict == {"--totally-new-flag": True, "--max-model-lenght": True}
    assert lenient == {"--totally-new-flag": False, "--max-model-lenght": True}


def test_the_build_pin_reaches_the_check():
    found = vllm_flag_problems({"max-model-len": 1}, FLAGSET, build={"vllm_ref": "979b56a66c96"})
    assert len(found) == 1 and not found[0]["fatal"] and "979b56a66c96" in found[0]["message"]


def test_params_fill_the_placeholders_over_the_defaults():
    assert launcher_recipe(RECIPE, "demo.yaml")["args"]["gpu-memory-utilization"] == 0.93
    data = launcher_recipe(RECIPE, "demo.yaml", params={"util": 0.9})
    assert data["args"]["gpu-memory-utilization"] == 0.9
