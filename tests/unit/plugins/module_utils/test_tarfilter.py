"""The layer filter over real tar streams: layers the receiver has are dropped, the rest is byte-exact."""
import hashlib
import io
import random
import tarfile

import pytest

from ansible_collections.dgxspark.vllm.plugins.module_utils._tarfilter import LayerFilter

A, B, C = (hashlib.sha256(x).hexdigest() for x in (b"base", b"vllm", b"mods"))


def archive(members, fmt=tarfile.PAX_FORMAT):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def run(data, skip, chunk=None):
    filt = LayerFilter(skip, ["sha256:" + x for x in (A, B, C)])
    if chunk is None:
        return filt.feed(data), filt
    rng, out, pos = random.Random(chunk), [], 0
    while pos < len(data):
        step = rng.randint(1, chunk)
        out.append(filt.feed(data[pos:pos + step]))
        pos += step
    return b"".join(out), filt


def members(data):
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


PODMAN = [("%s.tar" % A, b"a" * 3000), ("%s.tar" % B, b"b" * 700), ("%s.tar" % C, b"c" * 10),
          ("%s.json" % hashlib.sha256(b"cfg").hexdigest(), b'{"rootfs": {}}'), ("manifest.json", b"[{}]"),
          ("repositories", b"{}")]
OCI = [("blobs/sha256/%s" % A, b"a" * 5000), ("blobs/sha256/%s" % B, b"b" * 513), ("blobs/sha256/%s" % C, b"c" * 512),
       ("blobs/sha256/%s" % hashlib.sha256(b"config").hexdigest(), b'{"config": 1}'),
       ("index.json", b"{}"), ("manifest.json", b"[]"), ("oci-layout", b"{}")]


@pytest.mark.parametrize("layout", [PODMAN, OCI], ids=["podman", "docker-oci"])
@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT])
@pytest.mark.parametrize("chunk", [None, 1, 511, 4096])
def test_layers_the_receiver_has_are_dropped_and_the_rest_is_exact(layout, fmt, chunk):
    data = archive(layout, fmt)
    out, filt = run(data, ["sha256:" + A, "sha256:" + B], chunk)
    got = members(out)
    want = {n: (b"" if A in n or B in n else d) for n, d in layout}
    assert got == want  # held layers stay as empty entries (podman wants every named file)
    assert filt.skipped == ["sha256:" + A, "sha256:" + B] and filt.sent_layers == ["sha256:" + C]
    assert not filt.legacy
    assert len(out) < len(data) - 3000


def test_nothing_to_skip_passes_the_archive_byte_for_byte():
    data = archive(PODMAN)
    out, filt = run(data, [], 777)
    assert out == data and filt.skipped == []


def test_long_names_through_pax_and_gnu_headers_are_matched():
    long_dir = "x" * 120
    layout = [("%s/%s.tar" % (long_dir, A), b"a" * 10), ("%s.tar" % A, b"a" * 10), ("%s/keep" % long_dir, b"k")]
    for fmt in (tarfile.PAX_FORMAT, tarfile.GNU_FORMAT):
        out, _ = run(archive(layout, fmt), ["sha256:" + A], 100)
        got = members(out)
        assert got["%s.tar" % A] == b"" and got["%s/%s.tar" % (long_dir, A)] == b"a" * 10 and got["%s/keep" % long_dir] == b"k"


def test_dockers_legacy_layout_passes_whole_and_says_so():
    layout = [("%s/layer.tar" % A, b"a" * 100), ("%s/json" % A, b"{}"), ("manifest.json", b"[]")]
    data = archive(layout)
    out, filt = run(data, ["sha256:" + A], 64)
    assert out == data and filt.legacy and filt.skipped == []
