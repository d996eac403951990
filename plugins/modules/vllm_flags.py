#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_flags
short_description: Read the flags the vLLM in a container image accepts, once per image ID
version_added: 0.2.0
description:
  - Runs vLLM's own C(serve) argument parser in a throw-away container of the image (no network, no GPU)
    and returns its flags and the fields of the config classes whose JSON flags vLLM checks key by key
    (C(speculative-config), C(compilation-config), C(attention-config)).
  - For each flag (and each key of those JSON flags) it also returns what vLLM refuses of its value, read
    from the same vLLM, so a bad value is refused before anything changes rather than when the engine
    starts - the type the parser converts to (a whole number, a number), its choices, and the bounds
    (C(gt), C(ge), C(lt), C(le)) the config class declares on the field.
  - The flag set is a property of the image ID, so it is kept in O(cache_dir) under that ID and read from
    there the next time; only a new image costs a container start.
  - An image that is not on the node, or whose vLLM cannot be read (an image without vLLM), is not an
    error; RV(found) is false and RV(reason) says why, so the caller can check against a shipped list.
    An image that has no vLLM (or no python3) is that too by its ID, so that answer is kept in the cache
    as well; any other failure to read it (a timeout, a container that would not start) is tried again next time.
  - Changes nothing on the node but its own cache file, and never reports a change.
options:
  image:
    description: Image reference or ID (read when O(container) is not given or does not exist). One of the two is required.
    type: str
  container:
    description: A container whose image is to be read (the Ray container the engine runs in), tried first.
    type: str
  container_cli:
    description: The container CLI as a list of words, for example V([docker]), V([podman]) or V([sudo, docker]).
    type: list
    elements: str
    default: [docker]
  cache_dir:
    description: Where flag sets are kept, one file per image ID.
    type: path
    default: /var/cache/dgxspark-vllm/vllm-flags
  timeout:
    description: Seconds the parser may take in the container.
    type: int
    default: 300
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes
attributes:
  check_mode:
    details: Reads the image in check mode too (a throw-away container); the cache is not written.
  idempotent:
    description: It only reads; a second run reads the cache.
author:
  - dgxspark.vllm contributors (@dgxspark)
"""

EXAMPLES = r"""
- name: Read the flags of the vLLM in the serving image
  dgxspark.vllm.vllm_flags:
    image: vllm-node-minimax-m3-b12x:latest
  register: flags
  become: true

- name: Check a misspelled flag against them
  ansible.builtin.assert:
    that: "{{ {'max-model-len': 4096} | dgxspark.vllm.vllm_flag_problems(flags.flagset) | length == 0 }}"
  when: flags.found
"""

RETURN = r"""
found:
  description: Whether the flag set could be read (from the cache or the image).
  returned: always
  type: bool
image_id:
  description: The image ID the flag set belongs to (empty when the image is not on the node).
  returned: always
  type: str
source:
  description: >-
    Where the image ID was read, C(container) (the image O(container) runs) or C(image) (O(image)); empty when
    neither is on the node. A caller that checked a running container's flags knows the check holds while that
    container runs.
  returned: always
  type: str
  sample: container
cached:
  description: Whether the flag set came from O(cache_dir).
  returned: always
  type: bool
flagset:
  description: >-
    C(version), C(flags) (names without dashes), C(json_keys), C(values) (flag -> C(type), C(choices), bounds and the
    C(config) class that declares them), C(json_values) (JSON flag -> key -> the same), C(format), C(image_id).
  returned: when found
  type: dict
  sample: {version: 0.32.0, flags: [max-model-len, max-num-seqs], json_keys: {speculative-config: [method, model]},
           values: {max-num-seqs: {type: int, config: SchedulerConfig, ge: 1}}, json_values: {}, format: 2}
reason:
  description: Why the flag set could not be read.
  returned: when not found
  type: str
nccl:
  description:
    - The NCCL the image's engine would load (C(version), C(file), C(so_path_env)), read alone when the image's vLLM
      could not be read (when found, it is in RV(flagset)); nulls where none was found.
  returned: when not found and an image was read
  type: dict
  sample: {version: 2.28.9, file: /usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2, so_path_env: null}
"""

import json
import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.vllm.plugins.module_utils import _vllm_flags


# The image itself has no vLLM to read (a property of its ID, kept in the cache like a flag set).
NO_VLLM = re.compile(r"No module named '?vllm'?|python3: (?:not found|No such file)|executable file .?python3.? not found|"
                     r"\"python3\": executable file not found")


def image_id(module, cli, image, container):
    """(ID, source, None) of the container's image when that container exists, else of the image; or (None, '', reason)."""
    reasons = []
    for source, name, argv in (("container", container, cli + ["inspect", "--format", "{{.Image}}", container]),
                               ("image", image, cli + ["image", "inspect", "--format", "{{.Id}}", image])):
        if not name:
            continue
        rc, out, err = module.run_command(argv)
        if rc == 0 and out.strip():
            ident = out.strip().splitlines()[0]
            return (ident if ident.startswith("sha256:") else "sha256:" + ident), source, None
        reasons.append("%s %s is not on this node (%s)" % (source, name, (err or out).strip()[-300:]))
    return None, "", "; ".join(reasons) or "no image named"


def main():
    module = AnsibleModule(
        argument_spec=dict(
            image=dict(type="str"),
            container=dict(type="str"),
            container_cli=dict(type="list", elements="str", default=["docker"]),
            cache_dir=dict(type="path", default="/var/cache/dgxspark-vllm/vllm-flags"),
            timeout=dict(type="int", default=300),
        ),
        required_one_of=[("image", "container")],
        supports_check_mode=True,
    )
    p = module.params
    ident, source, reason = image_id(module, p["container_cli"], p["image"], p["container"])
    if ident is None:
        module.exit_json(changed=False, found=False, cached=False, image_id="", source="", reason=reason)
    cache = os.path.join(p["cache_dir"], re.sub(r"[^A-Za-z0-9]", "_", ident) + ".json")
    flagset = None
    if os.path.exists(cache):
        with open(cache, encoding="utf-8") as handle:
            flagset = json.load(handle)
    if flagset is not None and flagset.get("found") is not False and flagset.get("format") != _vllm_flags.FORMAT:
        flagset = None  # kept by an older dump, without what this one reads: the image is read again
    if flagset is not None and flagset.get("found") is False and "nccl" not in flagset:
        flagset = None  # an unreadable vLLM kept before its image's NCCL was read as well
    if flagset is not None:
        if flagset.get("found") is False:
            module.exit_json(changed=False, found=False, cached=True, image_id=ident, source=source, reason=flagset["reason"],
                             nccl=flagset["nccl"])
        module.exit_json(changed=False, found=True, cached=True, image_id=ident, source=source, flagset=flagset)
    # The bare hex ID: Docker and podman both take it (podman not always with the sha256: prefix).
    argv = p["container_cli"] + ["run", "--rm", "--network", "none", "--entrypoint", "python3", ident.split(":", 1)[-1], "-c"]
    rc, out, err = module.run_command(["timeout", str(p["timeout"])] + argv + [_vllm_flags.DUMP_SCRIPT])
    flagset = _vllm_flags.parse_dump(out) if rc == 0 else None
    if flagset is None:
        tail = (err or out).strip().splitlines()[-3:]
        reason = "the vLLM in image %s could not be read (rc %s): %s" % (ident[:19], rc, " | ".join(tail))
        # Which NCCL the image's engine would load does not need vLLM's parser: read it alone.
        nrc, nout, _nerr = module.run_command(["timeout", str(p["timeout"])] + argv + [_vllm_flags.NCCL_SCRIPT])
        nccl = (_vllm_flags.parse_nccl(nout) if nrc == 0 else None) or {"version": None, "file": None, "so_path_env": None}
        if NO_VLLM.search(err or out):
            write_cache(module, cache, {"found": False, "reason": reason, "nccl": nccl})
        module.exit_json(changed=False, found=False, cached=False, image_id=ident, source=source, reason=reason, nccl=nccl)
    flagset["image_id"] = ident
    write_cache(module, cache, flagset)
    module.exit_json(changed=False, found=True, cached=False, image_id=ident, source=source, flagset=flagset)


def write_cache(module, cache, data):
    if module.check_mode:
        return
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    tmp = cache + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(tmp, cache)


if __name__ == "__main__":
    main()
