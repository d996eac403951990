#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: test_image
short_description: Make the deterministic PNG test images of the vision smoke test
version_added: 0.1.0
description:
  - Renders one of two test pictures in pure Python and returns it base64-encoded with its size and
    sha256, ready for an OpenAI chat request with an image part.
  - C(synthetic) shows a red square, a blue circle and the word SPARK; C(report) shows a title bar
    (QUARTERLY SALES REPORT), three dollar figures (Q1 $1,240,000, Q2 $1,890,000, Q3 $1,050,000), a
    small bar chart and the footer PREPARED BY FINANCE DEPT. The bytes are the same on every machine.
  - Optionally writes the PNG to O(dest), so a person can look at what the model was shown.
options:
  name:
    description: Which picture.
    type: str
    required: true
    choices: [synthetic, report]
  dest:
    description: Write the PNG to this path as well (only when its content differs).
    type: path
  mode:
    description: File mode of O(dest) when it is written.
    type: raw
    default: "0644"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes
attributes:
  check_mode:
    details: Reports whether O(dest) would be written without writing it.
  diff_mode:
    details: The content is a binary picture.
author:
  - dgxspark.vllm contributors (@dgxspark)
"""

EXAMPLES = r"""
- name: Make the synthetic test picture
  dgxspark.vllm.test_image:
    name: synthetic
  register: picture

- name: Show it to the model
  ansible.builtin.uri:
    url: http://127.0.0.1:8000/v1/chat/completions
    method: POST
    body_format: json
    body:
      model: minimax-m3
      messages:
        - role: user
          content:
            - {type: text, text: "What shapes and words do you see?"}
            - {type: image_url, image_url: {url: "data:image/png;base64,{{ picture.base64 }}"}}
"""

RETURN = r"""
name:
  description: The picture's name.
  returned: always
  type: str
  sample: synthetic
mime:
  description: Its media type.
  returned: always
  type: str
  sample: image/png
width:
  description: Width in pixels.
  returned: always
  type: int
  sample: 512
height:
  description: Height in pixels.
  returned: always
  type: int
  sample: 384
size:
  description: Size of the PNG in bytes.
  returned: always
  type: int
  sample: 2209
sha256:
  description: SHA-256 of the PNG bytes.
  returned: always
  type: str
  sample: aaa2f7299b3e7a8db706a53ef83e4afedb2253b71a7170d13ba832f4e89657e3
base64:
  description: The PNG, base64-encoded.
  returned: always
  type: str
dest:
  description: Where the PNG was written, when O(dest) was given.
  returned: when dest is set
  type: str
"""

import base64
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.vllm.plugins.module_utils import _test_image


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True, choices=sorted(_test_image.IMAGES)),
            dest=dict(type="path"),
            mode=dict(type="raw", default="0644"),
        ),
        supports_check_mode=True,
    )
    picture = _test_image.describe(module.params["name"])
    data = picture.pop("data")
    result = dict(changed=False, base64=base64.b64encode(data).decode("ascii"), **picture)

    dest = module.params["dest"]
    if dest:
        result["dest"] = dest
        current = None
        if os.path.isfile(dest):
            with open(dest, "rb") as handle:
                current = handle.read()
        if current != data:
            result["changed"] = True
            if not module.check_mode:
                directory = os.path.dirname(dest) or "."
                if not os.path.isdir(directory):
                    module.fail_json(msg=f"cannot write {dest}: folder {directory} does not exist; create it first", **result)
                tmp = dest + ".tmp"
                with open(tmp, "wb") as handle:
                    handle.write(data)
                module.atomic_move(tmp, dest)
        if not module.check_mode and os.path.exists(dest):
            file_args = module.load_file_common_arguments(dict(path=dest, mode=module.params["mode"]))
            result["changed"] = module.set_fs_attributes_if_different(file_args, result["changed"])

    module.exit_json(**result)


if __name__ == "__main__":
    main()
