# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A long step's own count of what it has done, in a small file that another process reads while
the step runs (module job_progress): "DONE TOTAL" in bytes, TOTAL 0 when unknown."""

from __future__ import annotations

import os


def write_counter(path, done, total=0):
    """Replace the file at once, so a reader never sees half a line."""
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as handle:
        handle.write("%d %d\n" % (int(done), int(total or 0)))
    os.replace(tmp, path)


def read_counter(path):
    """(done, total) from the file; (None, 0) when it is not there or not a counter yet."""
    try:
        with open(path) as handle:
            fields = handle.read().split()
        return int(fields[0]), int(fields[1]) if len(fields) > 1 else 0
    except (OSError, ValueError, IndexError):
        return None, 0
