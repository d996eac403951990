# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The head-to-worker SSH options every module of the collection takes (module_utils/_ssh.ARGUMENT_SPEC)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  ssh_key:
    description:
      - Private key for the SSH connections from this node to the others.
      - Empty means the key the M(dgxspark.vllm.node_trust) role creates, C(~/.ssh/dgxspark_node_trust_ed25519).
    type: str
    default: ""
  known_hosts:
    description:
      - Known hosts file holding the other nodes' host keys.
      - Empty means the file the node_trust role writes, C(~/.ssh/dgxspark_known_hosts).
    type: str
    default: ""
  ssh_port:
    description: SSH port of the other nodes (the SSH client's own default when not set).
    type: int
  host_key_checking:
    description:
      - V(strict) accepts only known host keys; V(accept-new) adds an unknown one once but refuses a changed one;
        V(off) checks nothing (not recommended).
    type: str
    choices: [accept-new, "off", strict]
    default: strict
  connect_timeout:
    description: Seconds to wait for an SSH connection.
    type: int
    default: 10
notes:
  - Every SSH command line of the collection is built in one place (module_utils C(_ssh)), with the same options
    for every module and role - batch mode, a connect timeout, keep-alives, AES-GCM ciphers first, the key only
    (C(IdentitiesOnly)) and the known hosts file above.
"""
