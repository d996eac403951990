#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: job_progress
short_description: How far a long background step has come, for a wait that shows it
version_added: 0.2.0
description:
  - Reads whether an Ansible async job (a task run with C(async) and C(poll=0)) still runs, how many bytes a file or a
    folder it fills holds now, and the last line of a log, and says so in one line (RV(progress)), with the rate
    since the previous call of the same wait.
  - Meant for an C(until) loop that polls every 30 s or so. Each retry's result carries the line, which the
    collection's C(dgxspark.vllm.task_timer) callback prints, so a long step shows the bytes done, the rate and
    the command to follow it while it runs.
  - Reads only. Collect the job's own result afterwards with M(ansible.builtin.async_status).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - dgxspark.vllm.attributes.read_only
  - dgxspark.vllm.attributes
options:
  jid:
    description: The async job's ID (C(ansible_job_id) of the task started with C(poll=0)).
    type: str
    required: true
  async_dir:
    description: Where Ansible keeps the status files of async jobs for the user this module runs as.
    type: path
    default: ~/.ansible_async
  watch:
    description: A file or folder whose size in bytes is the step's progress (a download's folder, a build log).
    type: path
  counter:
    description:
      - A file the job itself keeps its count in while it runs (C(DONE TOTAL) in bytes, as
        M(dgxspark.vllm.image_distribute)'s O(dgxspark.vllm.image_distribute#module:progress_file) writes it),
        for a step whose progress is no path's size here (a stream to another node).
      - Takes the place of O(watch); its TOTAL is used when O(total) is 0.
    type: path
  total:
    description: The size the watched path will have when done (bytes), for a share done; 0 when unknown.
    type: int
    default: 0
  log:
    description: A log whose last line is shown.
    type: path
  what:
    description: What the step is, for the line (e.g. C(image build)).
    type: str
    default: the step
  follow:
    description: The command a person runs to follow the step, for the line.
    type: str
    default: ""
  wait:
    description:
      - Seconds to wait for the job to end before answering. With the poll interval here and a short
        C(delay) on the C(until) loop, a line comes every O(wait) seconds while the job runs, and a short
        job is answered as soon as it ends instead of after a whole interval.
    type: int
    default: 0
author:
  - dgxspark.vllm contributors (@dgxspark)
"""

EXAMPLES = r"""
- name: Build in the background
  ansible.builtin.shell: ./build-deploy.sh > /var/tmp/build.log 2>&1
  async: 14400
  poll: 0
  register: build

- name: Wait for the build, saying how far it is every 30 s
  dgxspark.vllm.job_progress:
    jid: "{{ build.ansible_job_id }}"
    watch: /var/tmp/build.log
    log: /var/tmp/build.log
    what: image build
    follow: tail -f /var/tmp/build.log
    # A line every 30 s while it runs; the answer as soon as it ends.
    wait: 30
  register: progress
  until: progress.finished
  retries: 480
  delay: 1

- name: Collect the build's result
  ansible.builtin.async_status:
    jid: "{{ build.ansible_job_id }}"
  register: done
"""

RETURN = r"""
finished:
  description: Whether the job has ended (or its status file is gone, which async_status then reports).
  returned: always
  type: bool
bytes:
  description: Bytes in O(watch) now, or the count in O(counter) (null without either, or before the job wrote its count).
  returned: always
  type: int
rate:
  description: Bytes per second since the previous call for the same job (null on the first call).
  returned: always
  type: float
line:
  description: The last line of O(log) (empty without it).
  returned: always
  type: str
progress:
  description: One line for a person.
  returned: always
  type: str
  sample: "image build: 1.2 GiB so far, 35.0 MiB/s, running 4 min; last: Step 12/30 : RUN pip install ...; follow: tail -f /var/tmp/build.log"
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dgxspark.vllm.plugins.module_utils._progress import read_counter


def size_of(path):
    """Bytes in a file, or in every file below a folder (links not followed)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def last_line(path, tail=4096):
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, os.path.getsize(path) - tail))
            lines = [ln for ln in handle.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:200] if lines else ""


def job_state(async_dir, jid):
    """(finished, started_at) from the async job's status file: running while it says finished 0."""
    path = os.path.join(async_dir, jid)
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        # Gone, or being rewritten with the job's result: async_status has the last word.
        return True, None
    started = os.path.getmtime(path) if data.get("finished") == 0 else None
    return data.get("finished", 1) != 0, started


def human(count):
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return "%.1f %s" % (value, unit) if unit != "B" else "%d B" % value
        value /= 1024
    return str(count)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            jid=dict(type="str", required=True),
            async_dir=dict(type="path", default="~/.ansible_async"),
            watch=dict(type="path"),
            counter=dict(type="path"),
            total=dict(type="int", default=0),
            log=dict(type="path"),
            what=dict(type="str", default="the step"),
            follow=dict(type="str", default=""),
            wait=dict(type="int", default=0),
        ),
        mutually_exclusive=[("watch", "counter")],
        supports_check_mode=True,
    )
    p = module.params
    finished, started = job_state(p["async_dir"], p["jid"])
    deadline = time.time() + max(0, p["wait"])
    while not finished and time.time() < deadline:
        time.sleep(min(0.5, max(0.0, deadline - time.time())))
        finished, started = job_state(p["async_dir"], p["jid"])
    total = p["total"]
    if p["counter"]:
        count, counted_total = read_counter(p["counter"])
        total = total or counted_total
    else:
        count = size_of(p["watch"]) if p["watch"] else None
    # The previous call's figure, kept next to the job's status so a rate needs no state of Ansible's.
    mark = os.path.join(p["async_dir"], ".%s.progress" % p["jid"])
    rate = None
    now = time.time()
    if count is not None:
        try:
            with open(mark) as handle:
                before, then = json.load(handle)
            if now > then:
                rate = max(0.0, (count - before) / (now - then))
        except (OSError, ValueError, TypeError):
            pass
        if not finished:
            try:
                with open(mark, "w") as handle:
                    json.dump([count, now], handle)
            except OSError:
                pass
    if finished:
        try:
            os.unlink(mark)
        except OSError:
            pass
    line = last_line(p["log"]) if p["log"] else ""
    parts = [p["what"] + (": done" if finished else ":")]
    if count is not None:
        share = " (%d%%)" % min(100, 100 * count // total) if total else ""
        parts.append("%s so far%s" % (human(count), share))
    if rate is not None:
        parts.append("%s/s" % human(rate))
    if started is not None:
        parts.append("running %d min" % ((now - started) // 60))
    text = ", ".join(parts[1:])
    progress = parts[0] + (" " + text if text else "")
    if line:
        progress += "; last: " + line
    if p["follow"] and not finished:
        progress += "; follow: " + p["follow"]
    module.exit_json(changed=False, finished=finished, bytes=count, rate=rate, line=line, progress=progress)


if __name__ == "__main__":
    main()
