# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Node-to-node SSH command lines (head to worker), shared by the modules.

The contract set up by the node_trust role: a dedicated key, a known_hosts file
of its own and strict host key checking, so a copy never talks to a host it
does not know and never prompts. Built here only: the modules call it, the roles
through the dgxspark.vllm.node_ssh filter.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess

# The one head-to-worker SSH contract of the collection: the node_trust role creates this key and
# known_hosts file; every role and module defaults to them (an empty value means these).
DEFAULT_KEY = "~/.ssh/dgxspark_node_trust_ed25519"
DEFAULT_KNOWN_HOSTS = "~/.ssh/dgxspark_known_hosts"
# Bulk copies (images, caches) spend their CPU on the cipher. AES-GCM runs on the
# CPU's AES instructions (AES-NI on x86, the ARMv8 crypto extension on the GB10's
# Grace cores) and leaves more of it to save/load than chacha20-poly1305, OpenSSH's
# first choice. "^" puts them first and keeps the rest of the default list.
CIPHERS = "^aes128-gcm@openssh.com,aes256-gcm@openssh.com"
# host_key_checking -> StrictHostKeyChecking: strict refuses unknown or changed host keys,
# accept-new accepts a new host once (still refuses a changed one), off checks nothing.
HOST_KEY_CHECKING = {"strict": "yes", "accept-new": "accept-new", "off": "no"}

# The modules' SSH options, one spec for all (documented by the dgxspark.vllm.ssh doc fragment).
ARGUMENT_SPEC = dict(
    ssh_key=dict(type="str", default="", no_log=False),
    known_hosts=dict(type="str", default=""),
    ssh_port=dict(type="int"),
    host_key_checking=dict(type="str", default="strict", choices=sorted(HOST_KEY_CHECKING)),
    connect_timeout=dict(type="int", default=10),
)


def resolve(path, default, home=None):
    """The path to use: `default` when `path` is empty; a leading ~ made `home`, or this user's
    home when `home` is None (a module on the node that runs ssh)."""
    path = path or default
    if home is None:
        return os.path.expanduser(path)
    return re.sub(r"^~(?=/|$)", lambda _m: home, path)


def ssh_base(key="", known_hosts="", port=None, host_key_checking="strict", connect_timeout=10, home=None,
             control_path=None):
    """`ssh` and its options, without destination: argv list. See resolve() for key, known_hosts, home."""
    checking = HOST_KEY_CHECKING[host_key_checking]
    argv = ["ssh", "-T",
            "-o", "BatchMode=yes",
            "-o", "ConnectTimeout=%d" % int(connect_timeout),
            # A dead link ends the copy within a minute instead of hanging it.
            "-o", "ServerAliveInterval=15",
            "-o", "ServerAliveCountMax=4",
            "-o", "LogLevel=ERROR",
            "-o", "Ciphers=%s" % CIPHERS,
            "-o", "StrictHostKeyChecking=%s" % checking,
            "-i", resolve(key, DEFAULT_KEY, home), "-o", "IdentitiesOnly=yes",
            "-o", "UserKnownHostsFile=%s" % ("/dev/null" if checking == "no"
                                             else resolve(known_hosts, DEFAULT_KNOWN_HOSTS, home))]
    if port:
        argv += ["-p", str(int(port))]
    if control_path:
        # One connection per destination for all its steps.
        argv += ["-o", "ControlMaster=auto", "-o", "ControlPath=%s" % control_path, "-o", "ControlPersist=60"]
    return argv


def from_params(params, **kwargs):
    """ssh_base() from a module's params (ARGUMENT_SPEC)."""
    return ssh_base(params["ssh_key"], params["known_hosts"], params["ssh_port"], params["host_key_checking"],
                    params["connect_timeout"], **kwargs)


def destination(host, user=None):
    """user@host (IPv6 literals need no brackets for ssh)."""
    return "%s@%s" % (user, host) if user else host


def ssh_argv(host, command, user=None, **options):
    """Full argv running `command` on `host`, with ssh_base(**options).

    `command` is a list of words (quoted here, run by the remote user's shell)
    or a string passed to the remote shell as is.
    """
    if not isinstance(command, str):
        command = shlex.join(command)
    return ssh_base(**options) + ["--", destination(host, user), command]


def rsync_rsh(**options):
    """The same ssh as one string, for `rsync -e`."""
    return shlex.join(ssh_base(**options))


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
