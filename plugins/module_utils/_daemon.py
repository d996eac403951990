# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the collection's node daemons share (the GPU watch, the serving watchdog): journal lines with a
priority and files written whole. Installed next to each daemon by its role; no Ansible imports."""

from __future__ import annotations

import os
import sys

# sd-daemon priority prefixes: journald stores the line with this priority.
ERR, WARNING, NOTICE = "<3>", "<4>", "<5>"


def log(prefix, text):
    """One journal line (the daemon's stdout) at the priority `prefix` gives."""
    sys.stdout.write(prefix + text + "\n")
    sys.stdout.flush()


def write_atomic(path, text):
    """Write `path` whole (readers never see half a file), mode 0644; nothing when `path` is empty."""
    if not path:
        return
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as handle:
        handle.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
