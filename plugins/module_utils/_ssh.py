# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Node-to-node SSH command lines (head to worker), shared by the modules.

The contract set up by the node_trust role: a dedicated key, a known_hosts file
of its own and strict host key checking, so a copy never talks to a host it
does not know and never prompts.
"""

from __future__ import annotations

import os
import shlex

DEFAULT_KEY = "~/.ssh/dgxspark_node_trust_ed25519"
DEFAULT_KNOWN_HOSTS = "~/.ssh/dgxspark_known_hosts"
# Bulk copies (images, caches) spend their CPU on the cipher. AES-GCM runs on the
# CPU's AES instructions (AES-NI on x86, the ARMv8 crypto extension on the GB10's
# Grace cores) and leaves more of it to save/load than chacha20-poly1305, OpenSSH's
# first choice. "^" puts them first and keeps the rest of the default list.
CIPHERS = "^aes128-gcm@openssh.com,aes256-gcm@openssh.com"


def ssh_base(key=None, known_hosts=None, port=None, strict=True, connect_timeout=10):
    """`ssh` and its options, without destination: argv list.

    strict=True refuses unknown or changed host keys; strict=False accepts a
    new host once (accept-new) but still refuses a changed one.
    """
    argv = ["ssh", "-T",
            "-o", "BatchMode=yes",
            "-o", "ConnectTimeout=%d" % int(connect_timeout),
            # A dead link ends the copy within a minute instead of hanging it.
            "-o", "ServerAliveInterval=15",
            "-o", "ServerAliveCountMax=4",
            "-o", "Ciphers=%s" % CIPHERS,
            "-o", "StrictHostKeyChecking=%s" % ("yes" if strict else "accept-new")]
    if key:
        argv += ["-i", os.path.expanduser(key), "-o", "IdentitiesOnly=yes"]
    if known_hosts:
        argv += ["-o", "UserKnownHostsFile=%s" % os.path.expanduser(known_hosts)]
    if port:
        argv += ["-p", str(int(port))]
    return argv


def destination(host, user=None):
    """user@host (IPv6 literals need no brackets for ssh)."""
    return "%s@%s" % (user, host) if user else host


def ssh_argv(host, command, user=None, key=None, known_hosts=None, port=None, strict=True, connect_timeout=10):
    """Full argv running `command` on `host`.

    `command` is a list of words (quoted here, run by the remote user's shell)
    or a string passed to the remote shell as is.
    """
    if not isinstance(command, str):
        command = shlex.join(command)
    return ssh_base(key, known_hosts, port, strict, connect_timeout) + ["--", destination(host, user), command]


def rsync_rsh(key=None, known_hosts=None, port=None, strict=True, connect_timeout=10):
    """The same ssh as one string, for `rsync -e`."""
    return shlex.join(ssh_base(key, known_hosts, port, strict, connect_timeout))
