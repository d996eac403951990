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
import subprocess

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


def converse(argv, first, later=None):
    """Run argv, write ``first`` to its stdin at once, then ``later()`` (which may wait, e.g. on a
    Future) when there is one, close stdin and collect the output: a CompletedProcess (text).

    The remote side starts on the first line while this side prepares the second. A remote
    side that is gone (ssh failed) is not an error here: its exit status and stderr say why.
    """
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rest = None
    try:
        proc.stdin.write(first)
        proc.stdin.flush()
        if later is not None:
            rest = later()
    except OSError:
        rest = None  # a broken pipe: the other side is gone
    stdout, stderr = proc.communicate(input=rest)
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
