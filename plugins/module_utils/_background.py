# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Processes that run beside a module's own work (a load to sample under, a
stream between two commands): what AnsibleModule.run_command cannot give."""

from __future__ import annotations

import os
import signal
import subprocess


def start(argv, output=None, stdin=None, new_session=True):
    """Start argv in the background; output to a file object (or a pipe when None)."""
    return subprocess.Popen(argv, stdout=output if output is not None else subprocess.PIPE,
                            stderr=subprocess.STDOUT if output is not None else subprocess.PIPE,
                            stdin=stdin if stdin is not None else subprocess.DEVNULL,
                            start_new_session=new_session)


def stop(proc, timeout=20):
    """Terminate the process's whole group (a container CLI forwards the signal), then kill."""
    if proc.poll() is not None:
        return proc.returncode
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()
    except ProcessLookupError:
        return proc.wait()


def tail(handle, lines=20):
    """The last lines written to a file object opened in binary mode."""
    handle.seek(0)
    return "\n".join(handle.read().decode("utf-8", "replace").splitlines()[-lines:])
