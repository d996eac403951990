# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A pipeline of local commands whose output is relayed into one or more sink
commands (e.g. `docker save | zstd` into `ssh worker docker load` for each
worker), counting the bytes on the way and writing nothing to disk."""

from __future__ import annotations

import errno
import os
import subprocess
import threading
import time


class _Tail(threading.Thread):
    """Drains a stream and keeps its last bytes (stderr of a pipeline stage)."""

    def __init__(self, stream, keep=4096):
        super().__init__(daemon=True)
        self.stream, self.keep, self.data = stream, keep, b""
        self.start()

    def run(self):
        for chunk in iter(lambda: self.stream.read(4096), b""):
            self.data = (self.data + chunk)[-self.keep:]

    def text(self):
        self.join(timeout=5)
        return self.data.decode("utf-8", "replace").strip()


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def relay(producers, sinks, chunk=1 << 20, progress=None, every=5.0):
    """Run producers [(name, argv), ...] as one pipe chain and copy its output into every sink
    [(name, argv[, filter]), ...]: the producers run once, however many sinks there are. A sink's
    filter (an object with feed(bytes) -> bytes) rewrites what that sink gets, e.g. dropping the
    layers its receiver already holds.

    Returns {sink name: (bytes sent, seconds, error text or "", the last 4 KiB of its stdout)}.
    A sink that goes away mid-stream (a cut connection) is dropped and reported as such; the
    others go on. When every sink is gone the producers are stopped.
    progress, when given, is called with the bytes read from the producers so far, at most every
    `every` seconds and once at the end (a long stream says how far it has come).
    """
    start = time.monotonic()
    read, reported = 0, start
    stages, source = [], None
    for name, argv in producers:
        proc = subprocess.Popen(argv, stdin=source if source is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if source is not None:
            source.close()  # the next stage owns it now; the previous one gets SIGPIPE if it dies
        stages.append((name, proc))
        source = proc.stdout
    outs = {}
    for name, argv, *filt in sinks:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
        outs[name] = {"proc": proc, "err": _Tail(proc.stderr), "out": _Tail(proc.stdout), "sent": 0, "broken": False,
                      "filter": filt[0] if filt else None}
    tails = {name: _Tail(proc.stderr) for name, proc in stages}
    live = list(outs.values())
    fd = source.fileno()
    # One sink without a filter: pipe to pipe inside the kernel (Linux, Python 3.10+), counted but
    # never copied through this process, which leaves the CPU to save, ssh and load.
    splice = getattr(os, "splice", None) if len(live) == 1 and live[0]["filter"] is None else None
    while live:
        if splice is not None:
            try:
                moved = splice(fd, live[0]["proc"].stdin.fileno(), chunk)
            except BrokenPipeError:
                live[0]["broken"] = True
                live = []
                break
            except OSError as exc:
                if exc.errno not in (errno.EINVAL, errno.ENOSYS):
                    raise
                splice = None  # not supported for these fds here: copy instead
                continue
            if not moved:
                break
            live[0]["sent"] += moved
            read += moved
        else:
            data = os.read(fd, chunk)
            if not data:
                break
            read += len(data)
            for sink in list(live):
                out = sink["filter"].feed(data) if sink["filter"] is not None else data
                try:
                    _write_all(sink["proc"].stdin.fileno(), out)
                    sink["sent"] += len(out)
                except BrokenPipeError:
                    sink["broken"] = True
                    live.remove(sink)
        if progress is not None and time.monotonic() - reported >= every:
            reported = time.monotonic()
            progress(read)
    if progress is not None:
        progress(read)
    for sink in outs.values():
        try:
            sink["proc"].stdin.close()
        except BrokenPipeError:
            sink["broken"] = True
    all_broken = all(sink["broken"] for sink in outs.values())
    if all_broken:
        for _name, proc in stages:
            proc.kill()
    source.close()
    codes = {name: proc.wait() for name, proc in stages}
    producer_errors = [] if all_broken else [
        "%s exited %d: %s" % (name, codes[name], tails[name].text()) for name, _proc in stages if codes[name] != 0]
    waiting = dict(outs)
    while waiting:  # each sink's time is when its own load ended
        for name, sink in list(waiting.items()):
            if sink["proc"].poll() is not None:
                sink["seconds"] = round(time.monotonic() - start, 1)
                del waiting[name]
        if waiting:
            time.sleep(0.05)
    result = {}
    for name, sink in outs.items():
        code = sink["proc"].returncode
        errors = list(producer_errors)
        if code != 0:
            errors.append("%s exited %d: %s" % (name, code, sink["err"].text() or sink["out"].text()))
        if sink["broken"] and not errors:
            errors.append("the connection closed during the transfer")
        result[name] = (sink["sent"], sink["seconds"], "; ".join(errors), sink["out"].text())
    return result
