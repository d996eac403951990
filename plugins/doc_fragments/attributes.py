# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The attributes every module of the collection shares; a module states only where it differs.

List C(dgxspark.vllm.attributes.read_only) before C(dgxspark.vllm.attributes): Ansible merges fragments in order and
keeps what an earlier one (or the module itself) already set."""

from __future__ import annotations


class ModuleDocFragment:
    # Runs on the node it is given (posix), supports check mode fully, shows no diff unless it says so.
    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second invocation indicates no change.
    support: full
  platform:
    support: full
    platforms: posix
"""

    # A module that only reads the node.
    READ_ONLY = r"""
attributes:
  idempotent:
    description: It only reads.
    support: full
"""
