#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: source_patch
short_description: Replace an exact block in a Python source file, idempotently
version_added: 0.1.0
description:
  - Replaces one exact block of text in a Python source file with a new block, then byte-compiles the
    file and restores it when that fails.
  - The target is a file path or a Python module name, resolved without importing it.
  - The result is one of C(applied), C(already_applied) (the new block is there), C(not_needed) (the
    upstream code no longer has the problem, told by O(not_needed)) or C(target_missing) (no such file
    or module, or the old block is gone and nothing says the fix is upstream); C(failed) when the old
    block is ambiguous or the patched file would not compile.
  - Only with O(strict=true) is anything but C(applied), C(already_applied) or C(not_needed) a failure;
    otherwise the module warns and reports the result.
  - The same patch engine runs inside container images as a plain script (role M(dgxspark.vllm.mods)
    uses it that way), so it needs nothing but the Python standard library.
options:
  name:
    description: A name for the patch, used in messages.
    type: str
    default: source_patch
  path:
    description: The file to patch. Mutually exclusive with O(module).
    type: path
  module:
    description:
      - The Python module to patch, e.g. C(prometheus_fastapi_instrumentator.routing); its source file is
        found on the module path of O(python) without importing it. Mutually exclusive with O(path).
    type: str
  python:
    description:
      - Interpreter whose packages hold O(module) and the distribution of O(not_needed), e.g. a
        virtualenv's C(bin/python3). Defaults to the Python that runs this module.
    type: path
  old:
    description: The exact block to replace. It must occur exactly once.
    type: str
    required: true
  new:
    description: The replacement. Its presence means the patch is already applied.
    type: str
    required: true
  not_needed:
    description: How to tell that the upstream code no longer has the problem.
    type: dict
    suboptions:
      marker:
        description: Text whose presence in the target means the fix is upstream.
        type: str
      distribution:
        description: The installed distribution whose version is checked, e.g. C(prometheus-fastapi-instrumentator).
        type: str
      version:
        description:
          - Version condition, clauses like C(>=8.0.0) joined by commas. When the old block is gone and the
            installed O(not_needed.distribution) matches it, the result is C(not_needed).
        type: str
  strict:
    description: Fail on any result but C(applied), C(already_applied) and C(not_needed).
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes
attributes:
  diff_mode:
    support: full
  idempotent:
    description: A second run with the same arguments changes nothing.
author:
  - dgxspark.vllm contributors (@dgxspark)
"""

EXAMPLES = r"""
- name: Fix the route lookup of prometheus-fastapi-instrumentator 7.x in the serving venv
  dgxspark.vllm.source_patch:
    name: fix_prometheus_fastapi_routing
    module: prometheus_fastapi_instrumentator.routing
    python: /opt/venv/bin/python3
    old: |
      route_name = route.path
    new: |
      route_name = getattr(route, "path", None)
    not_needed:
      distribution: prometheus-fastapi-instrumentator
      version: ">=8.0.0"

- name: Patch a file by path and fail if the block is gone
  dgxspark.vllm.source_patch:
    path: /opt/app/settings.py
    old: "TIMEOUT = 10\n"
    new: "TIMEOUT = 60\n"
    not_needed:
      marker: "TIMEOUT = int(os.environ"
    strict: true
"""

RETURN = r"""
result:
  description: What happened; one of applied, already_applied, not_needed, target_missing, failed.
  returned: always
  type: str
  sample: applied
target:
  description: The file patched or looked at; null when a module could not be found.
  returned: always
  type: str
  sample: /usr/lib/python3/dist-packages/prometheus_fastapi_instrumentator/routing.py
version:
  description: Installed version of O(not_needed.distribution), when that is set and installed.
  returned: always
  type: str
  sample: 7.1.0
message:
  description: Why the result is what it is.
  returned: always
  type: str
  sample: patched /opt/venv/lib/python3.11/site-packages/prometheus_fastapi_instrumentator/routing.py
"""

import inspect
import json
import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.vllm.plugins.module_utils import _source_patch as engine


def _run_elsewhere(module, mod):
    """Run the engine under another interpreter (the one that owns the packages)."""
    # The engine may sit in AnsiballZ's zip: hand the other Python its source as a file.
    tmpdir = tempfile.mkdtemp(prefix="source_patch.")
    try:
        script = os.path.join(tmpdir, "_source_patch.py")
        with open(script, "w") as handle:
            handle.write(inspect.getsource(engine))
        spec = os.path.join(tmpdir, "mods.json")
        with open(spec, "w") as handle:
            json.dump({"mods": [mod]}, handle)
        argv = [module.params["python"], script, spec] + (["--check"] if module.check_mode else [])
        rc, out, err = module.run_command(argv)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    if rc != 0:
        module.fail_json(msg="running the patch engine with %s failed (rc %d): %s" % (module.params["python"], rc, err.strip()))
    return json.loads(out)["results"][0]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", default="source_patch"),
            path=dict(type="path"),
            module=dict(type="str"),
            python=dict(type="path"),
            old=dict(type="str", required=True),
            new=dict(type="str", required=True),
            not_needed=dict(type="dict", options=dict(
                marker=dict(type="str"),
                distribution=dict(type="str"),
                version=dict(type="str"),
            )),
            strict=dict(type="bool", default=False),
        ),
        mutually_exclusive=[("path", "module")],
        required_one_of=[("path", "module")],
        supports_check_mode=True,
    )
    p = module.params
    mod = {"name": p["name"], "old": p["old"], "new": p["new"], "strict": p["strict"]}
    mod["module" if p["module"] else "path"] = p["module"] or p["path"]
    if p["not_needed"]:
        mod["not_needed"] = dict((k, v) for k, v in p["not_needed"].items() if v is not None)
    problems = engine.validate(mod)
    if problems:
        module.fail_json(msg="; ".join(problems))

    if p["python"]:
        res = _run_elsewhere(module, mod)
    else:
        res = engine.patch(mod, check=module.check_mode, strict=p["strict"])

    out = dict(changed=res["changed"], result=res["result"], target=res["target"], version=res["version"],
               message=res["message"])
    if module._diff and res["changed"]:
        out["diff"] = dict(before_header=res["target"], after_header=res["target"], prepared=res["diff"])
    if not res["ok"]:
        module.fail_json(msg="%s: %s (%s)" % (p["name"], res["message"], res["result"]), **out)
    if res["result"] not in engine.OK_RESULTS:
        module.warn("%s: %s (%s)" % (p["name"], res["message"], res["result"]))
    module.exit_json(**out)


if __name__ == "__main__":
    main()
