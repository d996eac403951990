# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Quote argv words for systemd unit files."""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: systemd_join
short_description: Join argv words into one systemd ExecStart= command line
version_added: 0.1.0
description:
  - Quotes each word the way systemd parses C(ExecStart=) (double quotes with C(\\) and C(") escaped,
    C(%) and C($) doubled), so that systemd hands the process exactly these words.
options:
  _input:
    description: The argv words.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Show an ExecStart line
  ansible.builtin.debug:
    msg: "ExecStart={{ ['vllm', 'serve', '--limit-mm-per-prompt', '{\"image\":4}'] | dgxspark.vllm.systemd_join }}"
# -> ExecStart=vllm serve --limit-mm-per-prompt "{\"image\":4}"
"""

RETURN = r"""
_value:
  description: The command line.
  type: str
"""

# Words systemd takes as they are: no quotes, escapes, specifiers or variables needed.
_PLAIN = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")


def systemd_quote(word):
    """One argv word as systemd's ExecStart= parses it back to the same word."""
    word = str(word)
    if word and _PLAIN.match(word):
        return word
    # Inside double quotes systemd unescapes \\ and \"; % starts a specifier and $ a variable.
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    escaped = escaped.replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def systemd_join(argv):
    """A list of argv words -> one ExecStart= command line."""
    if isinstance(argv, (str, bytes)) or not hasattr(argv, "__iter__"):
        raise AnsibleFilterError("systemd_join expects a list of words")
    return " ".join(systemd_quote(w) for w in argv)


class FilterModule:
    """dgxspark.vllm.systemd_join."""

    def filters(self):
        return {"systemd_join": systemd_join}
