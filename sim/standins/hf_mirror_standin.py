#!/usr/bin/env python3
"""Stand-in model mirror for the sim: NOT real weights.

Writes tiny models under DIR in the Hugging Face hub-cache layout
(models--ORG--NAME/{refs/main, blobs/<sha256>, snapshots/<rev>/* -> blobs}),
the layout a real user's local mirror of the hub cache has. The models role's
`models_source: local` copies from such a folder; the serving stand-in finds
the result with HF_HUB_OFFLINE=1 as vLLM would.

    hf_mirror_standin.py DIR ORG/NAME[=SRC] [...]

ORG/NAME=SRC takes the files of a real model folder SRC (the sim's tiny model, which the real
engine in the sim serves) instead of stand-in bytes.
"""
import hashlib
import json
import os
import sys


def files_of(model):
    seed = hashlib.sha256(model.encode()).digest()
    return {
        "config.json": json.dumps({"architectures": ["StandInForCausalLM"], "model_type": "standin",
                                   "_name_or_path": model, "standin": True}, indent=1).encode() + b"\n",
        "tokenizer_config.json": b'{"standin": true}\n',
        "README.md": f"# {model} (sim stand-in)\nNot a model: a few bytes in the hub-cache layout.\n".encode(),
        # 256 KiB of deterministic bytes in place of the weights
        "model-00001-of-00001.safetensors": (seed * 8192),
    }


def files_from(src):
    return {name: open(os.path.join(src, name), "rb").read() for name in sorted(os.listdir(src))
            if os.path.isfile(os.path.join(src, name))}


def write(root, model, src=None):
    folder = os.path.join(root, "models--" + model.replace("/", "--"))
    files = files_from(src) if src else files_of(model)
    revision = hashlib.sha1(("standin:" + model + ":" + "".join(sorted(files))).encode()).hexdigest()
    snapshot = os.path.join(folder, "snapshots", revision)
    for sub in ("refs", "blobs", snapshot):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    with open(os.path.join(folder, "refs", "main"), "w", encoding="utf-8") as handle:
        handle.write(revision)
    for name, data in files.items():
        blob = hashlib.sha256(data).hexdigest()
        with open(os.path.join(folder, "blobs", blob), "wb") as handle:
            handle.write(data)
        link = os.path.join(snapshot, name)
        if not os.path.lexists(link):
            os.symlink(os.path.join("..", "..", "blobs", blob), link)


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    for arg in argv[1:]:
        model, _, src = arg.partition("=")
        write(argv[0], model, src or None)
    os.chmod(argv[0], 0o755)


if __name__ == "__main__":
    main(sys.argv[1:])
