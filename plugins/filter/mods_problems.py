# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: mods_problems
short_description: Problems in a list of mod definitions
version_added: 0.1.0
description:
  - Checks mod definitions (role C(dgxspark.vllm.mods)) with the rules of the patch engine and returns what
    is wrong with them; an empty list when they are valid.
options:
  _input:
    description: The mod definitions.
    type: list
    elements: dict
    required: true
author:
  - dgxspark.vllm contributors
"""

EXAMPLES = r"""
- name: Refuse bad mods before touching a node
  ansible.builtin.assert:
    that: mods_definitions | dgxspark.vllm.mods_problems | length == 0
"""

RETURN = r"""
_value:
  description: One message per problem, naming the mod and the fix.
  type: list
  elements: str
"""

from ansible_collections.dgxspark.vllm.plugins.module_utils._source_patch import validate


def mods_problems(mods):
    if not isinstance(mods, list):
        return ["the mods must be a list of dicts, got %s" % type(mods).__name__]
    problems, seen = [], set()
    for mod in mods:
        problems.extend(validate(mod))
        name = mod.get("name") if isinstance(mod, dict) else None
        if name in seen:
            problems.append("%s: two mods have this name; names must be unique (they become image labels)" % name)
        seen.add(name)
    return problems


class FilterModule(object):
    def filters(self):
        return {"mods_problems": mods_problems}
