"""dgxspark serving watchdog: keeps the endpoint answering. Installed and configured by the
dgxspark.vllm.watchdog role on the head; the judgement is _watchdog.py next to this file, the
head-to-worker SSH contract _ssh.py (both the collection's module_utils).

Every interval: /health, vLLM's /metrics and a canary (a few tokens with a deadline) through the served
port. A hang is declared on evidence (_watchdog.Judge): /health answering, the canary failing for the
hang window and the token counters still. Then the evidence is recorded (journal, state.json,
Prometheus text), the GPU watch's findings are read from every node (a wedged clock is reported, not
restarted: a restart does not clear it), and the whole group is restarted in the deployment's order,
counted against a budget; out of budget it stops restarting and raises dgxspark_watchdog_gave_up.
It does nothing while site.yml or upgrade.yml hold the deployment (their lock file), nor while the
engine unit is not active (stopped on purpose, or restarting by itself).
"""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _ssh  # noqa: E402  pylint: disable=wrong-import-position
import _watchdog as wd  # noqa: E402  pylint: disable=wrong-import-position
from _daemon import ERR, NOTICE, WARNING, log, write_atomic  # noqa: E402  pylint: disable=wrong-import-position


def api_key(path):
    """The engine's bearer key from the serve role's root-only environment file (never logged)."""
    try:
        with open(path) as handle:
            for line in handle:
                if line.startswith("VLLM_API_KEY="):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return ""


def http(url, key="", body=None, timeout=5.0):
    """(status, text); status 0 when nothing answered within the timeout."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    if data:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")[:300]
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return 0, str(getattr(exc, "reason", exc))


def served_model(url, key):
    """The engine's first served name (/v1/models), for a canary setting none."""
    status, text = http(url + "/v1/models", key, timeout=5)
    try:
        return json.loads(text)["data"][0]["id"] if status == 200 else ""
    except (ValueError, KeyError, IndexError, TypeError):
        return ""


def canary(cfg, key):
    """(ok, seconds, error): a few tokens of the served model within the deadline."""
    started = time.time()
    body = {"prompt": "ping", "max_tokens": int(cfg.get("canary_tokens", 4)), "temperature": 0}
    model = cfg.get("model") or served_model(cfg["url"], key)
    if model:
        body["model"] = model
    status, text = http(cfg["url"] + "/v1/completions", key, body, timeout=float(cfg["canary_timeout"]))
    took = time.time() - started
    if status == 200:
        try:
            if json.loads(text).get("choices"):
                return True, took, ""
        except ValueError:
            pass
        return False, took, "an answer without choices"
    if status == 0:
        return False, took, "no answer within %s s (%s)" % (cfg["canary_timeout"], text)
    return False, took, "HTTP %d: %s" % (status, text[:200])


def unit_active(unit):
    return subprocess.run(["systemctl", "is-active", "--quiet", unit], check=False).returncode == 0


def held(cfg, now):
    """The deployment lock's age when site.yml/upgrade.yml hold it (a lock older than lock_max_age is stale)."""
    try:
        age = now - os.stat(cfg["lock_file"]).st_mtime
    except OSError:
        return None
    return age if age < float(cfg.get("lock_max_age", 7200)) else None


def on_node(cfg, node, argv, timeout=240):
    """Run argv as root on a node of the pair: here on the head, over the collection's SSH contract on a worker
    (the node_trust key and known_hosts, as the admin user with sudo -n)."""
    if node["name"] == cfg["node"]:
        cmd = argv
    else:
        ssh = cfg["ssh"]
        cmd = _ssh.ssh_argv(node["address"], ["sudo", "-n"] + argv, user=ssh["user"], key=ssh["key"],
                            known_hosts=ssh["known_hosts"], host_key_checking=ssh.get("host_key_checking", "strict"))
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        return out.returncode, (out.stdout + out.stderr).strip()
    except subprocess.TimeoutExpired:
        return 124, "timed out after %d s" % timeout


def gpu_states(cfg):
    """{node: the GPU watch's state.json} from every node (what could be read)."""
    found = {}
    for node in cfg["nodes"]:
        rc, text = on_node(cfg, node, ["cat", cfg["gpu_watch_state"]], timeout=30)
        if rc == 0:
            try:
                found[node["name"]] = json.loads(text)
            except ValueError:
                pass
    return found


def restart_steps(cfg):
    """The deployment's order (roles/deployment stop, then ordered_restart's start): the engine first, the API
    server before headless ranks, then Ray, workers before the head; started back in the reverse order."""
    head = [n for n in cfg["nodes"] if n["name"] == cfg["node"]]
    workers = [n for n in cfg["nodes"] if n["name"] != cfg["node"]]
    engine, ray = cfg["engine_unit"], cfg["ray_unit"]
    if cfg["backend"] == "ray":
        stop = [(head, engine), (workers, ray), (head, ray)]
    else:
        stop = [(head, engine), (workers, engine)]
    return ([("stop", nodes, unit) for nodes, unit in stop]
            + [("start", nodes, unit) for nodes, unit in reversed(stop)])


def restart_group(cfg):
    """Every step of restart_steps(); (ok, what happened)."""
    done = []
    for verb, nodes, unit in restart_steps(cfg):
        for node in nodes:
            rc, text = on_node(cfg, node, ["systemctl", verb, unit + ".service"])
            done.append("%s %s on %s: %s" % (verb, unit, node["name"], "ok" if rc == 0 else "rc %d %s" % (rc, text[-200:])))
            if rc != 0:
                return False, "; ".join(done)
    return True, "; ".join(done)


def engine_log(cfg, lines=30):
    out = subprocess.run(["journalctl", "-u", cfg["engine_unit"], "--no-pager", "-o", "cat", "-n", str(lines)],
                         capture_output=True, text=True, check=False)
    return out.stdout.splitlines()[-lines:]


class Watchdog:
    def __init__(self, cfg):
        self.cfg = cfg
        self.judge = wd.Judge(cfg["hang_seconds"], cfg.get("min_failures", 2), cfg.get("start_timeout", 0))
        self.baseline = None  # the engine's token count at the last check
        self.state = {"state": "starting", "restarts": [], "restarts_total": 0, "hangs_total": 0, "gave_up": False,
                      "last_hang": None}
        try:
            with open(cfg["state_file"]) as handle:
                old = json.load(handle)
            # A restart of the watchdog keeps its budget and its counts.
            for k in ("restarts", "restarts_total", "hangs_total", "gave_up", "last_hang"):
                if k in old:
                    self.state[k] = old[k]
        except (OSError, ValueError):
            pass

    def save(self, now):
        self.state["updated_at"] = now
        # The Prometheus text first: whoever reads a verdict in state.json finds it in the text too.
        labels = dict(self.cfg.get("labels", {}), node=self.cfg["node"])
        write_atomic(self.cfg.get("textfile"), wd.prometheus_text(self.state, labels))
        write_atomic(self.cfg["state_file"], json.dumps(self.state, indent=1, sort_keys=True) + "\n")

    def metrics(self):
        return wd.parse_metrics(http(self.cfg["url"] + "/metrics", timeout=5)[1])

    def observe(self, key):
        """/health and /metrics; then a canary unless tokens came out since the last check (proof enough that the
        engine steps, and the recipe serves one sequence at a time: a canary would hold up a user's request)."""
        cfg = self.cfg
        now = time.time()
        health = http(cfg["url"] + "/health", timeout=5)[0]
        metrics = self.metrics() if health == 200 else {}
        tokens = wd.tokens(metrics)
        obs = {"t": now, "health": health, "tokens": tokens, "running": metrics.get(wd.RUNNING), "canary_ok": False, "canary_error": "", "canary_seconds": 0.0}
        if health == 200 and wd.moved(self.baseline, tokens):
            obs.update(canary_ok=True, canary_skipped=True)
        elif health == 200:
            ok, took, error = canary(cfg, key)
            obs.update(canary_ok=ok, canary_error=error, canary_seconds=took)
            if ok:
                # The canary's own tokens are not the engine's traffic: the next check counts from after it.
                tokens = wd.tokens(self.metrics())
        self.baseline = tokens
        return obs

    def hung(self, verdict, obs):
        cfg, state = self.cfg, self.state
        now = time.time()
        state["hangs_total"] += 1
        evidence = {"declared_at": now, "since": verdict["since"], "why": verdict["why"], "engine_log": engine_log(cfg)}
        log(ERR, "hang: " + verdict["why"])
        states = gpu_states(cfg)
        evidence["gpu_findings"] = {n: s.get("findings", []) for n, s in states.items()}
        bad_clock = wd.wedged(states)
        if bad_clock:
            evidence["action"] = "none: a wedged GPU clock, which a restart does not clear (a full AC power-cycle does)"
            state.update(state="wedged", last_hang=evidence)
            log(ERR, "not restarting: wedged GPU clock on %s; power-cycle that node (AC off; a restart or reboot does not clear it)"
                % ", ".join("%s GPU %s" % (n, g) for n, g, _why in bad_clock))
            return
        # A node that cannot be reached (down, its sudo needs a password) would leave the group half stopped.
        unreachable = ["%s (%s)" % (n["name"], text[-200:] or "rc %d" % rc) for n in cfg["nodes"] if n["name"] != cfg["node"]
                       for rc, text in [on_node(cfg, n, ["true"], timeout=30)] if rc != 0]
        if unreachable:
            evidence["action"] = "none: cannot run systemctl on " + "; ".join(unreachable)
            state.update(state="hung", last_hang=evidence)
            log(ERR, "not restarting: %s. The watchdog logs in as %s with the node_trust key and runs sudo -n there"
                % (evidence["action"][6:], cfg["ssh"]["user"]))
            return
        if wd.budget_left(state["restarts"], now, cfg["budget"], cfg["budget_window"]) <= 0:
            evidence["action"] = "none: the restart budget is spent (%s per %s s)" % (cfg["budget"], cfg["budget_window"])
            if not state["gave_up"]:
                log(ERR, "not restarting: %s restarts in the last %s s already; the pair waits for a person "
                    "(journalctl -u %s, playbooks/diagnose.yml)" % (cfg["budget"], cfg["budget_window"], cfg["engine_unit"]))
            state.update(state="hung", gave_up=True, last_hang=evidence)
            return
        log(WARNING, "restarting the group in order: " + ", ".join(
            "%s %s" % (v, u) for v, _nodes, u in restart_steps(cfg)))
        state["restarts"] = [t for t in state["restarts"] if now - t < float(cfg["budget_window"])] + [now]
        state["restarts_total"] += 1
        state.update(state="recovering", last_hang=evidence)
        self.save(now)
        ok, steps = restart_group(cfg)
        evidence["restart"] = steps
        if not ok:
            evidence["action"] = "restart failed"
            log(ERR, "the restart failed: " + steps)
            return
        self.baseline = None  # the restarted engine proves itself with a canary
        deadline = now + float(cfg["recover_timeout"])
        key = api_key(cfg["key_file"])
        while time.time() < deadline:
            time.sleep(min(float(cfg["interval"]), 5.0))
            back = self.observe(key)
            if back["canary_ok"]:
                evidence.update(action="restarted", detected_after_s=round(now - verdict["since"], 1),
                                recovered_after_s=round(time.time() - now, 1))
                log(NOTICE, "serving again %.1f s after the restart (hang declared %.1f s after the canary first "
                    "failed)" % (evidence["recovered_after_s"], evidence["detected_after_s"]))
                state["state"] = "serving"
                return
        evidence["action"] = "restarted, not serving within %s s" % cfg["recover_timeout"]
        log(ERR, evidence["action"])

    def run(self):
        cfg = self.cfg
        interval = float(cfg["interval"])
        log(NOTICE, "watching %s every %s s: hang after %s s of failed canaries with still token counters, or %s s "
            "of a silent /health with the unit active (0: never); budget %s restarts per %s s"
            % (cfg["url"], interval, cfg["hang_seconds"], cfg.get("start_timeout", 0), cfg["budget"], cfg["budget_window"]))
        last = None
        while True:
            started = time.time()
            age = held(cfg, started)
            if age is not None:
                self.judge.reset()
                self.state["state"] = "held"
                if last != "held":
                    log(NOTICE, "a deployment run holds the pair (%s, %.0f s old): not acting" % (cfg["lock_file"], age))
            elif not unit_active(cfg["engine_unit"]):
                self.judge.reset()
                self.state["state"] = "down"
            else:
                obs = self.observe(api_key(cfg["key_file"]))
                self.judge.add(obs)
                verdict = self.judge.verdict(obs)
                self.state["canary_seconds"] = obs["canary_seconds"]
                self.state["verdict"] = verdict["why"]
                if verdict["state"] == "serving" and self.state["gave_up"]:
                    log(NOTICE, "serving again: the restart budget is open again")
                    self.state["gave_up"] = False
                if verdict["state"] != last and verdict["state"] in ("busy", "suspect"):
                    log(WARNING, verdict["why"])
                if verdict["state"] == "hung" and not self.state["gave_up"] and self.state["state"] != "wedged":
                    self.hung(verdict, obs)
                    self.judge.reset()
                elif verdict["state"] != "hung" or self.state["state"] not in ("wedged", "hung"):
                    self.state["state"] = verdict["state"]
            last = self.state["state"]
            self.save(started)
            time.sleep(max(0.0, interval - (time.time() - started)))


def main():
    with open(sys.argv[1]) as handle:
        cfg = json.load(handle)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    Watchdog(cfg).run()


if __name__ == "__main__":
    main()
