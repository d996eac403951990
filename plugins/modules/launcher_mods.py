#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: launcher_mods
short_description: Expand the community launcher's mods and mod groups into mod folders, in order
version_added: 0.2.0
description:
  - Reads a checkout of the community launcher (spark-vllm-docker) on the host and expands mod references
    the way its C(run-recipe.py) does. A reference is a mod folder (holding C(run.sh)) or a mod group (a
    folder with C(mod-group.yaml), or a YAML file, whose C(mods) list holds further references), relative
    to the checkout's root; groups expand depth-first, in order.
  - Returns each mod folder with a SHA-256 digest of its files, so a changed mod changes what depends on it.
  - Fails, naming the reference and the group that listed it, on a missing folder, a folder without
    C(run.sh), a group without a C(mods) list, or a group that includes itself.
  - Reads only; changes nothing.
options:
  root:
    description: The launcher checkout's root folder on the host.
    type: path
    required: true
  mods:
    description: Mod references, e.g. C(mods/minimax-m3-gptq-b12x-eagle3).
    type: list
    elements: str
    required: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes.read_only
  - dgxspark.vllm.attributes
author:
  - dgxspark.vllm contributors (@dgxspark)
"""

EXAMPLES = r"""
- name: The mods of the M3 recipe, from the launcher checkout on the head
  dgxspark.vllm.launcher_mods:
    root: /home/spark/spark-vllm-docker
    mods: [mods/minimax-m3-gptq-b12x-eagle3]
  register: launcher
"""

RETURN = r"""
mods:
  description: The mod folders in the order they apply.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The folder's name (the mod's name, as the launcher names it).
      type: str
      sample: fix-minimax-m3-b12x-dense
    ref:
      description: The reference as written in the recipe or group.
      type: str
    path:
      description: The folder's absolute path on the host.
      type: str
    via:
      description: The groups it came through, outermost first, relative to the root.
      type: list
      elements: str
    digest:
      description: SHA-256 of the folder's file names and contents.
      type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.vllm.plugins.module_utils._launcher import (
    LauncherError, expand_mods, folder_digest)

try:
    import yaml
except ImportError:  # the nodes need only Python 3
    yaml = None


def _mods_list(text):
    """The top-level ``mods:`` list of a group file, for hosts without PyYAML."""
    items, inside = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not line[0].isspace() and not stripped.startswith("-"):
            inside = stripped.split("#")[0].strip() == "mods:"
            continue
        if inside and stripped.startswith("- "):
            items.append(stripped[2:].split(" #")[0].strip().strip("'\""))
    return {"mods": items} if items or any(l.strip() == "mods:" for l in text.splitlines()) else {}


def load_group(path):
    with open(path) as handle:
        text = handle.read()
    if yaml is None:
        return _mods_list(text)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise LauncherError(f"mod group {path} is not valid YAML: {exc}") from exc


def main():
    module = AnsibleModule(
        argument_spec=dict(root=dict(type="path", required=True), mods=dict(type="list", elements="str", required=True)),
        supports_check_mode=True,
    )
    root = module.params["root"]
    if not os.path.isdir(root):
        module.fail_json(msg=f"launcher checkout {root} is not a folder on this host: clone the launcher there, "
                             "or point the mods role's mods_launcher_dir at the checkout")
    try:
        mods = expand_mods(root, module.params["mods"], load_group)
    except (LauncherError, OSError) as exc:
        module.fail_json(msg=f"launcher mods under {root}: {exc}")
    for mod in mods:
        mod["digest"] = folder_digest(mod["path"])
    module.exit_json(changed=False, mods=mods)


if __name__ == "__main__":
    main()
