#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: engine_health
short_description: Wait for a vLLM engine run by systemd to answer healthy, failing at once when it dies
version_added: 0.2.0
description:
  - Polls the engine's health URL until it answers 200, while watching the systemd unit that runs the
    engine. An engine that exits or restarts during the wait (a refused flag, a missing mod, a rank that died)
    fails the task within one poll, with the exit status and the engine's last log lines, instead of waiting
    out the timeout while systemd restarts it again and again.
  - Keeps waiting only while the engine makes progress (new lines in its journal, such as weight loading,
    compilation, warm-up), so a long cold load passes and a silent hang fails after O(stall_timeout) seconds.
  - Changes nothing.
options:
  url:
    description: The health URL (vLLM's C(/health)).
    type: str
    required: true
  unit:
    description: The systemd unit running the engine.
    type: str
    required: true
  timeout:
    description: Seconds to wait at most, progress or not.
    type: int
    default: 2700
  stall_timeout:
    description: Seconds without a new log line of the engine before it is declared stuck.
    type: int
    default: 600
  poll:
    description: Seconds between polls.
    type: int
    default: 5
  log_lines:
    description: Log lines of the engine to show when it failed.
    type: int
    default: 40
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes.read_only
  - dgxspark.vllm.attributes
author:
  - dgxspark.vllm contributors (@dgxspark)
"""

EXAMPLES = r"""
- name: Wait for the engine, failing as soon as it dies
  dgxspark.vllm.engine_health:
    url: http://127.0.0.1:8000/health
    unit: dgxspark-vllm
    timeout: 2700
  become: true
"""

RETURN = r"""
elapsed:
  description: Seconds until the engine answered healthy (or failed).
  returned: always
  type: float
restarts:
  description: Times systemd restarted the unit during the wait.
  returned: always
  type: int
log:
  description: The engine's last log lines, when it failed.
  returned: failure
  type: str
exited_ago:
  description:
    - Seconds between the engine's exit and the wait noticing it (systemd's exit timestamp; once systemd has
      restarted the unit, the old engine's last journal line instead). Null when neither is known.
  returned: failure
  type: float
reason:
  description: The root cause found in the engine's log (its first error line that is not a wrapper), when it died.
  returned: failure
  type: str
  sample: "ValueError: Unknown attention backend: 'B12X'."
"""

import json
import re
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url


class Engine:
    """The unit as systemd and the journal see it."""

    def __init__(self, module, unit):
        self.module, self.unit = module, unit
        self.systemctl = module.get_bin_path("systemctl", required=True)
        self.journalctl = module.get_bin_path("journalctl", required=True)

    def show(self):
        props = ("ActiveState,SubState,NRestarts,InvocationID,ExecMainStatus,ExecMainCode,Result,"
                 "ExecMainExitTimestampMonotonic")
        _rc, out, _err = self.module.run_command([self.systemctl, "show", self.unit, "-p", props])
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def cursor(self):
        _rc, out, _err = self.module.run_command([self.journalctl, "-u", self.unit, "-n", "0", "--show-cursor",
                                                  "--no-pager"])
        return out.strip().rsplit("cursor:", 1)[-1].strip() if "cursor:" in out else ""

    def last_entry_at(self, invocation):
        """Wall-clock time (s) of the invocation's last journal entry, or None: once systemd has restarted
        the unit, its exit timestamp is gone, and the old engine's last line is when it went quiet."""
        if not invocation:
            return None
        _rc, out, _err = self.module.run_command([self.journalctl, "--no-pager", "-o", "json", "-n", "1",
                                                  "_SYSTEMD_INVOCATION_ID=" + invocation])
        try:
            return int(json.loads(out.strip().splitlines()[-1])["__REALTIME_TIMESTAMP"]) / 1e6
        except (ValueError, KeyError, IndexError):
            return None

    def log(self, invocation, lines):
        argv = [self.journalctl, "--no-pager", "-o", "cat", "-n", str(lines)]
        argv += ["_SYSTEMD_INVOCATION_ID=" + invocation] if invocation else ["-u", self.unit]
        _rc, out, _err = self.module.run_command(argv)
        return out.rstrip()


# "XError: text" lines of a Python traceback; the generic wrappers around a root cause come after it.
_ERROR = re.compile(r"\b((?:\w+\.)*\w+(?:Error|Exception)(?:\(\w+\))?): (.+)$")
_WRAPPERS = ("Engine core initialization failed", "RayTaskError", "RayActorError", "EngineDeadError",
             "EngineCore encountered an issue")
# Warnings quote errors they guard against ("fd limit errors like `OSError: ...`"): not a cause.
_NOT_ERRORS = re.compile(r"\b(WARNING|INFO|DEBUG)\b")


def reason(log):
    """The root cause in an engine's log: the first error line that is not a wrapper around another."""
    found = []
    for line in log.splitlines():
        if _NOT_ERRORS.search(line):
            continue
        m = _ERROR.search(line)
        if m and m.group(0) not in found:
            found.append(m.group(0))
    root = [f for f in found if not any(w in f for w in _WRAPPERS)]
    return (root or found or [""])[0]


def healthy(url):
    try:
        return open_url(url, timeout=5, validate_certs=False).getcode() == 200
    except Exception:  # refused, 503 while loading, a timeout: not yet
        return False


def died(start, now):
    """Why the engine of the wait's start is gone, or None while it runs."""
    if now.get("InvocationID") != start.get("InvocationID") or now.get("NRestarts") != start.get("NRestarts"):
        return "it exited and systemd restarted it"
    if now.get("ActiveState") in ("failed", "inactive") or now.get("SubState") == "auto-restart":
        # systemd's Result reads "success" while a restart is pending even when the process failed.
        result = now.get("Result")
        return "it exited (%s)" % (result if result not in (None, "", "success") else now.get("SubState"))
    return None


def exited_ago(now):
    """Seconds since the engine's main process exited (systemd's monotonic clock is the kernel's), or None."""
    try:
        stamp = int(now.get("ExecMainExitTimestampMonotonic") or 0)
    except ValueError:
        return None
    return round(max(0.0, time.monotonic() - stamp / 1e6), 1) if stamp > 0 else None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True), unit=dict(type="str", required=True),
            timeout=dict(type="int", default=2700), stall_timeout=dict(type="int", default=600),
            poll=dict(type="int", default=5), log_lines=dict(type="int", default=40),
        ),
        supports_check_mode=True,
    )
    p = module.params
    engine = Engine(module, p["unit"])
    began = time.monotonic()
    start, cursor = engine.show(), engine.cursor()
    progress_at = began
    while True:
        elapsed = round(time.monotonic() - began, 1)
        if healthy(p["url"]):
            module.exit_json(changed=False, elapsed=elapsed, restarts=0)
        now = engine.show()
        why = died(start, now)
        if why:
            full = engine.log(start.get("InvocationID"), 2000)
            log = "\n".join(full.splitlines()[-p["log_lines"]:])
            cause = reason(full)
            ago = exited_ago(now)
            if ago is None:
                last = engine.last_entry_at(start.get("InvocationID"))
                ago = None if last is None else round(max(0.0, time.time() - last), 1)
            module.fail_json(
                msg="vLLM (%s) died %.0f s into the wait for %s: %s, exit status %s%s.%s Its last %d log lines:\n%s"
                    % (p["unit"], elapsed, p["url"], why, now.get("ExecMainStatus", "?"),
                       "" if ago is None else " (noticed %.0f s after the exit)" % ago,
                       " Reason: %s." % cause if cause else "", p["log_lines"], log),
                elapsed=elapsed, restarts=int(now.get("NRestarts") or 0) - int(start.get("NRestarts") or 0), log=log,
                reason=cause, exited_ago=ago)
        latest = engine.cursor()
        if latest != cursor:
            cursor, progress_at = latest, time.monotonic()
        stalled = time.monotonic() - progress_at
        if stalled > p["stall_timeout"] or elapsed > p["timeout"]:
            log = engine.log(start.get("InvocationID"), p["log_lines"])
            cause = ("no new log line for %.0f s (stall_timeout %d)" % (stalled, p["stall_timeout"])
                     if stalled > p["stall_timeout"] else "not healthy within %d s" % p["timeout"])
            module.fail_json(msg="vLLM (%s) is running but %s: %s. Its last %d log lines:\n%s"
                                 % (p["unit"], "stuck" if stalled > p["stall_timeout"] else "slow", cause,
                                    p["log_lines"], log),
                             elapsed=elapsed, restarts=0, log=log)
        time.sleep(p["poll"])


if __name__ == "__main__":
    main()
