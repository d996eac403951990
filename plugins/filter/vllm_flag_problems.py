# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Check rendered vLLM flags against the flag set of a vLLM."""

from __future__ import annotations

DOCUMENTATION = r"""
name: vllm_flag_problems
short_description: The vLLM flags (and JSON flag keys) a vLLM does not know
version_added: 0.2.0
description:
  - Checks a mapping of C(vllm serve) flags (as the serve role renders them, flag name without dashes ->
    value) against a flag set read from vLLM's own argument parser (module M(dgxspark.vllm.vllm_flags),
    or a list shipped with the collection), including the keys of the JSON flags vLLM validates
    (C(speculative-config), C(compilation-config), C(attention-config)).
  - Checks each value too where the flag set says what vLLM refuses (C(values), C(json_values)), namely a value
    the parser cannot convert (to a whole number or a number), one outside its choices, and one outside the
    bounds the config class declares.
  - Returns one entry per problem with its C(message) (the flag, where it came from, the closest real
    flag or choice for a typo) and C(fatal).
options:
  _input:
    description: Flag name -> value; C(false) and C(null) are not rendered and not checked.
    type: dict
    required: true
  flagset:
    description: >-
      C(version), C(flags) (names without dashes), C(json_keys) (flag -> field names), optional C(values), C(json_values)
      and C(image_id), as M(dgxspark.vllm.vllm_flags) returns them.
    type: dict
    required: true
  strict:
    description: >-
      Every unknown flag, key or choice is fatal (the image's own flag set); otherwise only typos are, the rest warn.
      A value of the wrong type or out of bounds is fatal either way.
    type: bool
    default: true
  overrides:
    description: The flags the user set (C(recipe_overrides.args)), to say where a bad flag came from.
    type: dict
    default: {}
  recipe:
    description: Name of the recipe the other flags came from.
    type: str
    default: the recipe
  build:
    description:
      - The build the recipe pins (the recipe's C(build)), C(vllm_ref) (a vLLM commit) and C(vllm_patches).
      - With O(strict) (the image's own flag set), a vLLM whose version names another commit, or none, is a warning
        (C(fatal) false) naming both.
    type: dict
    default: {}
    version_added: 0.2.0
"""

EXAMPLES = r"""
- name: Refuse a misspelled flag before the unit changes
  ansible.builtin.assert:
    that: problems | selectattr('fatal') | list | length == 0
    fail_msg: "{{ problems | map(attribute='message') | join(' ') }}"
  vars:
    problems: "{{ {'max-model-lenght': 4096} | dgxspark.vllm.vllm_flag_problems(flagset) }}"
"""

RETURN = r"""
_value:
  description: One entry per unknown flag or key, with C(message) and C(fatal).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.vllm.plugins.module_utils._vllm_flags import problems


def vllm_flag_problems(args, flagset, strict=True, overrides=None, recipe="the recipe", build=None):
    if not isinstance(args, dict) or not isinstance(flagset, dict):
        raise AnsibleFilterError("vllm_flag_problems expects a mapping of flags and a flag set mapping")
    return problems(args, flagset, strict=bool(strict), overrides=overrides or {}, recipe=recipe, build=build or {})


class FilterModule:
    def filters(self):
        return {"vllm_flag_problems": vllm_flag_problems}
