# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What an NCCL_IB_HCA value leaves out of, or names beyond, the node's Up RoCE devices."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.vllm.plugins.module_utils._node_info import parse_ibdev2netdev

DOCUMENTATION = r"""
name: hca_problems
short_description: Check NCCL_IB_HCA against the RoCE devices that are Up on the node
version_added: 0.3.0
description:
  - A DGX Spark's QSFP port is two PCIe x4 links, each a RoCE device of its own ("twins", such as C(rocep1s0f1) and
    C(roceP2p1s0f1)); NCCL spreads its traffic over the devices C(NCCL_IB_HCA) lists, so a list with one twin runs at
    half the port (98 against 161 Gb/s with both, published). A device the list names that is not Up (the other
    port's, after cabling port 1 to port 2) leaves NCCL a device without a link.
  - C(NCCL_IB_HCA) is a comma-separated list of device names with an optional C(:port); NCCL matches them as prefixes,
    or exactly after a leading C(=); a list that starts with C(^) excludes devices and is not checked. An empty value (NCCL
    picks for itself) is not checked.
options:
  _input:
    description: The value of C(NCCL_IB_HCA).
    type: str
    required: true
  ports:
    description:
      - The node's RoCE ports, as the output of C(ibdev2netdev) or as M(dgxspark.vllm.node_info) returns them (a list of
        C(device), C(state)).
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: NCCL_IB_HCA covers every Up RoCE device
  ansible.builtin.assert:
    that: _problems | length == 0
    fail_msg: "{{ _problems | map(attribute='message') | join(' ') }}"
  vars:
    _problems: "{{ 'rocep1s0f1' | dgxspark.vllm.hca_problems([{'device': 'rocep1s0f1', 'state': 'Up'},
                                                              {'device': 'roceP2p1s0f1', 'state': 'Up'}]) }}"
"""

RETURN = r"""
_value:
  description: One entry per problem (kind C(missing_up) or C(not_up), the devices, a message naming them).
  type: list
  elements: dict
"""


def _matches(entry, device):
    exact = entry.startswith("=")
    name = entry.lstrip("=").split(":", 1)[0]
    return device == name if exact else device.startswith(name)


def hca_problems(value, ports):
    if isinstance(ports, str):
        ports = parse_ibdev2netdev(ports)
    if not isinstance(ports, (list, tuple)):
        raise AnsibleFilterError("hca_problems expects the node's RoCE ports as ibdev2netdev's output or a list")
    value = "" if value is None else str(value).strip()
    if not value or value.startswith("^"):
        return []
    entries = [e.strip() for e in value.split(",") if e.strip()]
    up = [p["device"] for p in ports if p.get("state") == "Up"]
    problems = []
    missing = [d for d in up if not any(_matches(e, d) for e in entries)]
    if missing:
        problems.append({"kind": "missing_up", "devices": missing, "message": (
            "NCCL_IB_HCA=%s leaves out %s, Up on this node: NCCL would carry the port's traffic over the listed devices "
            "only (one twin of a QSFP port is half of it: 98 against 161 Gb/s with both, published)."
            % (value, ", ".join(missing)))})
    dead = [e for e in entries if not any(_matches(e, d) for d in up)]
    if dead:
        problems.append({"kind": "not_up", "devices": dead, "message": (
            "NCCL_IB_HCA=%s names %s, not Up on this node (its RoCE devices: %s): a cable in the other port gives the "
            "node other devices." % (value, ", ".join(dead), ", ".join(
                "%s (%s)" % (p["device"], p.get("state")) for p in ports) or "none"))})
    return problems


class FilterModule:
    """dgxspark.vllm.hca_problems."""

    def filters(self):
        return {"hca_problems": hca_problems}
