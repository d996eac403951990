"""The roles in another fleet: other group names, addresses in `ib_address`, no spark_* names anywhere."""

import os
import pathlib
import subprocess

import testinfra
import yaml

INVENTORY = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
SCENARIO = pathlib.Path(__file__).resolve().parents[1]
GROUPS = yaml.safe_load((SCENARIO / "inventory" / "hosts.yml").read_text())["all"]["children"]["gpu_nodes"]["children"]
HEAD = next(iter(GROUPS["gpu_head"]["hosts"]))
WORKER, WORKER_VARS = next(iter(GROUPS["gpu_workers"]["hosts"].items()))
KNOWN_HOSTS = "/home/spark/.ssh/dgxspark_known_hosts"


def node(name):
    return testinfra.get_host(f"ansible://{name}", ansible_inventory=INVENTORY)


def names(data):
    """Every key of a nested YAML document (group, host and variable names)."""
    if isinstance(data, dict):
        for k, v in data.items():
            yield str(k)
            yield from names(v)


def test_the_inventory_has_no_spark_names():
    docs = [yaml.safe_load(p.read_text()) for p in sorted((SCENARIO / "inventory").rglob("*.yml"))]
    spark = sorted({n for d in docs for n in names(d) if n.startswith("spark")})
    assert not spark, spark
    assert not list((SCENARIO / "inventory").glob("group_vars/spark*"))


def test_the_head_knows_the_worker_under_its_ib_address_and_logs_in_there():
    entries = node(HEAD).file(KNOWN_HOSTS).content_string.split("\n")
    assert any(line.startswith(WORKER_VARS["ib_address"] + " ") for line in entries), entries
    out = node(HEAD).run(f"ssh -i ~/.ssh/dgxspark_node_trust_ed25519 -o UserKnownHostsFile={KNOWN_HOSTS} "
                         f"-o StrictHostKeyChecking=yes -o BatchMode=yes spark@{WORKER_VARS['ib_address']} hostname")
    assert out.rc == 0, out.stderr


def test_the_worker_holds_the_heads_triton_cache():
    listing = "cd ~/.triton/cache && sudo find . -type f -print0 | sort -z | xargs -0 sudo sha256sum"
    head = node(HEAD).check_output(listing)
    assert head.count("\n") > 10
    assert node(WORKER).check_output(listing) == head


def test_the_models_are_on_the_worker_and_marked_complete():
    out = node(WORKER).check_output("ls -d ~/.cache/huggingface/hub/models--*/.dgxspark-complete.json* 2>/dev/null || true")
    assert out.count("models--") >= 1, out


def validate_alone(tmp_path, *extra):
    """validate in a playbook of its own (nothing else loaded the recipe first)."""
    play = tmp_path / "validate.yml"
    play.write_text("- name: Validate alone\n  hosts: gpu_head\n  gather_facts: false\n"
                    "  roles:\n    - role: dgxspark.vllm.validate\n")
    project = SCENARIO.parents[1]
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(project / ".collections"), ANSIBLE_NOCOLOR="1")
    res = subprocess.run(["ansible-playbook", "-i", INVENTORY, str(play), *extra], cwd=project, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:]
    return res.stdout


def test_validate_alone_sends_pictures_only_for_a_vision_recipe(tmp_path):
    # The recipe decides: validate loads it itself, so alone it still knows the text recipe sees no pictures.
    assert "picture.yml" not in validate_alone(tmp_path, "-e", "recipe_name=minimax-m3-text")
    assert "picture.yml" in validate_alone(tmp_path, "-e", "recipe_name=minimax-m3-vision")
