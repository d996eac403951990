# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The source of a module_utils file, to run it on a node (python3 -c, or exec'd from stdin)."""

from __future__ import annotations

import sys


def source_of(name):
    """The text of the module named name, as imported here (from AnsiballZ's zip too)."""
    module = sys.modules[name]
    loader = getattr(module, "__loader__", None)
    if loader is not None and hasattr(loader, "get_source"):
        text = loader.get_source(name)
        if text:
            return text
    with open(module.__file__, "r", encoding="utf-8") as handle:
        return handle.read()
