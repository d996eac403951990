# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The serving watchdog's judgement: when a serving engine is hung, and whether it may be restarted.

Shipped next to the watchdog daemon (roles/watchdog/files) and unit-tested here. A hang is declared on
evidence, never on one slow answer: /health keeps answering, the canary (a few tokens with a deadline)
fails on every check for `hang_seconds`, and vLLM's own token counters did not move meanwhile. An engine
that produces tokens while the canary waits is busy (a long request in flight), not hung.

A start can hang too (ranks that never come up, a clean-up that never ends): /health stays silent while the
engine's unit stays active, so systemd, which restarts only an engine that exits, never acts. Silent for
`start_seconds` over at least `min_failures` checks is a hang as well.
"""

from __future__ import annotations

import re

# vLLM's Prometheus names (its /metrics), summed over their label sets.
RUNNING = "vllm:num_requests_running"
TOKEN_COUNTERS = ("vllm:generation_tokens_total", "vllm:prompt_tokens_total")
# The GPU watch's finding for a wedged clock (module_utils/_gpu_watch.py, its state.json "findings").
WEDGED_FINDING = "wedged"
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def parse_metrics(text):
    """{name: value summed over its label sets} of the names the judgement reads; absent names are left out."""
    wanted = (RUNNING,) + TOKEN_COUNTERS
    values = {}
    for line in (text or "").splitlines():
        m = _SAMPLE.match(line)
        if not m or m.group(1) not in wanted:
            continue
        try:
            values[m.group(1)] = values.get(m.group(1), 0.0) + float(m.group(3))
        except ValueError:
            continue
    return values


def tokens(metrics):
    """Tokens the engine has processed so far (prompt + generated), or None when /metrics said nothing."""
    found = [metrics[k] for k in TOKEN_COUNTERS if k in metrics]
    return sum(found) if found else None


def moved(before, after):
    """Whether the engine processed tokens between two readings of tokens() (False when either said nothing)."""
    return before is not None and after is not None and after > before


class Judge:
    """Observations in, a verdict out. An observation: {"t", "health" (HTTP status, 0: no answer),
    "canary_ok", "canary_error", "tokens" (or None), "running" (or None)}; "canary_skipped" when tokens
    moved since the last check, which proves the engine steps as well as a canary would."""

    def __init__(self, hang_seconds, min_failures=2, start_seconds=0):
        self.hang_seconds = float(hang_seconds)
        self.min_failures = int(min_failures)
        self.start_seconds = float(start_seconds)  # 0: a silent /health is never judged
        self.failing = []  # the observations since the canary last succeeded, all with /health 200
        self.silent = []  # the observations since /health last answered 200 (the caller resets on an inactive unit)

    def add(self, obs):
        if obs["canary_ok"] or obs["health"] != 200:
            self.failing = []
        else:
            self.failing.append(obs)
        self.silent = self.silent + [obs] if obs["health"] != 200 else []

    def reset(self):
        self.failing = []
        self.silent = []

    def verdict(self, last):
        """{"state": serving|down|busy|suspect|hung, "why": text, "since": t or None} for the newest observation."""
        if last["health"] != 200:
            span = last["t"] - self.silent[0]["t"] if self.silent else 0.0
            if self.start_seconds > 0 and len(self.silent) >= self.min_failures and span >= self.start_seconds:
                why = ("a start that hangs: /health has answered %s for %.0f s (%d checks) while the engine's unit "
                       "stayed active, and systemd restarts only an engine that exits"
                       % (last["health"] or "nothing", span, len(self.silent)))
                return {"state": "hung", "since": self.silent[0]["t"], "why": why}
            return {"state": "down", "why": "/health answers %s: the engine is down or loading (its unit restarts it)"
                    % (last["health"] or "nothing"), "since": None}
        if last["canary_ok"]:
            why = ("the engine processed tokens since the last check (no canary sent: it would queue behind them)"
                   if last.get("canary_skipped") else "the canary answered")
            return {"state": "serving", "why": why, "since": None}
        first = self.failing[0]
        span = last["t"] - first["t"]
        moved = (first["tokens"] is not None and last["tokens"] is not None and last["tokens"] > first["tokens"])
        if moved:
            return {"state": "busy", "since": first["t"], "why": (
                "the canary has failed for %.0f s (%s), but the engine processed %d tokens meanwhile: busy, not hung"
                % (span, last["canary_error"], last["tokens"] - first["tokens"]))}
        flat = "its token counters did not move" if first["tokens"] is not None else "no token counters to read"
        why = "/health answers 200, the canary has failed %d times over %.0f s (last: %s), %s%s" % (
            len(self.failing), span, last["canary_error"], flat,
            "" if last.get("running") is None else " (its last report: %d requests running)" % last["running"])
        if len(self.failing) >= self.min_failures and span >= self.hang_seconds:
            return {"state": "hung", "why": why, "since": first["t"]}
        return {"state": "suspect", "why": why, "since": first["t"]}


def budget_left(restarts, now, budget, window):
    """Restarts still allowed now: `budget` per `window` seconds, counting the restarts (times) inside it."""
    return int(budget) - len([t for t in restarts if now - t < float(window)])


def wedged(gpu_states):
    """[(node, gpu, why)] of the GPU watch's wedged-clock findings in {node: state.json dict}: a restart
    does not clear a wedged clock (the field report: only a full AC power-cycle does), so the watchdog reports it instead."""
    found = []
    for node, state in sorted((gpu_states or {}).items()):
        for finding in (state or {}).get("findings", []):
            if finding.get("finding") == WEDGED_FINDING:
                found.append((node, finding.get("gpu"), finding.get("why", "")))
    return found


def prometheus_text(state, labels):
    """The watchdog's state as Prometheus text (node_exporter's textfile collector)."""
    lab = ",".join('%s="%s"' % (k, str(v).replace("\\", "\\\\").replace('"', '\\"')) for k, v in sorted(labels.items()))

    def line(name, value, extra=""):
        inner = ",".join(x for x in (lab, extra) if x)
        return "%s{%s} %s" % (name, inner, value)

    out = ["# HELP dgxspark_watchdog_state 1 for the watchdog's current verdict on the endpoint.",
           "# TYPE dgxspark_watchdog_state gauge"]
    out += [line("dgxspark_watchdog_state", int(state.get("state") == s), 'state="%s"' % s)
            for s in ("serving", "down", "busy", "suspect", "hung", "recovering", "held", "wedged")]
    out += ["# HELP dgxspark_watchdog_restarts_total Group restarts the watchdog made after a hang.",
            "# TYPE dgxspark_watchdog_restarts_total counter",
            line("dgxspark_watchdog_restarts_total", int(state.get("restarts_total", 0))),
            "# HELP dgxspark_watchdog_hangs_total Hangs the watchdog declared.",
            "# TYPE dgxspark_watchdog_hangs_total counter",
            line("dgxspark_watchdog_hangs_total", int(state.get("hangs_total", 0))),
            "# HELP dgxspark_watchdog_gave_up 1 when the restart budget is spent: a hung pair waits for a person.",
            "# TYPE dgxspark_watchdog_gave_up gauge",
            line("dgxspark_watchdog_gave_up", int(bool(state.get("gave_up")))),
            "# HELP dgxspark_watchdog_canary_seconds How long the last canary took (its deadline when it failed).",
            "# TYPE dgxspark_watchdog_canary_seconds gauge",
            line("dgxspark_watchdog_canary_seconds", "%.3f" % float(state.get("canary_seconds") or 0.0)),
            "# HELP dgxspark_watchdog_updated_seconds When the watchdog last checked (Unix time).",
            "# TYPE dgxspark_watchdog_updated_seconds gauge",
            line("dgxspark_watchdog_updated_seconds", "%.0f" % float(state.get("updated_at") or 0.0))]
    return "\n".join(out) + "\n"
