# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The socket interface variables of an engine environment that name no interface of the node."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: socket_ifname_problems
short_description: Name the socket interface variables of an environment that no interface of the node matches
version_added: 0.1.0
description:
  - NCCL, gloo and TensorPipe pick the network interface of a node from C(NCCL_SOCKET_IFNAME),
    C(GLOO_SOCKET_IFNAME) and C(TP_SOCKET_IFNAME). A name the node lacks makes every rank fail at its
    first collective (gloo, Unable to find address) or fall back to another interface (NCCL).
  - C(NCCL_SOCKET_IFNAME) is a comma-separated list of prefixes (C(=name) an exact name; a list that
    starts with C(^) excludes interfaces and is not checked). C(GLOO_SOCKET_IFNAME) and
    C(TP_SOCKET_IFNAME) are exact names (gloo takes a comma-separated list).
options:
  _input:
    description: The environment (name -> value).
    type: dict
    required: true
  interfaces:
    description: The node's interfaces (the names under C(/sys/class/net)).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Fail on a socket interface the node lacks
  ansible.builtin.assert:
    that: _problems | length == 0
    fail_msg: "{{ _problems | map(attribute='message') | join(' ') }}"
  vars:
    _problems: "{{ {'GLOO_SOCKET_IFNAME': 'enp9s0'} | dgxspark.vllm.socket_ifname_problems(['lo', 'enp1s0f1np1']) }}"
"""

RETURN = r"""
_value:
  description: One entry per variable that names a missing interface (name, value, missing, message).
  type: list
  elements: dict
"""

SOCKET_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME")


def _missing(name, value, interfaces):
    entries = [e.strip() for e in str(value).split(",") if e.strip()]
    if name == "NCCL_SOCKET_IFNAME":
        if entries and entries[0].startswith("^"):
            return []
        # NCCL matches prefixes, and uses any of the listed interfaces it finds.
        found = [e for e in entries if any(i == e[1:] if e.startswith("=") else i.startswith(e) for i in interfaces)]
        return [] if found else entries
    return [e for e in entries if e not in interfaces]


def socket_ifname_problems(env, interfaces):
    if not isinstance(env, dict):
        raise AnsibleFilterError("socket_ifname_problems expects the environment as a mapping")
    if isinstance(interfaces, (str, bytes)) or not hasattr(interfaces, "__iter__"):
        raise AnsibleFilterError("socket_ifname_problems expects the node's interfaces as a list")
    interfaces = [str(i) for i in interfaces]
    problems = []
    for name in SOCKET_VARS:
        value = env.get(name)
        if value is None or str(value).strip() == "":
            continue
        missing = _missing(name, value, interfaces)
        if missing:
            problems.append({
                "name": name, "value": str(value), "missing": missing,
                "message": "%s=%s names no interface of this node (%s; it has %s)."
                           % (name, value, ", ".join(missing), ", ".join(sorted(interfaces)) or "none"),
            })
    return problems


class FilterModule:
    """dgxspark.vllm.socket_ifname_problems."""

    def filters(self):
        return {"socket_ifname_problems": socket_ifname_problems}
