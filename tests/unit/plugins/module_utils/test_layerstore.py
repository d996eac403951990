"""_layerstore: an image archive rebuilt from Docker's overlay2 store, only the wanted layers in full."""
import base64
import gzip
import hashlib
import io
import json
import tarfile

import pytest
from ansible_collections.dgxspark.vllm.plugins.module_utils import _layerstore as ls


def layer_tar(files):
    """A layer tar as Docker writes one: (tar bytes, {name: content} of its regular files)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, content in files.items():
            if content is None:
                info = tarfile.TarInfo(name)
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(content, tuple):  # a symlink
                info = tarfile.TarInfo(name)
                info.type, info.linkname = tarfile.SYMTYPE, content[0]
                tar.addfile(info)
            else:
                info = tarfile.TarInfo(name)
                info.size, info.mtime = len(content), 1700000000
                tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def tar_split(raw):
    """Disassemble a tar the way tar-split does: raw bytes (type 2) around each file's payload (type 1)."""
    lines, pos = [], 0
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
        for member in tar:
            lines.append({"type": 2, "payload": base64.b64encode(raw[pos:member.offset_data]).decode()})
            lines.append({"type": 1, "name": member.name, "size": member.size if member.isreg() else 0})
            pos = member.offset_data + (member.size if member.isreg() else 0)
    lines.append({"type": 2, "payload": base64.b64encode(raw[pos:]).decode()})
    return gzip.compress("".join(json.dumps(x) + "\n" for x in lines).encode())


def store(tmp_path, layers, broken=None):
    """An overlay2 store holding an image of these layers ([{name: content}]): (root, image ID, diff IDs)."""
    root = tmp_path / "docker"
    diffs = []
    for i, files in enumerate(layers):
        raw = layer_tar(files)
        diffs.append("sha256:" + hashlib.sha256(raw).hexdigest())
        chain = ls.chain_ids(diffs)[-1]
        meta = root / "image" / "overlay2" / "layerdb" / "sha256" / chain.split(":")[1]
        meta.mkdir(parents=True)
        (meta / "tar-split.json.gz").write_bytes(tar_split(raw))
        (meta / "cache-id").write_text("cache%d" % i)
        diff = root / "overlay2" / ("cache%d" % i) / "diff"
        diff.mkdir(parents=True)
        for name, content in files.items():
            path = diff / name
            if content is None:
                path.mkdir(parents=True, exist_ok=True)
            elif isinstance(content, tuple):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.symlink_to(content[0])
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(broken if broken is not None and name == "opt/mod" else content)
    config = json.dumps({"rootfs": {"type": "layers", "diff_ids": diffs}, "config": {}}).encode()
    image_id = "sha256:" + hashlib.sha256(config).hexdigest()
    db = root / "image" / "overlay2" / "imagedb" / "content" / "sha256"
    db.mkdir(parents=True)
    (db / image_id.split(":")[1]).write_bytes(config)
    return str(root), image_id, diffs


BASE = {"etc": None, "etc/os-release": b"ID=debian\n" * 100, "bin/sh": b"\x7fELF" + bytes(3000),
        "bin/ash": ("sh",)}
TOP = {"opt": None, "opt/mod": b"patched\n"}


def members(archive):
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isreg()}


def test_chain_ids_follow_docker():
    a, b = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    assert ls.chain_ids([a, b]) == [a, "sha256:" + hashlib.sha256((a + " " + b).encode()).hexdigest()]


def test_the_wanted_layer_is_rebuilt_byte_for_byte_and_the_others_are_empty(tmp_path):
    root, image_id, diffs = store(tmp_path, [BASE, TOP])
    out = io.BytesIO()
    sizes = ls.write_archive(out, root, image_id, "localhost/x:mods", {diffs[1]})
    files = members(out.getvalue())
    assert "sha256:" + hashlib.sha256(files[diffs[1].split(":")[1] + ".tar"]).hexdigest() == diffs[1]
    assert files[diffs[0].split(":")[1] + ".tar"] == b""
    assert sizes == {diffs[1]: len(files[diffs[1].split(":")[1] + ".tar"])}
    manifest = json.loads(files["manifest.json"])
    assert manifest == [{"Config": image_id.split(":")[1] + ".json", "RepoTags": ["localhost/x:mods"],
                         "Layers": [d.split(":")[1] + ".tar" for d in diffs]}]
    assert "sha256:" + hashlib.sha256(files[manifest[0]["Config"]]).hexdigest() == image_id


def test_every_layer_in_full_hashes_to_its_diff_id(tmp_path):
    root, image_id, diffs = store(tmp_path, [BASE, TOP])
    out = io.BytesIO()
    ls.write_archive(out, root, image_id, "x", set(diffs))
    files = members(out.getvalue())
    for diff in diffs:
        assert "sha256:" + hashlib.sha256(files[diff.split(":")[1] + ".tar"]).hexdigest() == diff


def test_a_file_shorter_than_its_entry_is_refused(tmp_path):
    root, image_id, diffs = store(tmp_path, [BASE, TOP], broken=b"pa")
    with pytest.raises(ls.LayerStoreError, match="shorter than its layer entry"):
        ls.write_archive(io.BytesIO(), root, image_id, "x", {diffs[1]})


def test_a_config_that_does_not_hash_to_the_id_is_refused(tmp_path):
    root, image_id, _ = store(tmp_path, [BASE])
    path = tmp_path / "docker" / "image" / "overlay2" / "imagedb" / "content" / "sha256" / image_id.split(":")[1]
    path.write_bytes(path.read_bytes() + b" ")
    with pytest.raises(ls.LayerStoreError, match="does not hash to its ID"):
        ls.write_archive(io.BytesIO(), root, image_id, "x", set())


def test_main_writes_the_archive_and_names_a_missing_image(tmp_path, capsysbinary):
    root, image_id, diffs = store(tmp_path, [BASE, TOP])
    assert ls.main([root, image_id, "x", diffs[1]]) == 0
    assert "manifest.json" in members(capsysbinary.readouterr().out)
    assert ls.main([root, "sha256:" + "0" * 64, "x"]) == 3
    assert "layer store: cannot read" in capsysbinary.readouterr().err.decode()
    assert ls.main([root]) == 2


def test_the_source_runs_as_a_script(tmp_path):
    import subprocess
    import sys
    root, image_id, diffs = store(tmp_path, [BASE, TOP])
    res = subprocess.run([sys.executable, "-c", ls.script(), root, image_id, "x", diffs[1]], capture_output=True, check=False)
    assert res.returncode == 0, res.stderr
    assert "manifest.json" in members(res.stdout)
