"""dgxspark GPU watch: samples every GPU of this node while it serves and flags the field report's
silent failures (a wedged clock, a rank stuck in a collective). Installed and configured by the
dgxspark.vllm.gpu_watch role; the judgement is _gpu_watch.py next to this file.

Every sample: NVML read in this process (libnvidia-ml, what nvidia-smi itself reads), or where NVML
cannot be loaded one `nvidia-smi --query-gpu` call. Writes the state (JSON, read by diagnose.yml) and the
Prometheus text (node_exporter's textfile collector) atomically, and one journal line per finding
raised or cleared.
"""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _gpu_watch as watch  # noqa: E402  pylint: disable=wrong-import-position
from _daemon import ERR, NOTICE, log, write_atomic  # noqa: E402  pylint: disable=wrong-import-position


def sample(nvidia_smi, fields):
    out = subprocess.run([nvidia_smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=20, check=False)
    if out.returncode != 0:
        raise RuntimeError((out.stdout + out.stderr).strip() or "nvidia-smi exited %d" % out.returncode)
    return watch.parse_sample(out.stdout, fields)


def reader(cfg, fields):
    """(name, function returning {gpu: sample}): NVML when it loads (source auto or nvml), else nvidia-smi."""
    source = cfg.get("source", "auto")
    if source in ("auto", "nvml"):
        try:
            return "NVML", watch.NvmlReader().sample
        except (watch.NvmlError, AttributeError) as exc:
            if source == "nvml":
                log(ERR, "NVML cannot be used: %s (set the source to auto or nvidia-smi)" % exc)
                sys.exit(1)
            log(NOTICE, "NVML cannot be used (%s): sampling with nvidia-smi" % exc)
    return "nvidia-smi", lambda: sample(cfg.get("nvidia_smi", "nvidia-smi"), fields)


def main():
    with open(sys.argv[1]) as handle:
        cfg = json.load(handle)
    window = watch.Window(**cfg.get("thresholds", {}))
    labels = dict(cfg.get("labels", {}), node=cfg["node"])
    fields = list(watch.WATCH_FIELDS)
    interval = float(cfg.get("interval", 10))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    source, read = reader(cfg, fields)
    log(NOTICE, "watching with %s every %s s: wedge after %s s, busy at low power after %s s" % (
        source, interval, window.settings["wedge_seconds"], window.settings["stuck_seconds"]))
    raised, samples, error = set(), 0, None
    while True:
        started = time.time()
        try:
            gpus = read()
            error = None
        except (RuntimeError, watch.NvmlError) as exc:
            text = str(exc)
            if watch.OLD_REASONS_FIELD not in fields and "clocks_event_reasons.active" in text:
                fields[-1] = watch.OLD_REASONS_FIELD  # a driver from before the rename
                continue
            if text != error:
                log(ERR, "%s failed: %s" % (source, text))
            error, gpus = text, {}
        except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
            if str(exc) != error:
                log(ERR, "%s failed: %s" % (source, exc))
            error, gpus = str(exc), {}
        samples += 1
        window.add(started, gpus)
        report = window.judge(started)
        now_raised = {(f["gpu"], f["finding"]): f for f in report["findings"]}
        for key in sorted(set(now_raised) - raised):
            log(ERR, "GPU %s %s: %s" % (key[0], key[1], now_raised[key]["why"]))
        for key in sorted(raised - set(now_raised)):
            log(NOTICE, "GPU %s %s cleared" % key)
        raised = set(now_raised)
        state = dict(report, node=cfg["node"], updated_at=started, interval=interval, source=source,
                     settings=window.settings, error=error)
        write_atomic(cfg.get("state_file"), json.dumps(state, indent=1, sort_keys=True) + "\n")
        write_atomic(cfg.get("textfile"), watch.prometheus_text(report, labels, samples, started))
        time.sleep(max(0.0, interval - (time.time() - started)))


if __name__ == "__main__":
    main()
