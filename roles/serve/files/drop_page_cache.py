"""Drop the page cache on every node of the Ray cluster, right before the engine starts (role dgxspark.vllm.serve).

A GB10's CUDA counts the page cache as used memory (vllm-project/vllm#35313; NVIDIA's DGX Spark troubleshooting
pages give the same flush), so weights or an image archive read since boot make the engine's start-up check refuse
gpu-memory-utilization 0.93. The engine's ranks start on every node, so the cache goes on every node: one task pinned
to each live Ray node, in its privileged container. Run by the engine unit's ExecStartPre in the Ray head container
(python3 - < this file); it never fails the start (a node it cannot reach or a container that may not write
/proc/sys is named, and the engine's own check then speaks).

Before the drop, each node's ranks of the engine that just ended go: a rank is a Ray actor, and Ray ends the actors
of a dead engine only when it notices the death, seconds later under load. Until then such a rank holds its share of
the GPU's memory and may still be reading weights, which then sit in the page cache the drop was meant to empty.
The new engine has not started yet (this runs in its ExecStartPre), so every rank found is a leftover.
"""
import os
import signal
import socket
import sys
import time

DROP = "/proc/sys/vm/drop_caches"
# Ray titles an actor's process ray::<class>[.<method>]: vLLM's rank actors (the v2 Ray executor's, the older one's).
RANK_TITLES = ("ray::RayWorkerProc", "ray::RayWorkerWrapper")


def ranks(proc="/proc", own=None):
    """The live rank actors on this node, as (pid, title)."""
    found = []
    for entry in os.listdir(proc):
        if not entry.isdigit() or int(entry) == own:
            continue
        try:
            with open(os.path.join(proc, entry, "cmdline"), "rb") as handle:
                title = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(os.path.join(proc, entry, "stat"), "rb") as handle:
                zombie = handle.read().rsplit(b")", 1)[-1].split()[:1] == [b"Z"]
        except OSError:
            continue
        if title.split(" ")[0].split(".")[0] in RANK_TITLES and not zombie:
            found.append((int(entry), title.split(" ")[0]))
    return found


def end_ranks(grace=10.0, proc="/proc"):
    """End the ranks an earlier engine left on this node: Ray's own cleanup gets `grace` seconds, then SIGKILL.
    Returns what was found, as "pid title (how it ended)"."""
    left = ranks(proc, os.getpid())
    if not left:
        return []
    start = time.monotonic()
    ended = {}
    while left and time.monotonic() - start < grace:
        time.sleep(0.2)
        live = {pid for pid, _title in ranks(proc, os.getpid())}
        for pid, title in left:
            if pid not in live:
                ended[pid] = "%d %s (ended by Ray after %.1f s)" % (pid, title, time.monotonic() - start)
        left = [(pid, title) for pid, title in left if pid in live]
    for pid, title in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        ended[pid] = "%d %s (killed after %.0f s)" % (pid, title, grace)
    deadline = time.monotonic() + 5
    killed = {pid for pid, _title in left}
    while time.monotonic() < deadline and killed & {pid for pid, _title in ranks(proc, os.getpid())}:
        time.sleep(0.1)
    return [ended[pid] for pid in sorted(ended)]


def meminfo_mib(field):
    with open("/proc/meminfo", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) // 1024
    return -1


def drop():
    """On one node: end an earlier engine's ranks, write back dirty pages, then drop clean ones; the host, MemFree
    before and after (MiB) and the ranks ended."""
    ended = end_ranks()
    before = meminfo_mib("MemFree")
    os.sync()
    with open(DROP, "w", encoding="ascii") as handle:
        handle.write("3\n")
    return socket.gethostname(), before, meminfo_mib("MemFree"), ended


def main(ray, timeout=60):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # pylint: disable=import-outside-toplevel
    ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
    task = ray.remote(num_cpus=0, max_retries=0)(drop)
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    refs = [(node.get("NodeManagerAddress", node["NodeID"]),
             task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)).remote())
            for node in nodes]
    failed = 0
    for address, ref in refs:
        try:
            host, before, after, ended = ray.get(ref, timeout=timeout)
            if ended:
                print("ranks an earlier engine left on %s (%s), ended before the drop: %s"
                      % (host, address, "; ".join(ended)))
            print("page cache dropped on %s (%s): MemFree %d -> %d MiB" % (host, address, before, after))
        except Exception as exc:  # pylint: disable=broad-except
            failed += 1
            print("page cache NOT dropped on %s: %s (the engine's start-up check may then refuse the memory; "
                  "drop it by hand: sync; echo 3 > %s)" % (address, str(exc).splitlines()[-1] if str(exc) else
                                                           type(exc).__name__, DROP))
    return failed


if __name__ == "__main__":
    import ray as _ray  # pylint: disable=import-error
    sys.exit(1 if main(_ray) else 0)
