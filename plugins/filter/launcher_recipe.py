# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read the community launcher's recipe files as the collection's recipe data."""

from __future__ import annotations

DOCUMENTATION = r"""
name: launcher_recipe
short_description: A spark-vllm-docker recipe file as the collection's recipe data
version_added: 0.2.0
description:
  - Takes a recipe of the community launcher (C(recipe_version "1"), parsed from YAML) and returns the
    collection's recipe data, so C(recipe_name) can name the launcher's own file.
  - The C(command)'s placeholders are filled from C(defaults) (merged with O(params)) as the launcher's
    C(run-recipe.py) fills them; the command is split as the shell splits it. C(model), the flags as
    C(args) (JSON flags as mappings, numbers as numbers, bare flags as C(true)), C(env) and C(mods) are kept.
  - C(vision) is true when the command sets C(--limit-mm-per-prompt) and not C(--language-model-only).
  - Flags the deployment decides (C(host), C(port), C(distributed-executor-backend), C(nnodes),
    C(node-rank), C(master-addr), C(master-port), C(headless)) go to C(launcher.deployment), not C(args).
  - An C(env) value that only names a variable of the launching shell (C($HF_TOKEN)) is a secret, listed
    in C(launcher.env_from_controller) and never copied into C(env).
  - Also provides C(dgxspark.vllm.is_launcher_recipe), true for a mapping with C(recipe_version).
options:
  _input:
    description: The recipe file, parsed.
    type: dict
    required: true
  source:
    description: Where the recipe came from, named in error messages.
    type: str
    default: the recipe
  params:
    description: Values merged over the recipe's C(defaults) before the command is filled in.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Serve the launcher's own recipe
  ansible.builtin.set_fact:
    recipe: "{{ lookup('ansible.builtin.file', path) | from_yaml | dgxspark.vllm.launcher_recipe(source=path) }}"
  vars:
    path: ~/spark-vllm-docker/recipes/minimax-m3-w4a16-gptq-b12x-nvfp4-eagle3.yaml
"""

RETURN = r"""
_value:
  description: >-
    C(name), C(description), C(model), C(vision), C(args), C(env), C(mods), C(draft_model) when the speculative config
    names one, and C(launcher) (C(source), C(container), C(build_args), C(cluster_only), C(deployment),
    C(env_from_controller)).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.vllm.plugins.module_utils._launcher import (
    LauncherError, is_launcher_recipe, recipe_from_launcher)


def launcher_recipe(doc, source="the recipe", params=None):
    try:
        return recipe_from_launcher(doc, source, params or {})
    except LauncherError as exc:
        raise AnsibleFilterError(f"launcher recipe: {exc}") from exc


class FilterModule:
    def filters(self):
        return {"launcher_recipe": launcher_recipe, "is_launcher_recipe": is_launcher_recipe}
