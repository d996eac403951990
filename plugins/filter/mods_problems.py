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

# dgxspark.vllm.mods_sequence (documented in the mods role's README): the launcher's mods in
# order, each replaced in place by a definition naming it in `replaces`, then the other definitions.

from ansible.errors import AnsibleFilterError
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


def mods_sequence(definitions, launcher=None, mount="/run/dgxspark-mods/launcher"):
    """The mods in the order they apply: the launcher's, each replaced in place by a definition
    that names it in ``replaces``, then the definitions that replace nothing present.

    launcher: what dgxspark.vllm.launcher_mods returned (name, path, digest, via, ref); each
    becomes a launcher mod run from ``<mount>/<name>`` (where the role stages its folder).
    """
    by_replaced = dict((d["replaces"], d) for d in definitions if isinstance(d, dict) and d.get("replaces"))
    out, used, names = [], set(), set()
    for mod in launcher or []:
        name = mod["name"]
        if name in names:
            raise AnsibleFilterError("launcher mod %s is listed twice (%s); list it once" % (name, mod.get("ref")))
        names.add(name)
        if name in by_replaced:
            out.append(by_replaced[name])
            used.add(name)
        else:
            out.append({"name": name, "launcher": "%s/%s" % (mount, name), "strict": True,
                        "digest": mod.get("digest"), "via": mod.get("via", []), "ref": mod.get("ref")})
    out.extend(d for d in definitions if not (isinstance(d, dict) and d.get("replaces") in used))
    clash = sorted(set(d["name"] for d in definitions if isinstance(d, dict)) & (names - used))
    if clash:
        raise AnsibleFilterError("mods %s have the name of a launcher mod without replacing it; rename them or set "
                                 "replaces: NAME" % ", ".join(clash))
    return out


class FilterModule(object):
    def filters(self):
        return {"mods_problems": mods_problems, "mods_sequence": mods_sequence}
