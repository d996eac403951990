# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An image archive written straight from Docker Engine's own store, reading only the layers asked for.

``docker save`` reads and tars every layer of an image, whatever the receiver holds: for a derived
image whose base the worker has, the head spends as long as for the whole image. Docker's overlay2
store keeps, for every layer, its files (``overlay2/<cache-id>/diff``) and a tar-split of the layer
tar it was made from (``image/overlay2/layerdb/sha256/<chain id>/tar-split.json.gz``: gzip'd JSON
lines, type 2 = raw tar bytes in base64, type 1 = a file's name and size, whose bytes are in the
diff folder). Replaying it gives the exact layer tar back, so its digest is the layer's diff ID.

``write_archive`` writes a docker-archive (``manifest.json``, the config, one ``<diff id>.tar`` per
layer) with the wanted layers in full and the others as empty files: ``docker load`` looks a layer
up by its chain ID first and opens its file only when the store lacks it, and checks the diff ID of
every layer it does read, so a wrong byte fails the load instead of making a wrong image.

Stdlib only: it runs as root on the head (``python3 -c``), where the store is readable.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import sys
import tarfile

BLOCK = 512
CHUNK = 1 << 20


class LayerStoreError(Exception):
    """The store lacks what the image needs, or is not laid out as Docker's overlay2 store."""


def chain_ids(diff_ids):
    """Docker's chain IDs of a layer stack (each layer's ID with everything below it)."""
    chain, out = None, []
    for diff in diff_ids:
        chain = diff if chain is None else "sha256:" + hashlib.sha256((chain + " " + diff).encode()).hexdigest()
        out.append(chain)
    return out


def _hex(digest):
    return digest.split(":", 1)[1] if digest.startswith("sha256:") else digest


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise LayerStoreError("cannot read %s: %s" % (path, exc.strerror or exc))


def image_config(root, image_id):
    """The image's config as stored (its bytes hash to the image ID) and the parsed document."""
    raw = _read(os.path.join(root, "image", "overlay2", "imagedb", "content", "sha256", _hex(image_id)))
    if hashlib.sha256(raw).hexdigest() != _hex(image_id):
        raise LayerStoreError("the stored config of %s does not hash to its ID" % image_id)
    return raw, json.loads(raw)


def _entries(tar_split):
    with gzip.open(tar_split, "rt") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def _name(entry):
    raw = entry.get("name_raw")
    return base64.b64decode(raw) if raw else (entry.get("name") or "").encode("utf-8", "surrogateescape")


class Layer:
    """One layer of the store: its tar-split and its files."""

    def __init__(self, root, chain_id):
        meta = os.path.join(root, "image", "overlay2", "layerdb", "sha256", _hex(chain_id))
        self.tar_split = os.path.join(meta, "tar-split.json.gz")
        cache_id = _read(os.path.join(meta, "cache-id")).decode().strip()
        self.diff = os.path.join(root, "overlay2", cache_id, "diff")
        if not os.path.isfile(self.tar_split) or not os.path.isdir(self.diff):
            raise LayerStoreError("layer %s has no tar-split or files in the store" % chain_id)

    def size(self):
        """Bytes of the layer tar, from the tar-split alone."""
        total = 0
        for entry in _entries(self.tar_split):
            if entry.get("type") == 2:
                total += len(base64.b64decode(entry.get("payload") or ""))
            elif entry.get("type") == 1:
                total += int(entry.get("size") or 0)
        return total

    def write(self, out):
        """The layer tar, as it was when the layer was made."""
        for entry in _entries(self.tar_split):
            if entry.get("type") == 2:
                out.write(base64.b64decode(entry.get("payload") or ""))
                continue
            size = int(entry.get("size") or 0)
            if entry.get("type") != 1 or size == 0:
                continue
            path = os.path.join(self.diff.encode(), _name(entry).lstrip(b"/"))
            left = size
            with open(path, "rb") as handle:
                while left:
                    data = handle.read(min(CHUNK, left))
                    if not data:
                        raise LayerStoreError("%s is shorter than its layer entry (%d bytes)" % (path.decode(errors="replace"), size))
                    out.write(data)
                    left -= len(data)


def _member(out, name, size):
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, 0
    out.write(info.tobuf(format=tarfile.USTAR_FORMAT))


def _pad(out, size):
    if size % BLOCK:
        out.write(b"\0" * (BLOCK - size % BLOCK))


def write_archive(out, root, image_id, ref, wanted):
    """A docker-archive of image_id tagged ref, its layers in wanted (diff IDs) in full, the others
    empty; returns {diff id: bytes} of the layers written in full."""
    raw, config = image_config(root, image_id)
    diff_ids = config.get("rootfs", {}).get("diff_ids") or []
    layers = [(diff, Layer(root, chain)) for diff, chain in zip(diff_ids, chain_ids(diff_ids))]
    sizes = dict((diff, layer.size()) for diff, layer in layers if diff in wanted)
    for diff, layer in layers:
        size = sizes.get(diff, 0)
        _member(out, _hex(diff) + ".tar", size)
        if size:
            layer.write(out)
            _pad(out, size)
    config_name = _hex(image_id) + ".json"
    _member(out, config_name, len(raw))
    out.write(raw)
    _pad(out, len(raw))
    manifest = json.dumps([{"Config": config_name, "RepoTags": [ref] if ref else [],
                            "Layers": [_hex(d) + ".tar" for d in diff_ids]}]).encode()
    _member(out, "manifest.json", len(manifest))
    out.write(manifest)
    _pad(out, len(manifest))
    out.write(b"\0" * (2 * BLOCK))
    return sizes


def main(argv=None):
    """python3 -c SOURCE ROOT IMAGE_ID REF [DIFF_ID ...]: the archive on stdout."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3:
        sys.stderr.write("usage: ROOT IMAGE_ID REF [DIFF_ID ...]\n")
        return 2
    root, image_id, ref, wanted = args[0], args[1], args[2], set(args[3:])
    out = sys.stdout.buffer
    try:
        write_archive(out, root, image_id, ref, wanted)
        out.flush()
    except LayerStoreError as exc:
        sys.stderr.write("layer store: %s\n" % exc)
        return 3
    return 0


def script():
    """This file as a script for ``python3 -c`` (arguments as ``main`` takes them)."""
    # Imported here: as a script this file runs alone, without the collection.
    from ansible_collections.dgxspark.vllm.plugins.module_utils._source import source_of  # pylint: disable=import-outside-toplevel
    return source_of(__name__) + "\nraise SystemExit(main())\n"
