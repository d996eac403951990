# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Print how long each task took and the slowest tasks at the end of a play run."""

from __future__ import annotations

DOCUMENTATION = r"""
name: task_timer
type: aggregate
short_description: Time every task and list the slowest at the end
description:
  - Adds the elapsed time after each task and a short table of the slowest tasks
    in the play recap. It needs nothing beyond ansible-core.
  - While a task retries (an C(until) loop waiting for a long step), it prints the C(progress) line its
    result carries (module M(dgxspark.vllm.job_progress)), with the bytes done, the rate and how to follow the step.
options:
  top:
    description: How many of the slowest tasks to list at the end.
    type: int
    default: 10
    env:
      - name: DGXSPARK_TASK_TIMER_TOP
requirements: []
"""

import time

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "dgxspark.vllm.task_timer"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._current = None
        self._started = None
        self._times = {}

    def _close_current(self):
        if self._current is not None:
            elapsed = time.monotonic() - self._started
            self._times[self._current] = self._times.get(self._current, 0.0) + elapsed
            self._display.display(f"  ({elapsed:.1f}s)", color="bright gray")
            self._current = None

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._close_current()
        self._current = task.get_name()
        self._started = time.monotonic()

    def v2_runner_retry(self, result):
        progress = result._result.get("progress")  # pylint: disable=protected-access
        if progress:
            self._display.display(f"  [{result._host.get_name()}] {progress}", color="cyan")  # pylint: disable=protected-access

    def v2_playbook_on_handler_task_start(self, task):
        self.v2_playbook_on_task_start(task, False)

    def v2_playbook_on_stats(self, stats):
        self._close_current()
        top = self.get_option("top")
        slowest = sorted(self._times.items(), key=lambda kv: kv[1], reverse=True)[:top]
        if slowest:
            self._display.banner("SLOWEST TASKS")
            for name, secs in slowest:
                self._display.display(f"{secs:8.1f}s  {name}")
