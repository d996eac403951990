# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A pipeline of local commands whose output is relayed into a sink command
(e.g. `docker save | zstd` into `ssh worker docker load`), counting the bytes
on the way and writing nothing to disk."""

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


def relay(producers, sink_name, sink_argv, chunk=1 << 20):
    """Run producers [(name, argv), ...] as a pipe chain and relay its output into sink_argv.

    Returns (bytes sent, seconds, error text or "", the last 4 KiB of the sink's stdout).
    A sink that goes away mid-stream (a cut connection) stops the producers and is
    reported as such.
    """
    start = time.monotonic()
    stages, source = [], None
    for name, argv in producers:
        proc = subprocess.Popen(argv, stdin=source if source is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if source is not None:
            source.close()  # the next stage owns it now; the previous one gets SIGPIPE if it dies
        stages.append((name, proc))
        source = proc.stdout
    sink = subprocess.Popen(sink_argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, bufsize=0)
    stages.append((sink_name, sink))
    tails = {name: _Tail(p.stderr) for name, p in stages}
    out_tail = _Tail(sink.stdout)
    sent, broken = 0, False
    fd, sink_fd = source.fileno(), sink.stdin.fileno()
    # Pipe to pipe inside the kernel (Linux, Python 3.10+): the bytes are counted but
    # never copied through this process, which leaves the CPU to save, ssh and load.
    splice = getattr(os, "splice", None)
    while True:
        if splice is not None:
            try:
                moved = splice(fd, sink_fd, chunk)
            except BrokenPipeError:
                broken = True
                break
            except OSError as exc:
                if exc.errno not in (errno.EINVAL, errno.ENOSYS):
                    raise
                splice = None  # not supported for these fds here: copy instead
                continue
            if not moved:
                break
            sent += moved
            continue
        data = os.read(fd, chunk)
        if not data:
            break
        try:
            view = memoryview(data)
            while view:
                view = view[sink.stdin.write(view):]
        except BrokenPipeError:
            broken = True
            break
        sent += len(data)
    try:
        sink.stdin.close()
    except BrokenPipeError:
        broken = True
    if broken:
        for _name, p in stages[:-1]:
            p.kill()
    source.close()
    codes = {name: p.wait() for name, p in stages}
    seconds = round(time.monotonic() - start, 1)
    errors = []
    for name, p in stages:
        if codes[name] != 0 and not (broken and p is not sink):
            errors.append("%s exited %d: %s" % (name, codes[name], tails[name].text() or out_tail.text()))
    if broken and not errors:
        errors.append("the connection closed during the transfer")
    return sent, seconds, "; ".join(errors), out_tail.text()
