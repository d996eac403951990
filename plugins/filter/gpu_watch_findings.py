# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the nodes' GPU watch states say together."""

from __future__ import annotations

DOCUMENTATION = r"""
name: gpu_watch_findings
short_description: Sentences naming a wedged GPU or a stuck collective from every node's GPU watch state
version_added: 0.3.0
description:
  - Takes a mapping of node name to the state the gpu_watch role's daemon writes (C(state.json), parsed; an
    empty value for a node without one) and returns one sentence per finding.
  - A C(wedged) finding is named with its node and the remedy (a full AC power-cycle). A C(busy_low_power)
    finding is a stuck collective only while another node's GPU is idle at the time; a single node cannot tell.
options:
  _input:
    description: Node name to its watch state.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Name what the watches found
  ansible.builtin.debug:
    msg: "{{ states | dgxspark.vllm.gpu_watch_findings }}"
  vars:
    states: {spark-head: "{{ head_state | from_json }}", spark-worker-1: "{{ worker_state | from_json }}"}
"""

RETURN = r"""
_value:
  description: One sentence per finding, empty when nothing is wrong.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.vllm.plugins.module_utils._gpu_watch import cross_node


def gpu_watch_findings(states):
    if not isinstance(states, dict):
        raise AnsibleFilterError("gpu_watch_findings expects a mapping of node name to watch state")
    return cross_node({str(k): (v if isinstance(v, dict) else {}) for k, v in states.items()})


class FilterModule:
    def filters(self):
        return {"gpu_watch_findings": gpu_watch_findings}
