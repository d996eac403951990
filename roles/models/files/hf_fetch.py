# Runs inside the serving image (python3 -c): download one model into the hub cache
# under $HF_HOME, after checking that the disk holds it. Args: MODEL MARGIN_BYTES;
# the token (may be empty) arrives on stdin.
import os
import shutil
import sys

from huggingface_hub import HfApi, snapshot_download

model, margin = sys.argv[1], int(sys.argv[2])
token = sys.stdin.read().strip() or None
cache = os.path.join(os.environ["HF_HOME"], "hub")
os.makedirs(cache, exist_ok=True)
info = HfApi().model_info(model, files_metadata=True, token=token)
need = sum(f.size or 0 for f in info.siblings or [])
blobs = os.path.join(cache, "models--" + model.replace("/", "--"), "blobs")
have = sum(e.stat().st_size for e in os.scandir(blobs) if e.is_file()) if os.path.isdir(blobs) else 0
free = shutil.disk_usage(cache).free
if need - have + margin > free:
    sys.exit(f"not enough disk for {model}: {(need - have) / 2**30:.1f} GiB more plus a margin of "
             f"{margin / 2**30:.1f} GiB needed, {free / 2**30:.1f} GiB free in the Hugging Face cache. "
             "Free space there or lower models_disk_margin_gb.")
path = snapshot_download(model, revision=info.sha, cache_dir=cache, token=token)
print(f"{model} {info.sha} {need} bytes -> {path}")
