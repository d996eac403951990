#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: model_cache
short_description: Inspect or seal a model in a Hugging Face hub cache
version_added: 0.1.0
description:
  - Works on one model folder (C(models--ORG--NAME)) of a hub cache, the layout huggingface_hub writes
    and vLLM reads with C(HF_HUB_OFFLINE=1).
  - C(state=inspect) says whether the model is complete (a marker written after a verified download or
    copy is present and every file it lists still has its size), how many bytes it uses, and how many
    bytes are free on its filesystem. It changes nothing.
  - C(state=sealed) hashes every file the server reads (C(refs/), C(snapshots/)), compares with
    O(expected) when given (the manifest of the copy's source) and writes the marker
    C(.dgxspark-complete.json). A mismatch fails and names the files. A model already sealed with the
    same manifest is left alone.
options:
  cache_dir:
    description: The hub cache, usually C(HF_HOME/hub).
    type: path
    required: true
  model:
    description: Model id, C(ORG/NAME).
    type: str
    required: true
  state:
    description: Inspect only, or verify and write the completeness marker.
    type: str
    choices: [inspect, sealed]
    default: inspect
  expected:
    description:
      - Manifest the content must match (the RV(marker) of the same model on the copy's source).
      - Only with C(state=sealed).
    type: dict
  hash_workers:
    description: Files hashed in parallel.
    type: int
    default: 8
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes
attributes:
  check_mode:
    details: With C(state=sealed) it reports whether the marker would be written, without hashing.
author:
  - dgxspark.vllm contributors (@dgxspark)
"""

EXAMPLES = r"""
- name: Is the checkpoint complete on this node?
  dgxspark.vllm.model_cache:
    cache_dir: /home/spark/.cache/huggingface/hub
    model: Sebesky/MiniMax-M3-W4A16-GPTQ
  register: checkpoint

- name: Verify a copy against the head's manifest and mark it complete
  dgxspark.vllm.model_cache:
    cache_dir: /home/spark/.cache/huggingface/hub
    model: Sebesky/MiniMax-M3-W4A16-GPTQ
    state: sealed
    expected: "{{ hostvars[groups['spark_head'][0]]._models_head.results[0].marker }}"
"""

RETURN = r"""
path:
  description: The model's folder in the cache.
  returned: always
  type: str
  sample: /home/spark/.cache/huggingface/hub/models--Sebesky--MiniMax-M3-W4A16-GPTQ
exists:
  description: Whether that folder exists.
  returned: always
  type: bool
complete:
  description: Whether the model is complete (after this run, for C(state=sealed)).
  returned: always
  type: bool
stale:
  description: Files the marker lists that are now missing or have another size.
  returned: always
  type: list
  elements: str
marker:
  description: The completeness marker (model, revision, files with size and sha256, total_bytes), or null.
  returned: always
  type: dict
total_bytes:
  description: Bytes of the complete model according to the marker (0 when there is none).
  returned: always
  type: int
present_bytes:
  description: Bytes the folder uses now.
  returned: always
  type: int
free_bytes:
  description: Free bytes on the filesystem that holds (or will hold) the folder.
  returned: always
  type: int
differences:
  description: With O(expected), files missing, extra or different compared with it.
  returned: when state is sealed and expected is given
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.vllm.plugins.module_utils import _model_cache as mc


def state_of(path):
    marker = mc.read_marker(path)
    stale = mc.stale_files(path, marker) if marker else []
    return marker, stale, bool(marker) and not stale


def main():
    module = AnsibleModule(
        argument_spec=dict(
            cache_dir=dict(type="path", required=True),
            model=dict(type="str", required=True),
            state=dict(type="str", choices=["inspect", "sealed"], default="inspect"),
            expected=dict(type="dict"),
            hash_workers=dict(type="int", default=8),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        path = mc.model_dir(p["cache_dir"], p["model"])
    except ValueError as exc:
        module.fail_json(msg=f"{exc}; use the Hugging Face id, e.g. Sebesky/MiniMax-M3-W4A16-GPTQ")
    exists = os.path.isdir(path)
    marker, stale, complete = state_of(path) if exists else (None, [], False)
    result = dict(changed=False, path=path, exists=exists)

    if p["state"] == "sealed":
        if not exists or not mc.content_files(path):
            module.fail_json(msg=f"nothing to seal: {path} holds no snapshot; download or copy {p['model']} first", **result)
        want = p["expected"]
        if complete and (want is None or want.get("files") == marker.get("files")):
            pass
        elif module.check_mode:
            result["changed"] = True
        else:
            current = mc.manifest(path, p["model"], p["hash_workers"])
            if want is not None:
                diff = mc.differences(current, want)
                result["differences"] = diff
                if any(diff.values()):
                    module.fail_json(msg=f"{p['model']} in {path} does not match its source: "
                                         f"{len(diff['missing'])} missing, {len(diff['different'])} different, "
                                         f"{len(diff['extra'])} extra files (first: "
                                         f"{(diff['missing'] + diff['different'] + diff['extra'])[:5]}); copy it again",
                                     **result)
            if current != marker:
                mc.write_marker(path, current)
                result["changed"] = True
            marker, stale, complete = current, [], True

    result.update(
        complete=complete,
        stale=stale,
        marker=marker,
        total_bytes=(marker or {}).get("total_bytes", 0),
        present_bytes=mc.disk_usage(path) if exists else 0,
        free_bytes=mc.free_bytes(path),
    )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
