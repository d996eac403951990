# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drop the layers a receiver already has from an image archive while it streams.

``docker save`` / ``podman save`` write a tar holding the image's config, its
manifest and one file per layer. ``docker load`` (moby ``image/tarexport/load.go``)
and podman's docker-archive source (containers/image) look a layer up by its
diff ID / chain ID first and read its file only when the store lacks it, so an
archive whose held layers are empty files loads as the whole image, tags and ID
included. The files stay, empty: podman's reader refuses an archive whose
manifest names a layer file that is not there at all ("Some layer tarfiles are
missing in the tarball", seen on podman 4.3).

Layer files are known by name, so no member has to be held back:
- podman's docker-archive: ``<diff-id hex>.tar``;
- Docker 25+ (OCI layout): ``blobs/sha256/<hex>`` whose digest is a diff ID
  (layers are saved uncompressed); the config and manifests are blobs too, and
  are never diff IDs.
Docker's legacy layout (``<v1 id>/layer.tar``, before 25) names layers by v1 IDs
that cannot be told from diff IDs while streaming: such an archive passes whole,
and the filter says so (``legacy``).
"""

from __future__ import annotations

import re

BLOCK = 512
_POD_LAYER = re.compile(r"^(?:\./)?([0-9a-f]{64})\.tar$")
_OCI_BLOB = re.compile(r"^(?:\./)?blobs/sha256/([0-9a-f]{64})$")
_LEGACY_LAYER = re.compile(r"^(?:\./)?[0-9a-f]{64}/layer\.tar$")


def _octal(field):
    """A tar numeric field: octal text, or base-256 when the high bit of the first byte is set."""
    if field[0] & 0x80:
        value = field[0] & 0x7F
        for byte in field[1:]:
            value = (value << 8) | byte
        return value
    text = field.split(b"\0", 1)[0].strip() or b"0"
    return int(text, 8)


def _padded(size):
    return (size + BLOCK - 1) // BLOCK * BLOCK


def _empty(header):
    """The header with size 0 and its checksum recomputed."""
    h = bytearray(header)
    h[124:136] = b"%011o\0" % 0
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def _pax_path(data):
    """The path= record of a pax extended header, if any."""
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos)
        if space < 0:
            break
        length = int(data[pos:space])
        record = data[space + 1:pos + length - 1]
        key, _sep, value = record.partition(b"=")
        if key == b"path":
            return value.decode("utf-8", "replace")
        pos += length
    return None


class LayerFilter:
    """Incremental tar filter: feed() bytes of the archive, get back the bytes to send."""

    def __init__(self, skip_diff_ids, layers=None):
        """skip_diff_ids: the layers not to send; layers: every diff ID of the image (to count what was sent)."""
        self.skip = set(d.split(":", 1)[-1] for d in skip_diff_ids)
        self.layers = set(d.split(":", 1)[-1] for d in layers) if layers is not None else None
        self.buf = b""
        self.pending = []        # extension headers waiting for their member
        self.ext_name = None     # long name from a GNU 'L' or pax header
        self.remaining = 0       # data bytes (with padding) of the current member left
        self.keep = True
        self.ext_collect = None  # bytearray collecting an extension header's data
        self.done = False
        self.skipped, self.sent_layers, self.legacy = [], [], False

    def _layer_of(self, name):
        m = _POD_LAYER.match(name) or _OCI_BLOB.match(name)
        if m:
            return m.group(1)
        if _LEGACY_LAYER.match(name):
            self.legacy = True
        return None

    def feed(self, data):
        out = []
        self.buf += data
        while self.buf:
            if self.done:  # trailer and whatever follows: pass through
                out.append(self.buf)
                self.buf = b""
                break
            if self.remaining:
                take = self.buf[:self.remaining]
                self.buf = self.buf[len(take):]
                self.remaining -= len(take)
                if self.ext_collect is not None:
                    self.ext_collect += take
                    if not self.remaining:
                        self._end_extension()
                elif self.keep:
                    out.append(take)
                continue
            if len(self.buf) < BLOCK:
                break
            header, self.buf = self.buf[:BLOCK], self.buf[BLOCK:]
            if header == b"\0" * BLOCK:
                out.extend(self.pending)
                self.pending = []
                out.append(header)
                self.done = True
                continue
            size, kind = _octal(header[124:136]), header[156:157]
            if kind in (b"x", b"L", b"K", b"g"):
                self.pending.append(header)
                self.ext_collect = bytearray()
                self.ext_kind = kind
                self.ext_header_index = len(self.pending) - 1
                self.remaining = _padded(size)
                self.ext_size = size
                if not self.remaining:
                    self._end_extension()
                continue
            name = self.ext_name or self._ustar_name(header)
            self.ext_name = None
            layer = self._layer_of(name) if kind in (b"0", b"\0") else None
            self.keep = not (layer and layer in self.skip)
            out.extend(self.pending)
            if self.keep:
                out.append(header)
                if layer and (self.layers is None or layer in self.layers):
                    self.sent_layers.append("sha256:" + layer)
            else:  # the same entry, empty: its name is there, its bytes are not sent
                out.append(_empty(header))
                self.skipped.append("sha256:" + layer)
            self.pending = []
            self.remaining = _padded(size)
        return b"".join(out)

    def _end_extension(self):
        data = bytes(self.ext_collect[:self.ext_size])
        self.pending.append(bytes(self.ext_collect))
        if self.ext_kind == b"L":
            self.ext_name = data.split(b"\0", 1)[0].decode("utf-8", "replace")
        elif self.ext_kind == b"x":
            self.ext_name = _pax_path(data) or self.ext_name
        self.ext_collect = None

    @staticmethod
    def _ustar_name(header):
        name = header[0:100].split(b"\0", 1)[0].decode("utf-8", "replace")
        if header[257:262] == b"ustar":
            prefix = header[345:500].split(b"\0", 1)[0].decode("utf-8", "replace")
            if prefix:
                name = prefix + "/" + name
        return name
