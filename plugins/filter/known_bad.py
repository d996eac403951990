# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rows of the known-bad table a node's releases match."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.vllm.plugins.module_utils._known_bad import KnownBadError, evaluate

DOCUMENTATION = r"""
name: known_bad
short_description: Match a node's releases against the table of known-bad releases
version_added: 0.3.0
description:
  - Each row of the table names releases (kernel, container toolkit and its mode, the engine's NCCL, PCIe width, ...)
    that public threads show failing multi-node serving, with the symptom, the fix and the source.
  - A row matches when every fact it names matches one of its specs; a fact that was not read matches nothing and is
    listed under C(unknown) instead. Table schema and spec syntax are in C(plugins/module_utils/_known_bad.py).
options:
  _input:
    description: The node's facts (fact name -> version or value as text; null when not read).
    type: dict
    required: true
  table:
    description: The table (C(roles/preflight/files/known_bad.yml)).
    type: list
    elements: dict
    required: true
  accepted:
    description: Row ids whose risk the user accepts; their hits are marked C(accepted).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Stop on a known-bad release
  ansible.builtin.assert:
    that: _bad.hits | rejectattr('accepted') | list | length == 0
    fail_msg: "{{ _bad.hits | map(attribute='symptom') | join(' ') }}"
  vars:
    _bad: "{{ node.node_info.host_stack | dgxspark.vllm.known_bad(lookup('ansible.builtin.file', 'known_bad.yml') | from_yaml) }}"
"""

RETURN = r"""
_value:
  description:
    - C(hits), the rows that match (id, the facts matched, symptom, fix, source, accepted), and C(unknown), for each row
      whose facts were not all read, the names of those facts.
  type: dict
"""


def known_bad(facts, table, accepted=None):
    if not isinstance(facts, dict):
        raise AnsibleFilterError("known_bad expects the node's facts as a mapping")
    try:
        return evaluate(table, facts, accepted or [])
    except KnownBadError as exc:
        raise AnsibleFilterError("known-bad table: %s" % exc) from exc


class FilterModule:
    """dgxspark.vllm.known_bad."""

    def filters(self):
        return {"known_bad": known_bad}
