# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A model in a Hugging Face hub cache: where it lives, what it holds, whether it is complete.

Layout (what huggingface_hub writes): <cache>/models--<org>--<name>/{refs/main, snapshots/<rev>/..., blobs/...}.
A model counts as complete once a marker file written after a verified download or copy is present
and every file it lists still has its size; the content hashes are checked when the marker is written.
"""

from __future__ import annotations

import json
import os

from ansible_collections.dgxspark.vllm.plugins.module_utils import _manifest

MARKER = ".dgxspark-complete.json"


def model_dir(cache_dir, model):
    """models--Org--Name under the hub cache, as huggingface_hub names it."""
    if not model or model.count("/") != 1 or any(part in ("", ".", "..") for part in model.split("/")):
        raise ValueError(f"model {model!r} is not of the form ORG/NAME")
    return os.path.join(cache_dir, "models--" + model.replace("/", "--"))


def content_files(path):
    """Relative paths of the files a server reads: refs/* and snapshots/** (symlinks followed)."""
    found = []
    for top in ("refs", "snapshots"):
        root = os.path.join(path, top)
        for folder, _dirs, files in os.walk(root, followlinks=True):
            for name in files:
                full = os.path.join(folder, name)
                if os.path.isfile(full):
                    found.append(os.path.relpath(full, path))
    return sorted(found)


def manifest(path, model, workers=0):
    """Size and sha256 of every content file, hashed by the same code as the Triton cache sync."""
    files = content_files(path)
    digests = _manifest.hash_files(path, files, workers)
    entries = {rel: {"size": os.path.getsize(os.path.join(path, rel)), "sha256": digests[rel]}
               for rel in files}
    revision = None
    ref = os.path.join(path, "refs", "main")
    if os.path.isfile(ref):
        with open(ref, encoding="utf-8") as handle:
            revision = handle.read().strip()
    return {
        "model": model,
        "revision": revision,
        "files": entries,
        "file_count": len(entries),
        "total_bytes": sum(entry["size"] for entry in entries.values()),
    }


def read_marker(path):
    try:
        with open(os.path.join(path, MARKER), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def stale_files(path, recorded):
    """Files of a manifest that are missing or have another size now (a cheap check, no hashing)."""
    stale = []
    for rel, entry in sorted((recorded or {}).get("files", {}).items()):
        full = os.path.join(path, rel)
        if not os.path.isfile(full) or os.path.getsize(full) != entry["size"]:
            stale.append(rel)
    return stale


def differences(have, want):
    """Paths whose size or hash differ between two manifests, and paths only one of them has."""
    mine, theirs = have.get("files", {}), want.get("files", {})
    return {
        "missing": sorted(set(theirs) - set(mine)),
        "extra": sorted(set(mine) - set(theirs)),
        "different": sorted(rel for rel in set(mine) & set(theirs) if mine[rel] != theirs[rel]),
    }


def disk_usage(path):
    """Bytes used by regular files under path (symlinks not followed, so blobs count once)."""
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(folder, name)
            if not os.path.islink(full):
                total += os.lstat(full).st_size
    return total


def free_bytes(path):
    """Free bytes for an unprivileged user on the filesystem that holds (or will hold) path."""
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    stats = os.statvfs(probe)
    return stats.f_bavail * stats.f_frsize


def write_marker(path, data):
    tmp = os.path.join(path, MARKER + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.replace(tmp, os.path.join(path, MARKER))
