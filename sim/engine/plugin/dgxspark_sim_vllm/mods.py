"""Sim only: what each mod of the launcher's M3 b12x group does to vLLM, done to the sim's vLLM.

    python3 -m dgxspark_sim_vllm.mods NAME

The sim launcher checkout's mods (sim/launcher-standin/mods/*/run.sh) call this. Like the
launcher's mods, each finds its file through importlib, checks its anchor, patches it once
(a second run is a no-op) and exits non-zero with the reason when the anchor is gone.
* fix-minimax-m3-b12x-dense registers B12X in vLLM's attention backend registry (without it
  the real argument check refuses --attention-backend b12x);
* fix-minimax-m3-b12x-triton-prewarm hooks the b12x prewarm after the CPU worker's warm-up,
  with B12X_TRITON_PREWARM_STRICT deciding whether its errors stop the start;
* fix-prometheus-fastapi-routing behaves as the launcher's: it replaces the old routing block
  and raises SystemExit when neither the old nor the new block is there (a newer
  instrumentator), which kills the launch;
* the others leave a marker the faults plugin reads (faults.MODS) in the file the real mod patches.
"""
import importlib.util
import os
import py_compile
import sys

from dgxspark_sim_vllm.faults import MARK, MODS

REGISTRY_ANCHOR = (
    "    MINIMAX_M3_SPARSE = (\n"
    "        \"vllm.models.minimax_m3.common.sparse_attention.MiniMaxM3SparseBackend\"\n"
    "    )\n")
B12X_MEMBER = "    B12X = \"vllm.v1.attention.backends.b12x.B12xPagedAttentionBackend\"\n"
PREWARM_ANCHOR = (
    "        # Reset the seed to ensure that the random state is not affected by\n"
    "        # the model initialization and profiling.\n")
PREWARM_HOOK = (
    "        # sim mod fix-minimax-m3-b12x-triton-prewarm\n"
    "        if os.environ.get(\"B12X_TRITON_PREWARM\", \"1\") != \"0\":\n"
    "            try:\n"
    "                from dgxspark_sim_vllm.faults import prewarm\n"
    "                prewarm(self)\n"
    "            except Exception:\n"
    "                logger.exception(\"MiniMax-M3 b12x Triton prewarm failed\")\n"
    "                if os.environ.get(\"B12X_TRITON_PREWARM_STRICT\", \"0\") == \"1\":\n"
    "                    raise\n")
ROUTING_OLD = "            route_name = route.path\n"
ROUTING_NEW = "            route_name = getattr(route, \"path\", getattr(route, \"path_format\", \"\"))\n"
# Silent mods (a wrong answer, not a failed start, without them): marked only.
MARKED_ONLY = {
    "fix-minimax-m3-reasoning-parser-robustness": "reasoning/minimax_m3_reasoning_parser.py",
    "fix-minimax-m3-indexer-proj-bf16-load": "model_executor/layers/linear.py",
}


def vllm_file(rel):
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("vLLM is not importable")
    return os.path.join(list(spec.submodule_search_locations)[0], rel)


def write(path, text):
    with open(path, "w") as handle:
        handle.write(text)
    py_compile.compile(path, doraise=True)


def insert_after(path, anchor, addition, done_marker):
    text = open(path).read()
    if done_marker in text:
        print("%s: already patched" % path)
        return
    if text.count(anchor) != 1:
        raise SystemExit("%s: anchor found %d times, expected once" % (path, text.count(anchor)))
    write(path, text.replace(anchor, anchor + addition, 1))
    print("patched %s" % path)


def mark(name, rel):
    path = vllm_file(rel)
    if not os.path.isfile(path):
        raise SystemExit("missing %s" % path)
    text = open(path).read()
    if MARK + name in text:
        print("%s: already marked" % path)
        return
    write(path, text.rstrip("\n") + "\n" + MARK + name + "\n")
    print("marked %s" % path)


def prometheus():
    spec = importlib.util.find_spec("prometheus_fastapi_instrumentator.routing")
    if spec is None or not spec.origin:
        print("prometheus_fastapi_instrumentator routing.py not found, skipping")
        return
    text = open(spec.origin).read()
    if ROUTING_NEW in text:
        print("already applied: %s" % spec.origin)
    elif ROUTING_OLD in text:
        write(spec.origin, text.replace(ROUTING_OLD, ROUTING_NEW))
        print("patched %s" % spec.origin)
    else:
        raise SystemExit("Could not find expected prometheus_fastapi_instrumentator routing block")


def main(name):
    if name == "fix-minimax-m3-b12x-dense":
        insert_after(vllm_file("v1/attention/backends/registry.py"), REGISTRY_ANCHOR, B12X_MEMBER, "    B12X = ")
    elif name == "fix-minimax-m3-b12x-triton-prewarm":
        _prewarm()
    elif name == "fix-prometheus-fastapi-routing":
        prometheus()
    elif name in MODS:
        mark(name, MODS[name][0])
    elif name in MARKED_ONLY:
        mark(name, MARKED_ONLY[name])
    else:
        raise SystemExit("no sim stand-in for mod %s" % name)


def _prewarm():
    """Insert the hook before the seed reset of compile_or_warm_up_model, like the real mod after kernel_warmup."""
    path = vllm_file("v1/worker/cpu_worker.py")
    text = open(path).read()
    if "sim mod fix-minimax-m3-b12x-triton-prewarm" in text:
        print("%s: prewarm hook already installed" % path)
        return
    if text.count(PREWARM_ANCHOR) != 1:
        raise SystemExit("cpu_worker warm-up anchor count=%d" % text.count(PREWARM_ANCHOR))
    write(path, text.replace(PREWARM_ANCHOR, PREWARM_HOOK + PREWARM_ANCHOR, 1))
    print("patched %s: b12x Triton prewarm hook installed" % path)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python3 -m dgxspark_sim_vllm.mods MOD_NAME")
    main(sys.argv[1])
