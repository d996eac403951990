#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mods_results
short_description: Judge the results of image mods - warn, fail strict ones, summarize
version_added: 0.1.0
description:
  - Takes the results of a list of mods, either as the patch engine of M(dgxspark.vllm.source_patch) printed
    them (role C(dgxspark.vllm.mods) runs it inside a container) or as recorded in the labels of a derived
    image, and turns them into Ansible outcomes.
  - A result other than C(applied), C(already_applied) or C(not_needed) is a warning, or a failure when the
    mod is strict (its own C(strict), else O(strict)).
  - Changes nothing on the host.
options:
  definitions:
    description: The mod definitions (only C(name), C(strict) and C(launcher) are read; a launcher mod is strict unless it says otherwise).
    type: list
    elements: dict
    required: true
  strict:
    description: Strictness of the mods that do not set their own.
    type: bool
    default: false
  results:
    description: Result dicts as the engine prints them (keys C(name), C(result), C(message)).
    type: list
    elements: dict
  labels:
    description: Labels of a derived image; the result of mod C(NAME) is label C(<label_prefix>NAME).
    type: dict
  label_prefix:
    description: Prefix of the result labels.
    type: str
    default: dgxspark.mods.
  image:
    description: The image the mods were applied to, named in messages.
    type: str
    default: the image
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes
attributes:
  idempotent:
    description: A second run with the same arguments changes nothing.
author:
  - dgxspark.vllm contributors (@dgxspark)
"""

EXAMPLES = r"""
- name: Warn about mods that found no target, fail on strict ones
  dgxspark.vllm.mods_results:
    definitions: "{{ mods_definitions }}"
    results: "{{ (engine_run.stdout | from_json).results }}"
    image: localhost/vllm-node:mods-0123abcd4567

- name: Judge what a derived image recorded
  dgxspark.vllm.mods_results:
    definitions: "{{ mods_definitions }}"
    labels: "{{ (image_inspect.stdout | from_json)[0].Config.Labels }}"
"""

RETURN = r"""
summary:
  description: Each mod's result by name (C(unknown) when a label is missing).
  returned: always
  type: dict
  sample: {fix_prometheus_fastapi_routing: applied}
labels:
  description: The result labels to record in the image.
  returned: always
  type: dict
  sample: {dgxspark.mods.fix_prometheus_fastapi_routing: applied}
problems:
  description: One line per mod whose result is not applied, already_applied or not_needed.
  returned: always
  type: list
  elements: str
  sample: ["my_mod: target_missing - module foo.bar is not installed for /usr/bin/python3"]
"""

from ansible.module_utils.basic import AnsibleModule

OK_RESULTS = ("applied", "already_applied", "not_needed")


def judge(definitions, strict, results=None, labels=None, prefix="dgxspark.mods."):
    """(summary, problems, fatal): fatal lists the problems of strict mods."""
    if results is not None:
        by_name = dict((r.get("name"), r) for r in results)
    else:
        by_name = dict((d["name"], {"result": (labels or {}).get(prefix + d["name"], "unknown"),
                                    "message": "recorded in the image label %s%s" % (prefix, d["name"])})
                       for d in definitions)
    summary, problems, fatal = {}, [], []
    for definition in definitions:
        name = definition["name"]
        res = by_name.get(name, {"result": "unknown", "message": "no result reported"})
        summary[name] = res.get("result")
        if summary[name] in OK_RESULTS:
            continue
        line = "%s: %s - %s" % (name, summary[name], res.get("message", ""))
        problems.append(line)
        if definition.get("strict", True if definition.get("launcher") else strict):
            fatal.append(line)
    return summary, problems, fatal


def main():
    module = AnsibleModule(
        argument_spec=dict(
            definitions=dict(type="list", elements="dict", required=True),
            strict=dict(type="bool", default=False),
            results=dict(type="list", elements="dict"),
            labels=dict(type="dict"),
            label_prefix=dict(type="str", default="dgxspark.mods."),
            image=dict(type="str", default="the image"),
        ),
        required_one_of=[("results", "labels")],
        mutually_exclusive=[("results", "labels")],
        supports_check_mode=True,
    )
    p = module.params
    summary, problems, fatal = judge(p["definitions"], p["strict"], p["results"], p["labels"], p["label_prefix"])
    labels = dict((p["label_prefix"] + name, result) for name, result in summary.items())
    if fatal:
        launcher = [d["name"] for d in p["definitions"] if d.get("launcher") and summary.get(d["name"]) not in OK_RESULTS]
        hint = ("Fix the mod definitions (target, old block, not_needed) or set strict: false to only warn."
                if not launcher else
                "A failed launcher mod (%s) aborts the launch, as launch-cluster.sh aborts it: fix the mod in the "
                "launcher checkout, or stand in for it with a mod of your own (mods_extra_definitions with "
                "replaces: NAME)." % ", ".join(launcher))
        module.fail_json(msg="strict mods failed on %s: %s. %s" % (p["image"], "; ".join(fatal), hint),
                         summary=summary, labels=labels, problems=problems)
    for line in problems:
        module.warn("mod on %s: %s" % (p["image"], line))
    module.exit_json(changed=False, summary=summary, labels=labels, problems=problems)


if __name__ == "__main__":
    main()
