"""Model cache bookkeeping: paths, manifests, completeness, differences, disk figures."""
import hashlib
import os

import pytest

from ansible_collections.dgxspark.vllm.plugins.module_utils import _model_cache as mc


def test_model_dir_naming_and_bad_ids(tmp_path):
    assert mc.model_dir("/c", "Sebesky/MiniMax-M3-W4A16-GPTQ") == "/c/models--Sebesky--MiniMax-M3-W4A16-GPTQ"
    for bad in ("noslash", "a/b/c", "../x", "a/..", ""):
        with pytest.raises(ValueError):
            mc.model_dir("/c", bad)


def test_manifest_follows_snapshot_links_and_reads_revision(tmp_path, make_model):
    path = make_model(tmp_path)
    found = mc.manifest(path, "Org/Tiny")
    assert found["revision"] == "abc123"
    assert set(found["files"]) == {"refs/main", "snapshots/abc123/config.json", "snapshots/abc123/model.safetensors"}
    entry = found["files"]["snapshots/abc123/model.safetensors"]
    assert entry == {"size": 1000, "sha256": hashlib.sha256(b"\x00" * 1000).hexdigest()}
    assert found["total_bytes"] == 1000 + 8 + 6
    # blobs are counted once on disk even though snapshots link to them
    assert mc.disk_usage(path) == 1000 + 8 + 6


def test_stale_and_marker_round_trip(tmp_path, make_model):
    path = make_model(tmp_path)
    sealed = mc.manifest(path, "Org/Tiny")
    assert mc.read_marker(path) is None
    mc.write_marker(path, sealed)
    assert mc.read_marker(path) == sealed
    assert mc.stale_files(path, sealed) == []
    # truncating a weight file makes the model stale without any hashing
    blob = os.path.realpath(os.path.join(path, "snapshots", "abc123", "model.safetensors"))
    with open(blob, "wb") as handle:
        handle.write(b"\x00" * 10)
    assert mc.stale_files(path, sealed) == ["snapshots/abc123/model.safetensors"]


def test_differences_name_missing_extra_and_changed(tmp_path, make_model):
    source = mc.manifest(make_model(tmp_path / "a"), "Org/Tiny")
    copy = mc.manifest(make_model(tmp_path / "b", files={"config.json": b'{"a": 2}', "extra.txt": b"x"}), "Org/Tiny")
    diff = mc.differences(copy, source)
    assert diff == {"missing": ["snapshots/abc123/model.safetensors"],
                    "extra": ["snapshots/abc123/extra.txt"],
                    "different": ["snapshots/abc123/config.json"]}
    assert mc.differences(source, source) == {"missing": [], "extra": [], "different": []}


def test_free_bytes_walks_up_to_an_existing_folder(tmp_path):
    # The same file system (other writers on the machine may move its free bytes a little in between).
    assert abs(mc.free_bytes(str(tmp_path / "not" / "yet" / "there")) - mc.free_bytes(str(tmp_path))) < 2 ** 30
    assert mc.free_bytes(str(tmp_path)) > 0
