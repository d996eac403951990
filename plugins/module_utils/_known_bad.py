# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Known-bad releases of the host stack: a table of rows, each naming what it matches on a node.

A row (the table ships as data, roles/preflight/files/known_bad.yml)::

    id: kernel-7.0.0-1019-kho        # stable, what a user accepts the risk of
    match:                           # every key must match (AND); a key's specs: any may (OR)
      kernel: ["7.0.0-1019"]
      kho: ["on"]
    symptom: ...                     # what users saw, in a sentence
    fix: ...                         # what to do
    source: https://...              # the public thread

What is matched is a flat dict of facts read from a node (``kernel``, ``kho``, ``container_toolkit``,
``container_toolkit_mode``, ``driver``, ``bios_version``, ``nccl_version``, ``nccl_file``, ...). A spec is
``V`` (the version's numbered parts start with V's: ``7.0.0-1019`` matches ``7.0.0-1019-nvidia``),
``<V``, ``<=V``, ``>V``, ``>=V``, several of those joined by a comma (all must hold), or ``glob:PATTERN``
for text. A fact that was not read never matches: it is reported as unknown instead.
"""

from __future__ import annotations

import fnmatch
import re

ROW_KEYS = ("id", "match", "symptom", "fix", "source")
_OPS = ("<=", ">=", "<", ">", "==")


class KnownBadError(ValueError):
    """The table holds a row it cannot use."""


def numbers(version):
    """The numbered parts of a version string: '7.0.0-1019-nvidia' -> (7, 0, 0, 1019)."""
    return tuple(int(n) for n in re.findall(r"\d+", str(version)))


def _one(spec, value):
    spec = spec.strip()
    if spec.startswith("glob:"):
        return fnmatch.fnmatchcase(str(value), spec[5:])
    for op in _OPS:
        if spec.startswith(op):
            want, have = numbers(spec[len(op):]), numbers(value)
            if not want or not have:
                return False
            return {"<=": have <= want, ">=": have >= want, "<": have < want, ">": have > want,
                    "==": have == want}[op]
    want, have = numbers(spec), numbers(value)
    if want:
        return have[:len(want)] == want
    return str(value) == spec


def matches(spec, value):
    """Whether a fact's value meets one spec (its comma-joined parts all hold)."""
    if value is None or value == "":
        return False
    if spec.startswith("glob:"):
        return _one(spec, value)
    return all(_one(part, value) for part in spec.split(","))


def check_table(table):
    """The table's rows, or KnownBadError naming the first row that lacks what a row needs."""
    if not isinstance(table, list):
        raise KnownBadError("the known-bad table must be a list of rows, got %s" % type(table).__name__)
    seen = set()
    for n, row in enumerate(table, 1):
        where = "row %d%s" % (n, " (%s)" % row.get("id") if isinstance(row, dict) and row.get("id") else "")
        if not isinstance(row, dict):
            raise KnownBadError("%s is not a mapping" % where)
        missing = [k for k in ROW_KEYS if not row.get(k)]
        if missing:
            raise KnownBadError("%s lacks %s" % (where, ", ".join(missing)))
        if row["id"] in seen:
            raise KnownBadError("%s: id %s is used twice" % (where, row["id"]))
        seen.add(row["id"])
        match = row["match"]
        if not isinstance(match, dict) or not all(isinstance(v, list) and v for v in match.values()):
            raise KnownBadError("%s: match must map each fact to a non-empty list of specs" % where)
    return table


def evaluate(table, facts, accepted=()):
    """Rows of the table that match a node's facts: hits (with ``accepted`` where the user took the risk)
    and the facts a row needed that were not read (``unknown``: row id -> fact names)."""
    hits, unknown = [], {}
    for row in check_table(table):
        missing = [k for k in row["match"] if facts.get(k) in (None, "")]
        if missing:
            unknown[row["id"]] = missing
            continue
        if all(any(matches(spec, facts[k]) for spec in specs) for k, specs in row["match"].items()):
            hits.append({"id": row["id"], "facts": {k: facts[k] for k in row["match"]},
                         "symptom": row["symptom"], "fix": row["fix"], "source": row["source"],
                         "accepted": row["id"] in accepted})
    return {"hits": hits, "unknown": unknown}
