"""Sim only: the real vLLM engine (CPU build) fails where the DGX Spark pair fails.

Installed by the general plugin in every vLLM process (API server, engine core, every
rank, Ray actors included). Each model below is named after what it stands for; every
figure it produces is modelled, not measured.

* Env on every rank: the first vLLM process records the environment it was started
  with; each rank compares the environment *it* was started with (its node's
  container, plus what its launcher added) for the variables the b12x stack, torch and
  the BLAS libraries read at import. On the pair those reads happen before vLLM's Ray
  executor fills in the driver's values (with setdefault, after import; and Ray forces
  OMP_NUM_THREADS=1), so a value only the driver has never reaches a rank.
* Mods: the startup-critical mods of the M3 b12x group leave markers in vLLM's files
  (the sim launcher's mods, sim/launcher-standin); a rank whose vLLM lacks one fails
  with the error the real engine raises without it. (--attention-backend b12x needs no
  model here: the sim image's vLLM lacks the B12X registration, as the recipe's pinned
  vLLM does, and the real argument check refuses it until the dense mod adds it.)
* Triton cache: at the first step each rank looks for the field report's four kernels in
  its node's mounted cache. All present: fine. None: every rank compiles them, in
  lockstep, into its cache. Some ranks only: those JIT-compile mid-replay, the others
  wait in the collective past vLLM's 60 s broadcast warning, and every rank fails, so the
  engine dies (EngineDead) as the field report saw it.
* Clock: each step takes the time the node's stand-in GPU clock implies, so the
  lockstep pair runs at its slowest node (a healthy pair gives the field report's
  36.3 tok/s tg32, a head wedged at 611 MHz ~20); while it steps, the node's stand-in
  nvidia-smi reads the GPU as loaded, as a real one under the engine's load. As the modelled
  step is a sleep, vLLM's queue readers poll for its end every millisecond instead of spinning.
* Memory: a GB10's free memory at start, less the desktop the node's display manager
  holds, what Ray's object store takes beyond the launcher's 1 GiB and the page cache (the
  same unified memory; a GB10's CUDA counts the cache as used, vllm-project/vllm#35313):
  vLLM's startup check refuses a utilization above it, as on the field report's head with a
  desktop at util 0.93. The page cache is modelled from this node's real one: the share of
  the served model's weight files resident in it (mincore) times the recipe's weights_gib,
  so weights read since the last drop (the models phase hashes and copies them) hold memory. Then the KV cache: what a GB10 would keep for it at
  that utilization, from the recipe's memory constants (DGXSPARK_SIM_RECIPE_MEMORY) and the
  collection's own memory plan built into the image; none, and vLLM's own check refuses to
  start ("No available memory for the cache blocks").
* Hang: while the node's stand-in state holds an `engine-hang` file, the rank on that node stops its step
  loop before its next step (a stuck collective, a deadlocked replay): the other ranks wait for it, the API
  server's /health keeps answering and no token comes out. "once" in the file: this rank removes it and
  never steps again, so only a restart brings the engine back; anything else: the rank waits while the file
  is there (any engine on the node, a restarted one too).
* Start hang: while the node's stand-in state holds an `engine-start-hang` file, the rank on that node
  stops before its device starts: the engine never comes up and never exits, and /health stays silent.
* b12x JIT cache: the prewarm compiles b12x's kernels into ~/.cache/b12x unless they are
  there (a mounted cache keeps them across restarts; a container-local one recompiles).
"""
import ctypes
import glob
import hashlib
import json
import logging
import os
import time

SIM_STATE = "/etc/dgxspark-sim"  # the node's stand-in GPU, mounted into the serving containers
ENGINE_ENV = "DGXSPARK_SIM_ENGINE_ENV"
# Read at import by torch, the BLAS libraries, vLLM and the b12x glue.
IMPORT_TIME_PREFIXES = ("OMP_", "MKL_", "OPENBLAS_", "NUMEXPR_", "B12X_", "PYTORCH_", "VLLM_")
# Set per node or per process by design, or kept on the API server only.
PER_NODE = {"VLLM_HOST_IP", "VLLM_HOST_PORT", "VLLM_NIXL_SIDE_CHANNEL_HOST", "VLLM_API_KEY", "VLLM_DIST_IDENT",
            "VLLM_RINGBUFFER_WARNING_INTERVAL"}
KERNELS = ("eagle_prepare_next", "_nvfp4_write", "update_regular_decode", "rejection_sample")
PREWARMED = ("_compute_slot_mapping_kernel", "_nvfp4_write_triton", "_cache_write_nvfp4_kernel")
B12X_KERNELS = ("msa_decode_sm121", "dense_paged_sm121", "indexer_topk_sm121")
# Seconds a rank spends JIT-compiling mid-replay: past vLLM's 60 s shared-memory broadcast warning.
JIT_STALL_S = float(os.environ.get("DGXSPARK_SIM_JIT_STALL_S", "75"))
# The stand-in nvidia-smi's SM clock under load per state (sim/standins/nvidia_smi_standin.py).
CLOCK_UNDER_LOAD = {"healthy": 2405, "idle": 2405, "throttled": 670, "wedged": 611}
# Decode is mostly memory-bound: t(step) = T_MEM + T_CLOCK * 2405 / clock, fitted so that a healthy
# pair gives 36.3 tok/s (27.5 ms) and a head at 611 MHz 20 tok/s (50 ms) (field report).
T_MEM_S, T_CLOCK_S = 0.01982, 0.00773
PREFILL_TOK_S = 1000.0  # "Prefill stays ~1000 tok/s"
# The modelled clock runs this many times slower than the wall clock, so the host's real compute (a
# step of the tiny model on two shared cores took ~190 ms with three real-engine scenarios side by
# side) stays below the modelled step; the bench divides it out again (bench_time_scale, set from the
# same inventory value).
TIME_SCALE = float(os.environ.get("DGXSPARK_SIM_TIME_SCALE", "1"))
# GB10 memory at engine start (GiB): what CUDA reports, and what is free headless; a desktop holds
# ~0.7 more. Fitted to the field report: util 0.93 fails "by ~0.5 GB" with a desktop, passes headless.
# The field report ran the launcher's published mode (mp, no Ray): under Ray, what Ray's own processes
# hold on the node comes off too, measured live on the sim node (ray_own_gib), as it would on a GB10.
GB10_TOTAL_GIB, GB10_FREE_HEADLESS_GIB, DESKTOP_GIB = 121.69, 113.37, 0.7
# A Ray object store configured beyond the launcher's 1 GiB takes the rest of its size.
LAUNCHER_OBJECT_STORE_GIB = 1.0
# Ray's own processes, by their command lines: `ray start`, its daemons and Python services (GCS, raylet,
# dashboard, its agents, monitors, the client server: Ray's package or `ray::` titles) and any worker not running
# the engine. The engine's ranks are Ray actors too (ray::RayWorkerProc, ray::RayWorkerWrapper in older vLLM).
RAY_OWN = ("bin/ray ", "/site-packages/ray/", "-m ray.", "ray::")
ENGINE_RANK = "ray::RayWorker"


def is_ray_own(cmd):
    """Whether a process (its command line, arguments joined by spaces) is Ray's own, not the engine's."""
    return any(mark in cmd for mark in RAY_OWN) and not cmd.startswith(ENGINE_RANK)
# Startup-critical mods of the M3 b12x group: the file (under vllm/) their sim stand-in marks,
# and the error the real engine raises without them.
MODS = {
    "fix-minimax-m3-compressed-tensors-swiglu-clamp": (
        "model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/compressed_tensors_moe.py",
        "AssertionError: SWIGLUOAI_UNINTERLEAVE requires clamp_limit"),
    "fix-minimax-m3-b12x-indexer": (
        "models/minimax_m3/common/indexer.py",
        "NotImplementedError: indexer_kv_dtype='nvfp4' needs the (not-yet-added) CuteDSL indexer impl."),
    "fix-minimax-m3-b12x-msa": (
        "models/minimax_m3/common/sparse_attention.py",
        "ValueError: kv_cache_dtype nvfp4 is not supported by the MiniMax M3 sparse attention"),
    "fix-eagle3-draft-embed-quant": (
        "model_executor/models/llama_eagle3.py",
        "KeyError: 'model.embed_tokens.weight_packed' (the int4 drafter's embedding cannot load)"),
}
MARK = "# dgxspark-sim mod applied: "

HANG_FILE = "engine-hang"
# A start that hangs: while this file is there, the rank on that node stops before its device starts, so the
# engine never comes up and never exits (what a clean-up of refused ranks that never ends looks like).
START_HANG_FILE = "engine-start-hang"

_state = {"first_step": True}


class _Log:
    """vLLM's logger, made at the first message: the mods stand-in imports this module for its constants, and
    importing vLLM (torch with it) cost each of the nine mod runs seconds of a shared core."""
    _log = None

    def __getattr__(self, name):
        if _Log._log is None:
            try:
                from vllm.logger import init_logger  # pylint: disable=import-outside-toplevel
                _Log._log = init_logger("vllm.dgxspark_sim")
            except ImportError:
                _Log._log = logging.getLogger("dgxspark_sim")
        return getattr(_Log._log, name)


LOG = _Log()


def _initial_environ():
    """The environment this process was started with (not what Python set since)."""
    from dgxspark_sim_vllm.startenv import ENV  # pylint: disable=import-outside-toplevel
    return ENV


def _checked(env):
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME_PREFIXES) and k not in PER_NODE}


def _node():
    return os.environ.get("VLLM_HOST_IP") or os.uname().nodename


def check_env():
    """First process: record the env. Any later one (a rank): compare its own start env with it."""
    if ENGINE_ENV not in os.environ:
        os.environ[ENGINE_ENV] = json.dumps(_checked(_initial_environ()), sort_keys=True)
        return
    wanted = json.loads(os.environ[ENGINE_ENV])
    have = _initial_environ()
    wrong = {k: (v, have.get(k)) for k, v in wanted.items() if have.get(k) != v}
    if wrong:
        lines = ", ".join("%s=%s where the engine started with %s" % (k, "unset" if h is None else repr(h), repr(v))
                          for k, (v, h) in sorted(wrong.items()))
        raise RuntimeError(
            "dgxspark-sim (modelled): the rank on %s started with %s. torch, the BLAS libraries and the b12x glue "
            "read these at import, before vLLM's Ray executor fills in the driver's values (setdefault, after "
            "import; Ray sets OMP_NUM_THREADS=1 itself), so the recipe's env must be in every node's container."
            % (_node(), lines))


def _gpu_state():
    try:
        with open(os.path.join(SIM_STATE, "scenario.json")) as handle:
            return json.load(handle).get("gpu_state", "healthy")
    except (OSError, ValueError):
        return "healthy"


def _triton_dir():
    return os.path.join(os.environ.get("TRITON_CACHE_DIR") or os.path.expanduser("~/.triton/cache"))


def _has_kernel(root, name):
    for base, _dirs, files in os.walk(root):
        if name + ".json" in files and name + ".cubin" in files:
            return True
    return False


def _compile(names, why):
    """Write Triton cache entries for names, as a compile would (same bytes on every node)."""
    root = _triton_dir()
    for name in names:
        digest = hashlib.sha256(("sm_121/" + name).encode()).hexdigest()[:32]
        folder = os.path.join(root, digest)
        os.makedirs(folder, exist_ok=True)
        meta = {"name": name, "target": {"backend": "cuda", "arch": 121}, "dgxspark_sim": "modelled kernel"}
        for fname, data in ((name + ".json", json.dumps(meta)), ("__grp__" + name + ".json",
                                                               json.dumps({"child_paths": {name + ".cubin": ""}})),
                            (name + ".cubin", "modelled cubin of %s\n" % name)):
            with open(os.path.join(folder, fname), "w") as handle:
                handle.write(data)
    LOG.info("dgxspark-sim (modelled): compiled Triton kernels %s into %s (%s)", ", ".join(names), root, why)


def _b12x_cache():
    """b12x's own JIT kernels in ~/.cache/b12x (the launcher mounts it): compiled when absent."""
    root = os.path.expanduser("~/.cache/b12x")
    missing = [k for k in B12X_KERNELS if not os.path.exists(os.path.join(root, k + ".cubin"))]
    os.makedirs(root, exist_ok=True)
    for name in missing:
        with open(os.path.join(root, name + ".cubin"), "w") as handle:
            handle.write("modelled b12x kernel %s\n" % name)
    LOG.info("dgxspark-sim (modelled): b12x kernels: %d from %s, %d compiled", len(B12X_KERNELS) - len(missing),
             root, len(missing))


def prewarm(worker):
    """What the b12x Triton prewarm hook does (the sim's prewarm mod calls it): the helpers it covers."""
    _b12x_cache()
    missing = [n for n in PREWARMED if not _has_kernel(_triton_dir(), n)]
    if missing:
        _compile(missing, "b12x Triton prewarm")
    LOG.info("dgxspark-sim (modelled): b12x Triton prewarm done on %s; it does not cover %s", _node(),
             ", ".join(KERNELS))
    return worker


def _world_group():
    from vllm.distributed import get_world_group  # pylint: disable=import-outside-toplevel
    return get_world_group()


def first_step():
    """The first replay: ranks without the four kernels JIT them; uneven caches desync the ranks."""
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    group = _world_group()
    have = all(_has_kernel(_triton_dir(), k) for k in KERNELS)
    states = [None] * group.world_size
    dist.all_gather_object(states, {"node": _node(), "have": have}, group=group.cpu_group)
    if all(s["have"] for s in states):
        return
    if not any(s["have"] for s in states):
        _compile(list(KERNELS), "first replay on every rank at once: cold caches compile in lockstep")
        return
    warm = sorted({s["node"] for s in states if s["have"]})
    cold = sorted({s["node"] for s in states if not s["have"]})
    if have:
        # This rank replays from its cache and waits in the collective for the ranks that compile.
        time.sleep(JIT_STALL_S)
        raise RuntimeError("dgxspark-sim (modelled): the rank on %s waited %.0f s in the first replay's collective "
                           "for %s, which JIT-compiled %s mid-replay: the ranks desynchronised. Give every node "
                           "the same Triton cache before serving." % (_node(), JIT_STALL_S, ", ".join(cold),
                                                                      ", ".join(KERNELS)))
    LOG.error("dgxspark-sim (modelled): %s lacks Triton kernels %s that %s has: JIT-compiling them during the "
              "first replay while the other ranks replay from their caches", _node(), ", ".join(KERNELS),
              ", ".join(warm))
    time.sleep(JIT_STALL_S)
    _compile(list(KERNELS), "mid-replay JIT")
    raise RuntimeError("dgxspark-sim (modelled): ranks desynchronised in the first replay: %s compiled %s "
                       "mid-replay, %s did not. Give every node the same Triton cache before serving."
                       % (_node(), ", ".join(KERNELS), ", ".join(warm)))


def _busy():
    """Tell the node's stand-in nvidia-smi that its GPU is busy (at most once a second)."""
    now = time.time()
    if now - _state.get("busy_at", 0) < 1:
        return
    _state["busy_at"] = now
    try:
        with open(os.path.join(SIM_STATE, "engine-busy"), "a"):
            os.utime(os.path.join(SIM_STATE, "engine-busy"))
    except OSError:
        pass  # the stand-in GPU state is not mounted writable here


def hang_if_asked(name=HANG_FILE, what="its step loop (a hung rank; /health keeps answering)"):
    """Stop this rank where it is when the node's stand-in state asks for it (see the docstring): for good
    with "once", else for as long as the file is there."""
    path = os.path.join(SIM_STATE, name)
    try:
        with open(path) as handle:
            once = handle.read().strip() == "once"
    except OSError:
        return
    LOG.error("dgxspark-sim (modelled): the rank on %s stops %s (%s%s)", _node(), what, path,
              ", once" if once else ", while it is there")
    if once:
        try:
            os.remove(path)
        except OSError:
            pass
        while True:
            time.sleep(60)
    while os.path.exists(path):
        time.sleep(0.5)
    LOG.warning("dgxspark-sim (modelled): the rank on %s steps again (%s is gone)", _node(), path)


def pace(started, tokens, decode):
    """Let the step take the time this node's GPU clock implies (the slowest node sets the pair's pace)."""
    _busy()
    clock = CLOCK_UNDER_LOAD.get(_gpu_state(), CLOCK_UNDER_LOAD["healthy"])
    factor = CLOCK_UNDER_LOAD["healthy"] / clock
    want = ((T_MEM_S + T_CLOCK_S * factor) if decode else tokens / PREFILL_TOK_S * factor) * TIME_SCALE
    left = want - (time.monotonic() - started)
    if left > 0:
        time.sleep(left)


def _ray_object_store_gib():
    """Ray's object store on this rank's node (GiB), when the rank is a Ray actor."""
    try:
        import ray  # pylint: disable=import-outside-toplevel
        if not ray.is_initialized():
            return None
        node = ray.get_runtime_context().get_node_id()
        for entry in ray.nodes():
            if entry["NodeID"] == node:
                return entry["Resources"].get("object_store_memory", 0) / 1024 ** 3
    except Exception:  # not on Ray, or Ray cannot say: nothing to model
        return None
    return None


def _weight_files(model):
    """The served model's weight files on this node: a folder, or the Hugging Face cache's snapshot of a model id."""
    if os.path.isdir(model):
        roots = [model]
    else:
        hub = os.path.join(os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface")), "hub")
        roots = glob.glob(os.path.join(hub, "models--" + model.replace("/", "--"), "snapshots", "*"))
    files = set()
    for root in roots:
        files.update(os.path.realpath(path) for path in glob.glob(os.path.join(root, "**", "*.safetensors"),
                                                                    recursive=True))
    return sorted(files)


# What the kernel may read past a header read. Its read-ahead ramps with sequential reads (here 8, then 32 pages
# after Python's buffered header read: 320 KiB resident from a 20 KB header; this machine's disk allows 8 MiB of
# read-ahead, a GB10's NVMe 128 KiB). 1 MiB leaves margin; a weights load still counts (it reads every page).
READ_AROUND = 1 << 20
# A run of resident pages shorter than this is a point read (one small read and its first read-ahead window: 4 or 5
# pages were seen), not weights read through. On a GB10 a point read caches its own few KiB of 96.5 GiB; scaled as a
# share of the tiny model's 1.4 MB of tensor data, 5 pages read as 1.3 GiB and refused a restart. Weights read through
# (a load, the models phase's hash or copy) leave runs as long as the file.
BULK_RUN = 512 << 10


def _tensor_data_offset(path, size):
    """Where a safetensors file's tensor data starts, past its header and the read-around of reading that header.
    vLLM reads every header at start (after the unit's drop): on a GB10 that caches a few KiB of a 96.5 GiB model,
    on the sim's tiny model the same read would be a visible share of its 2.5 MB."""
    try:
        with open(path, "rb") as handle:
            header = int.from_bytes(handle.read(8), "little")
    except OSError:
        return 0
    return min(size, 8 + header + READ_AROUND) if header < size else 0


def _bulk_pages(flags, run):
    """How many of these mincore flags sit in resident runs of at least `run` pages."""
    count = length = 0
    for flag in list(flags) + [0]:
        if flag & 1:
            length += 1
            continue
        if length >= run:
            count += length
        length = 0
    return count


def resident_share(paths, points=None):
    """The share (0..1) of these files' tensor-data pages that sit in the page cache (mincore), 0.0 for none or no
    files. A header and its read-around are not counted (_tensor_data_offset), nor point reads (BULK_RUN): their
    pages are appended to `points`, a list, when one is given."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    page = os.sysconf("SC_PAGE_SIZE")
    total = resident = 0
    for path in paths:
        size = os.path.getsize(path)
        if not size:
            continue
        pages = (size + page - 1) // page
        fd = os.open(path, os.O_RDONLY)
        try:
            addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED: maps, reads nothing
            if addr in (None, ctypes.c_void_p(-1).value):
                continue
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(ctypes.c_void_p(addr), size, vec) == 0:
                data = vec[_tensor_data_offset(path, size) // page:]
                total += len(data)
                bulk = _bulk_pages(data, max(1, BULK_RUN // page))
                resident += bulk
                if points is not None:
                    points.append(sum(1 for byte in data if byte & 1) - bulk)
            libc.munmap(ctypes.c_void_p(addr), size)
        finally:
            os.close(fd)
    return resident / total if total else 0.0


def page_cache_gib(model):
    """The page cache a GB10 of the pair would hold (GiB): the weights' resident share times the recipe's weights."""
    raw = os.environ.get("DGXSPARK_SIM_RECIPE_MEMORY", "")
    weights = float((json.loads(raw) if raw else {}).get("weights_gib") or 0.0)
    if not weights or not model:
        return 0.0, 0.0
    points = []
    share = resident_share(_weight_files(model), points)
    if sum(points):
        LOG.info("dgxspark-sim (modelled): %d pages of point reads in the weights not counted as page cache "
                 "(runs under %d KiB)", sum(points), BULK_RUN >> 10)
    return share * weights, share


def ray_own_gib(proc="/proc"):
    """What Ray's own processes on this node hold (GiB of PSS, shared pages split between their users), and
    how many there are: what a GB10 running the same processes would count as used."""
    kib, count = 0, 0
    for pid in glob.glob(os.path.join(proc, "[0-9]*")):
        try:
            with open(os.path.join(pid, "cmdline"), "rb") as handle:
                cmd = handle.read().replace(b"\0", b" ").decode(errors="replace")
            if not is_ray_own(cmd):
                continue
            with open(os.path.join(pid, "smaps_rollup")) as handle:
                kib += next(int(line.split()[1]) for line in handle if line.startswith("Pss:"))
            count += 1
        except (OSError, StopIteration, ValueError):
            continue
    return kib / 1024 ** 2, count


def check_memory(util, model=None):
    desktop = DESKTOP_GIB if os.path.exists(os.path.join(SIM_STATE, "desktop-active")) else 0.0
    store = _ray_object_store_gib()
    extra_store = max(0.0, (store or 0.0) - LAUNCHER_OBJECT_STORE_GIB)
    ray, ray_procs = ray_own_gib()
    cache, share = page_cache_gib(model)
    free = GB10_FREE_HEADLESS_GIB - desktop - extra_store - ray - cache
    wanted = util * GB10_TOTAL_GIB
    if wanted > free:
        why = []
        if desktop:
            why.append("its display manager holds ~%.1f GiB" % desktop)
        if ray:
            why.append("Ray's own %d processes hold %.2f GiB (measured here; the field report's free memory was "
                       "without Ray)" % (ray_procs, ray))
        if extra_store:
            why.append("Ray's object store holds %.1f GiB of the same memory (the launcher limits it to %.0f GiB)"
                       % (store, LAUNCHER_OBJECT_STORE_GIB))
        if cache:
            why.append("the page cache holds %.1f GiB of it (%.0f%% of the model's weights, read since the last drop; "
                       "CUDA counts it as used: sync; echo 3 > /proc/sys/vm/drop_caches)" % (cache, share * 100))
        raise ValueError(
            "Free memory on device cuda:0 (%.2f/%.2f GiB) on startup is less than desired GPU memory utilization "
            "(%s, %.2f GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes. "
            "(dgxspark-sim, modelled: the GB10 of %s%s)" % (free, GB10_TOTAL_GIB, util, wanted, _node(),
                                                            ": " + "; ".join(why) if why else ""))


def modelled_kv_bytes(util, kv_dtype, block_size):
    """The KV cache a GB10 of the pair would have at this util (bytes; <= 0: none), from the recipe's
    memory constants and the collection's own plan (built into the image), or None when the recipe
    has no constants. The tiny model has no vision tower, so no vision or video budget."""
    raw = os.environ.get("DGXSPARK_SIM_RECIPE_MEMORY", "")
    memory = json.loads(raw) if raw else {}
    if not memory:
        return None
    from dgxspark_sim_vllm import _memory_plan  # pylint: disable=import-outside-toplevel
    plan = _memory_plan.plan(memory, util, kv_dtype, False, False, block_size)
    return int(plan["kv_cache_gib"] * _memory_plan.GIB)


def check_mods():
    import vllm  # pylint: disable=import-outside-toplevel
    root = os.path.dirname(vllm.__file__)
    for mod, (rel, error) in MODS.items():
        try:
            with open(os.path.join(root, rel)) as handle:
                marked = (MARK + mod) in handle.read()
        except OSError:
            marked = False
        if not marked:
            raise RuntimeError("%s (dgxspark-sim, modelled: mod %s did not run on this image)" % (error, mod))


def install():
    """Wrap the CPU worker where the pair's failures happen. Safe in any process; once."""
    check_env()
    from vllm.v1.worker.cpu_model_runner import CPUModelRunner  # pylint: disable=import-outside-toplevel
    from vllm.v1.worker.cpu_worker import CPUWorker  # pylint: disable=import-outside-toplevel
    if getattr(CPUWorker, "_dgxspark_sim", False):
        return
    CPUWorker._dgxspark_sim = True
    init_device, load_model = CPUWorker.init_device, CPUWorker.load_model
    available = CPUWorker.determine_available_memory
    execute = CPUModelRunner.execute_model

    def init_device_sim(self):
        hang_if_asked(START_HANG_FILE, "before its device starts (a start that hangs; /health stays silent)")
        check_memory(self.cache_config.gpu_memory_utilization, self.model_config.model)
        return init_device(self)

    def load_model_sim(self, *args, **kwargs):
        check_mods()
        return load_model(self, *args, **kwargs)

    def available_sim(self):
        # What the CPU build would give, capped at what the GB10 would: none, and vLLM's own check
        # refuses to start ("No available memory for the cache blocks").
        cpu = available(self)
        cfg = self.cache_config
        gb10 = modelled_kv_bytes(cfg.gpu_memory_utilization, cfg.cache_dtype, cfg.block_size)
        if gb10 is None:
            return cpu
        if gb10 <= 0:
            LOG.warning("dgxspark-sim, modelled: a GB10 of %s keeps no memory for the KV cache at "
                        "gpu_memory_utilization %s", _node(), cfg.gpu_memory_utilization)
            return 0
        return min(cpu, gb10)

    def execute_sim(self, scheduler_output, *args, **kwargs):
        tokens = getattr(scheduler_output, "total_num_scheduled_tokens", 0)
        if tokens:
            hang_if_asked()
        if tokens and _state["first_step"]:
            _state["first_step"] = False
            first_step()
        started = time.monotonic()
        out = execute(self, scheduler_output, *args, **kwargs)
        if tokens:
            requests = len(getattr(scheduler_output, "num_scheduled_tokens", {}) or {}) or 1
            pace(started, tokens, decode=tokens <= requests)
        return out

    CPUWorker.init_device, CPUWorker.load_model = init_device_sim, load_model_sim
    CPUWorker.determine_available_memory = available_sim
    CPUModelRunner.execute_model = execute_sim
    _readers_poll_without_spinning()


def _readers_poll_without_spinning():
    """vLLM's shared-memory queue readers (the engine core, the head's rank) spin on sched_yield for 1 s after
    each read before they wait on the queue's socket: on the pair a step takes ~27 ms, so they spin through it
    by design. Here a step is paced by sleeping for the modelled clock times DGXSPARK_SIM_TIME_SCALE (~0.5 s),
    and that spin burned a host core per reader for every generated token, taken from the other nodes on the
    same cores. Within the same 1 s window the reader sleeps 1 ms between looks instead: the same path and
    the same window, a millisecond later at most. (Skipping the window for the socket wait made each step
    wait seconds for its wake-up: a 24-token answer took minutes.)"""
    from vllm.distributed.device_communicators import shm_broadcast  # pylint: disable=import-outside-toplevel
    cls = shm_broadcast.SpinCondition
    if getattr(cls, "_dgxspark_sim", False):
        return
    cls._dgxspark_sim = True
    wait = cls.wait

    def wait_sim(self, timeout_ms=None):
        if time.monotonic() <= self.last_read + self.busy_loop_s:
            time.sleep(0.001)
        else:
            wait(self, timeout_ms)

    cls.wait = wait_sim
