# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Head-to-worker SSH for the roles, built by module_utils/_ssh like the modules' own."""

from __future__ import annotations

import shlex

from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.vllm.plugins.module_utils import _ssh

DOCUMENTATION = r"""
name: node_ssh
short_description: The collection's head-to-worker SSH command, for tasks that run ssh or rsync themselves
version_added: 0.3.0
description:
  - Builds the same C(ssh) options as the collection's modules (one place, module_utils C(_ssh)); a role never
    writes SSH options by hand.
options:
  _input:
    description: Private key (empty means the node_trust role's key).
    type: str
    required: true
  known_hosts:
    description: Known hosts file (empty means the node_trust role's file).
    type: str
    default: ""
  home:
    description: >-
      Home folder that a leading C(~) of both paths stands for (the admin user's on the node that runs ssh, when the
      task runs as another user); C(~) keeps the tilde for ssh to expand.
    type: str
    default: "~"
  host_key_checking:
    description: V(strict), V(accept-new) or V(off).
    type: str
    default: strict
  connect_timeout:
    description: Seconds to wait for a connection.
    type: int
    default: 10
"""

EXAMPLES = r"""
- name: Log in from the head to a worker
  ansible.builtin.command:
    argv: "{{ (node_trust_key_path | dgxspark.vllm.node_ssh).argv + ['spark@10.0.0.2', 'true'] }}"

- name: Copy with rsync over the same ssh
  ansible.builtin.command:
    argv: [rsync, -a, "--rsh={{ (models_ssh_key_path | dgxspark.vllm.node_ssh(home='/home/spark')).rsh }}", src/, "spark@10.0.0.2:dst/"]
"""

RETURN = r"""
_value:
  description: C(argv) (ssh and its options, no destination), C(rsh) (the same as one string, for rsync), and the
    resolved C(key) and C(known_hosts).
  type: dict
"""


def node_ssh(key, known_hosts="", home="~", host_key_checking="strict", connect_timeout=10):
    if host_key_checking not in _ssh.HOST_KEY_CHECKING:
        raise AnsibleFilterError("node_ssh: host_key_checking must be one of %s, got %r"
                                 % (", ".join(sorted(_ssh.HOST_KEY_CHECKING)), host_key_checking))
    argv = _ssh.ssh_base(key or "", known_hosts or "", None, host_key_checking, int(connect_timeout), home=home)
    return {"argv": argv, "rsh": shlex.join(argv),
            "key": _ssh.resolve(key or "", _ssh.DEFAULT_KEY, home),
            "known_hosts": _ssh.resolve(known_hosts or "", _ssh.DEFAULT_KNOWN_HOSTS, home)}


class FilterModule:
    def filters(self):
        return {"node_ssh": node_ssh}
