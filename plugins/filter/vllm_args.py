# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Render `vllm serve` flags from data."""

from __future__ import annotations

import json
import re

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: vllm_args
short_description: Render a dict of vllm serve flags as an argv list
version_added: 0.1.0
description:
  - Turns a recipe's C(args) mapping (flag name without dashes -> value) into the words of a
    C(vllm serve) command line, in the mapping's order.
  - C(true) gives a bare flag; C(false) and C(null) leave the flag out; a mapping or list becomes one
    word of compact JSON with sorted keys (never pasted strings); anything else its string form.
  - A list for a flag that vLLM takes as several words (C(served-model-name), nargs C(+)) gives one word per item.
options:
  _input:
    description: Flag name (without leading dashes) -> value.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Build the argv of vllm serve
  ansible.builtin.set_fact:
    argv: "{{ ['vllm', 'serve', recipe.model] + (recipe.args | dgxspark.vllm.vllm_args) }}"
  vars:
    recipe:
      model: Org/Model
      args: {tensor-parallel-size: 2, trust-remote-code: true, limit-mm-per-prompt: {image: 4, video: 0}}
# -> [vllm, serve, Org/Model, --tensor-parallel-size, '2', --trust-remote-code,
#     --limit-mm-per-prompt, '{"image":4,"video":0}']
"""

RETURN = r"""
_value:
  description: The argv words, flags prefixed with C(--).
  type: list
  elements: str
"""

_FLAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")
# Flags vLLM's parser takes as nargs="+": a list is one word per item, not one JSON word.
_NARGS = {"served-model-name"}


def vllm_args(args):
    """Flag mapping -> list of argv words."""
    if not isinstance(args, dict):
        raise AnsibleFilterError(f"vllm_args expects a mapping of flag -> value, got {type(args).__name__}")
    words = []
    for flag, value in args.items():
        if not isinstance(flag, str) or not _FLAG.match(flag):
            raise AnsibleFilterError(f"vllm_args: {flag!r} is not a flag name (letters, digits, '-'; no leading dashes)")
        if value is None or value is False:
            continue
        words.append("--" + flag)
        if value is True:
            continue
        if isinstance(value, list) and flag in _NARGS:
            words.extend(str(item) for item in value)
        elif isinstance(value, (dict, list)):
            words.append(json.dumps(value, separators=(",", ":"), sort_keys=True))
        else:
            words.append(str(value))
    return words


class FilterModule:
    """dgxspark.vllm.vllm_args."""

    def filters(self):
        return {"vllm_args": vllm_args}
