"""The launcher's recipe and mod formats (module_utils/_launcher.py)."""
import pathlib

import pytest
import yaml

from ansible_collections.dgxspark.vllm.plugins.module_utils._launcher import (
    LauncherError, expand_mods, folder_digest, parse_command, recipe_from_launcher, render_command)

RECIPES = pathlib.Path(__file__).resolve().parents[4] / "roles" / "recipe" / "files" / "recipes"

# A recipe of the launcher's shape (our own text): placeholders, doubled braces, line continuations,
# a short alias, a bare flag before another flag, a secret from the shell, deployment flags.
RECIPE = {
    "recipe_version": "1",
    "name": "Demo-TP2",
    "model": "Org/Model",
    "container": "vllm-node-demo",
    "mods": ["mods/demo-group"],
    "defaults": {"port": 8000, "host": "0.0.0.0", "tensor_parallel": 2, "util": 0.93, "drafter": "Org/Draft"},
    "env": {"OMP_NUM_THREADS": "20", "HF_TOKEN": "$HF_TOKEN", "OTHER": "${HOME}/x", "PLAIN": 1},
    "command": (
        "vllm serve Org/Model \\\n"
        "    --trust-remote-code \\\n"
        "    --port {port} --host {host} \\\n"
        "    --gpu-memory-utilization {util} \\\n"
        "    -tp {tensor_parallel} \\\n"
        "    --distributed-executor-backend mp \\\n"
        "    --compilation-config '{{\"mode\": 0, \"cudagraph_mode\": \"FULL_DECODE_ONLY\"}}' \\\n"
        "    --speculative-config '{{\"method\":\"eagle3\",\"model\":\"{drafter}\",\"num_speculative_tokens\":3}}' \\\n"
        "    --language-model-only \\\n"
        "    --enable-auto-tool-choice \\\n"
        "    --tool-call-parser minimax_m3\n"),
}


def test_recipe_becomes_recipe_data():
    data = recipe_from_launcher(RECIPE, "demo.yaml")
    assert data["model"] == "Org/Model" and data["name"] == "Demo-TP2"
    assert data["args"] == {
        "trust-remote-code": True, "gpu-memory-utilization": 0.93, "tensor-parallel-size": 2,
        "compilation-config": {"mode": 0, "cudagraph_mode": "FULL_DECODE_ONLY"},
        "speculative-config": {"method": "eagle3", "model": "Org/Draft", "num_speculative_tokens": 3},
        "language-model-only": True, "enable-auto-tool-choice": True, "tool-call-parser": "minimax_m3"}
    assert list(data["args"])[:3] == ["trust-remote-code", "gpu-memory-utilization", "tensor-parallel-size"]
    assert data["draft_model"] == "Org/Draft"
    assert data["launcher"]["deployment"] == {"port": 8000, "host": "0.0.0.0", "distributed-executor-backend": "mp"}
    assert data["mods"] == ["mods/demo-group"]
    assert data["vision"] is False  # --language-model-only


def test_the_build_a_launcher_recipe_pins_is_kept():
    pinned = dict(RECIPE, build_args=["--vllm-ref", "979b56a6", "--apply-vllm-patch", "a.patch", "--build-rust"])
    assert recipe_from_launcher(pinned, "demo.yaml")["build"] == {
        "vllm_ref": "979b56a6", "vllm_patches": ["a.patch"], "image": "vllm-node-demo"}
    assert "build" not in recipe_from_launcher(dict(RECIPE, build_args=["--build-rust"]), "demo.yaml")


def test_a_recipe_with_image_limits_is_a_vision_recipe():
    command = RECIPE["command"].replace("--language-model-only", "--limit-mm-per-prompt '{{\"image\": 4}}'")
    assert recipe_from_launcher(dict(RECIPE, command=command))["vision"] is True


def test_shell_references_are_secrets_never_copied():
    data = recipe_from_launcher(RECIPE)
    assert data["launcher"]["env_from_controller"] == ["HF_TOKEN"]
    assert "HF_TOKEN" not in data["env"]
    assert data["env"] == {"OMP_NUM_THREADS": "20", "OTHER": "${HOME}/x", "PLAIN": "1"}


def test_params_override_defaults_like_the_launchers_command_line():
    data = recipe_from_launcher(RECIPE, params={"util": 0.9})
    assert data["args"]["gpu-memory-utilization"] == 0.9


def test_a_parameter_the_recipe_does_not_take_is_refused_with_the_nearest_name():
    # The launcher would serve its own util without a word; here the typo is named before anything runs.
    with pytest.raises(LauncherError, match=r"demo.yaml takes no parameter utill; its parameters: drafter, host, port, "
                                            r"tensor_parallel, util \(utill: did you mean util\?\)"):
        recipe_from_launcher(RECIPE, "demo.yaml", params={"utill": 0.9})


def test_a_placeholder_the_defaults_lack_is_a_parameter_too():
    data = recipe_from_launcher(dict(RECIPE, command=RECIPE["command"].replace("{util}", "{mem}")),
                                params={"mem": 0.91})
    assert data["args"]["gpu-memory-utilization"] == 0.91


@pytest.mark.parametrize("change, message", [
    ({"recipe_version": "2"}, "recipe_version '2'"),
    ({"command": "python -m x"}, "must start with 'vllm serve'"),
    ({"command": "vllm serve M --port {nope}"}, "uses {nope}"),
    ({"command": "vllm serve --tp 2"}, "names no model"),
    ({"command": "vllm serve M --x '{{bad json}}'"}, "not valid JSON"),
    ({"command": "vllm serve M --flag value stray"}, "unexpected word 'stray'"),
    ({"model": "Other/Model"}, "differs from the command's"),
    ({"env": ["A=1"]}, "env must be mappings"),
])
def test_bad_recipes_are_named(change, message):
    with pytest.raises(LauncherError, match=message.replace("(", r"\(").replace("{", r"\{")):
        recipe_from_launcher(dict(RECIPE, **change), "demo.yaml")


def test_render_command_keeps_doubled_braces_literal():
    assert render_command("a {x} {{\"k\": 1}}", {"x": 2}) == 'a 2 {"k": 1}'


def test_negative_numbers_are_values_and_switches_stay_switches():
    model, args, _ = parse_command("vllm serve M --seed -1 --enforce-eager --max-model-len=4096")
    assert model == "M" and args == {"seed": -1, "enforce-eager": True, "max-model-len": 4096}


@pytest.mark.parametrize("name", ["minimax-m3-text", "minimax-m3-vision"])
def test_shipped_recipes_name_their_upstream_and_the_mod_group(name):
    data = yaml.safe_load((RECIPES / f"{name}.yml").read_text())
    assert data["upstream"]["commit"] and data["upstream"]["recipe"].startswith("recipes/")
    assert data["mods"] == ["mods/minimax-m3-gptq-b12x-eagle3"]
    # The launcher's build_args at that commit: --vllm-ref 979b56a6..., --apply-vllm-patch minimax-m3-fused-fp8-kv.patch.
    assert data["build"]["vllm_ref"] == "979b56a66c969ab67655d2155ab4c6c5bed15f65"
    assert data["build"]["vllm_patches"] == ["minimax-m3-fused-fp8-kv.patch"]
    for flag in ("enable-auto-tool-choice", "default-chat-template-kwargs", "load-format", "attention-backend"):
        assert flag in data["args"], flag
    for var in ("OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "VLLM_M3_FP8_KV_TEST_SCALE", "OMP_NUM_THREADS"):
        assert var in data["env"], var


def tree(tmp_path, files):
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def load(path):
    return yaml.safe_load(pathlib.Path(path).read_text())


def test_groups_expand_depth_first_in_order(tmp_path):
    root = tree(tmp_path, {
        "mods/a/run.sh": "a", "mods/b/run.sh": "b", "mods/c/run.sh": "c",
        "mods/inner/mod-group.yaml": "name: inner\nmods:\n  - mods/a\n  - mods/b\n",
        "mods/outer/mod-group.yaml": "name: outer\nmods:\n  - mods/inner\n  - mods/c\n",
    })
    mods = expand_mods(str(root), ["mods/outer"], load)
    assert [m["name"] for m in mods] == ["a", "b", "c"]
    assert mods[0]["via"] == ["mods/outer/mod-group.yaml", "mods/inner/mod-group.yaml"]
    assert mods[2]["via"] == ["mods/outer/mod-group.yaml"]


def test_missing_mod_names_the_group_that_listed_it(tmp_path):
    root = tree(tmp_path, {"mods/g/mod-group.yaml": "mods:\n  - mods/gone\n"})
    with pytest.raises(LauncherError, match=r"mods/gone: no folder .*listed in .*mods/g/mod-group.yaml"):
        expand_mods(str(root), ["mods/g"], load)


def test_folder_without_run_sh_and_cycles_are_refused(tmp_path):
    root = tree(tmp_path, {"mods/empty/README": "x", "mods/loop/mod-group.yaml": "mods:\n  - mods/loop\n",
                           "mods/nolist/mod-group.yaml": "name: x\n"})
    with pytest.raises(LauncherError, match="has no run.sh"):
        expand_mods(str(root), ["mods/empty"], load)
    with pytest.raises(LauncherError, match="includes itself"):
        expand_mods(str(root), ["mods/loop"], load)
    with pytest.raises(LauncherError, match="no top-level 'mods' list"):
        expand_mods(str(root), ["mods/nolist"], load)


def test_digest_follows_content_not_caches(tmp_path):
    root = tree(tmp_path, {"m/run.sh": "echo 1", "m/__pycache__/x.pyc": "junk"})
    first = folder_digest(str(root / "m"))
    (root / "m" / "__pycache__" / "x.pyc").write_text("other junk")
    assert folder_digest(str(root / "m")) == first
    (root / "m" / "run.sh").write_text("echo 2")
    assert folder_digest(str(root / "m")) != first
