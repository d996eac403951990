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
  - Takes a mapping of node name to the state the gpu_watch role's daemon writes in C(state.json), parsed or as
    its text (possibly followed by other lines, as a diagnose command prints it), and returns one sentence per
    finding. A node whose value is empty or not a state is left out.
  - A state older than three of its own sampling intervals (O(now) against its C(updated_at)) is named stale, since
    the watch stopped and what it last found may no longer hold.
  - A C(wedged) finding is named with its node and the remedy (a full AC power-cycle). A C(busy_low_power)
    finding is a stuck collective only while another node's GPU is idle at the time; a single node cannot tell.
options:
  _input:
    description: Node name to its watch state (a mapping, or its JSON text).
    type: dict
    required: true
  now:
    description: The time to judge staleness against (seconds since the epoch); 0 does not judge it.
    type: float
    default: 0
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

import json

from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.vllm.plugins.module_utils._gpu_watch import cross_node


def _state(value):
    """A watch state from a mapping or from the JSON text at the start of a command's output; None if neither."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, str):
        return None
    try:
        state, _end = json.JSONDecoder().raw_decode(value.lstrip())
    except ValueError:
        return None
    return state if isinstance(state, dict) and "findings" in state else None


def gpu_watch_findings(states, now=0):
    if not isinstance(states, dict):
        raise AnsibleFilterError("gpu_watch_findings expects a mapping of node name to watch state")
    parsed = {str(k): _state(v) for k, v in states.items()}
    said = []
    for node, state in sorted(parsed.items()):
        if state and now and state.get("updated_at") and state.get("interval"):
            age = float(now) - float(state["updated_at"])
            if age > 3 * float(state["interval"]):
                said.append("GPU watch on %s is stale: its last sample is %d s old (it samples every %s s); "
                            "check `systemctl status dgxspark-gpu-watch` there." % (node, age, state["interval"]))
    return cross_node({k: v for k, v in parsed.items() if v}) + said


class FilterModule:
    def filters(self):
        return {"gpu_watch_findings": gpu_watch_findings}
