"""The vllm serve command line is rendered from recipe data and survives systemd's quoting."""
import json
import pathlib
import shlex

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.vllm.plugins.filter.systemd_join import systemd_join, systemd_quote
from ansible_collections.dgxspark.vllm.plugins.filter.vllm_args import vllm_args

RECIPES = pathlib.Path(__file__).resolve().parents[4] / "roles" / "recipe" / "files" / "recipes"


def test_scalars_bools_and_order():
    assert vllm_args({"tensor-parallel-size": 2, "trust-remote-code": True, "enforce-eager": False,
                      "quantization": None, "gpu-memory-utilization": 0.92}) == [
        "--tensor-parallel-size", "2", "--trust-remote-code", "--gpu-memory-utilization", "0.92"]


def test_json_values_are_compact_sorted_json():
    words = vllm_args({"limit-mm-per-prompt": {"video": 0, "image": 4}})
    assert words == ["--limit-mm-per-prompt", '{"image":4,"video":0}']
    assert json.loads(words[1]) == {"image": 4, "video": 0}


@pytest.mark.parametrize("bad", [{"--tp": 2}, {"tp size": 1}, {3: 1}])
def test_rejects_names_that_are_not_flags(bad):
    with pytest.raises(AnsibleFilterError, match="not a flag name"):
        vllm_args(bad)


def test_rejects_non_mapping():
    with pytest.raises(AnsibleFilterError, match="mapping"):
        vllm_args(["--tp", "2"])


def _systemd_split(line):
    # systemd's double-quote rules match POSIX shell for \\ and \"; % and $ come doubled.
    return [w.replace("%%", "%").replace("$$", "$") for w in shlex.split(line)]


@pytest.mark.parametrize("word", ["plain", "0.92", '{"image":4,"video":0}', "a b", "50%", "$HOME",
                                  'back\\slash "q"', "it's", ""])
def test_systemd_quote_round_trip(word):
    assert _systemd_split(systemd_quote(word)) == [word]


def test_plain_words_stay_unquoted():
    assert systemd_quote("--max-model-len") == "--max-model-len"
    assert systemd_quote("Sebesky/MiniMax-M3-W4A16-GPTQ") == "Sebesky/MiniMax-M3-W4A16-GPTQ"
    assert systemd_quote("$X").startswith('"')


@pytest.mark.parametrize("recipe", sorted(RECIPES.glob("*.yml")), ids=lambda p: p.stem)
def test_every_recipe_renders_and_round_trips(recipe):
    data = yaml.safe_load(recipe.read_text())
    argv = ["vllm", "serve", data["model"]] + vllm_args(data["args"])
    assert _systemd_split(systemd_join(argv)) == argv
    for flag, value in data["args"].items():
        if isinstance(value, dict):
            assert json.loads(argv[argv.index("--" + flag) + 1]) == value
        elif value is True:
            assert "--" + flag in argv


def test_vision_recipe_has_the_seed_settings():
    data = yaml.safe_load((RECIPES / "minimax-m3-vision.yml").read_text())
    argv = vllm_args(data["args"])
    assert "--language-model-only" not in argv
    assert argv[argv.index("--limit-mm-per-prompt") + 1] == '{"image":4,"video":0}'
    assert argv[argv.index("--max-model-len") + 1] == "98304"
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec["method"] == "eagle3" and spec["num_speculative_tokens"] == 3


def test_systemd_join_rejects_a_string():
    with pytest.raises(AnsibleFilterError):
        systemd_join("vllm serve")


def test_served_model_names_are_one_word_each_and_other_lists_stay_json():
    argv = vllm_args({"served-model-name": ["minimax-m3", "Sebesky/MiniMax-M3-W4A16-GPTQ"], "allowed-origins": ["*"],
                      "port": 8000})
    assert argv == ["--served-model-name", "minimax-m3", "Sebesky/MiniMax-M3-W4A16-GPTQ",
                    "--allowed-origins", '["*"]', "--port", "8000"]
