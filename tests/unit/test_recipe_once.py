"""The recipe role loads the recipe once per run and inputs: a second include with the same inputs reads nothing
again, and any changed input (overrides here) loads it again, back and forth."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

PLAY = """
- name: Include the recipe role as site.yml's roles do
  hosts: localhost
  gather_facts: false
  tasks:
    - name: First load
      ansible.builtin.include_role:
        name: dgxspark.vllm.recipe
    - name: Keep it
      ansible.builtin.set_fact:
        first: "{{ recipe_data }}"
    - name: Same inputs
      ansible.builtin.include_role:
        name: dgxspark.vllm.recipe
    - name: Other overrides
      ansible.builtin.include_role:
        name: dgxspark.vllm.recipe
      vars:
        recipe_overrides: {args: {max-model-len: 1234}}
    - name: The overrides are in
      ansible.builtin.assert:
        that: recipe_data.args['max-model-len'] == 1234
    - name: The first inputs again
      ansible.builtin.include_role:
        name: dgxspark.vllm.recipe
    - name: The first recipe is back
      ansible.builtin.assert:
        that: recipe_data == first
"""


def test_the_recipe_loads_once_per_run_and_inputs(tmp_path):
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    res = subprocess.run([str(pathlib.Path(sys.executable).with_name("ansible-playbook")), "-i", "localhost,",
                          "-c", "local", str(play)], cwd=ROOT, env=env, capture_output=True, text=True, check=False,
                         timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    # Three loads of four includes: the first, the changed overrides, the first inputs again.
    assert res.stdout.count("TASK [dgxspark.vllm.recipe : Recipe | find the recipe]") == 3, res.stdout
