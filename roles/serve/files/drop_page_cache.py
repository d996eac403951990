"""Drop the page cache on every node of the Ray cluster, right before the engine starts (role dgxspark.vllm.serve).

A GB10's CUDA counts the page cache as used memory (vllm-project/vllm#35313; NVIDIA's DGX Spark troubleshooting
pages give the same flush), so weights or an image archive read since boot make the engine's start-up check refuse
gpu-memory-utilization 0.93. The engine's ranks start on every node, so the cache goes on every node: one task pinned
to each live Ray node, in its privileged container. Run by the engine unit's ExecStartPre in the Ray head container
(python3 - < this file); it never fails the start (a node it cannot reach or a container that may not write
/proc/sys is named, and the engine's own check then speaks).
"""
import os
import socket
import sys

DROP = "/proc/sys/vm/drop_caches"


def meminfo_mib(field):
    with open("/proc/meminfo", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) // 1024
    return -1


def drop():
    """On one node: write back dirty pages, then drop clean ones; MemFree before and after (MiB)."""
    before = meminfo_mib("MemFree")
    os.sync()
    with open(DROP, "w", encoding="ascii") as handle:
        handle.write("3\n")
    return socket.gethostname(), before, meminfo_mib("MemFree")


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
            host, before, after = ray.get(ref, timeout=timeout)
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
