"""Manifest, compare and kernel detection on the real Triton cache fixture."""
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.dgxspark.vllm.plugins.module_utils import _manifest as mf

FIXTURE_KERNELS = {"add_kernel", "softmax_kernel", "triton_poi_fused_add_gelu_mul_sin_0"}


@pytest.fixture()
def cache(triton_home):
    """The real cache as ~/.triton holds it: cache/<hash>/..."""
    return triton_home


def files_of(root):
    return {str(p.relative_to(root)): p for p in root.rglob("*") if p.is_file()}


def test_manifest_lists_and_hashes_every_file(cache):
    man = mf.build(str(cache))
    on_disk = files_of(cache)
    assert set(man["files"]) == set(on_disk)
    assert len(man["files"]) == 75
    for rel, (size, mtime, digest) in man["files"].items():
        data = on_disk[rel].read_bytes()
        assert size == len(data)
        assert mtime == on_disk[rel].stat().st_mtime_ns
        assert digest == hashlib.sha256(data).hexdigest()
    assert mf.totals(man) == (75, sum(len(p.read_bytes()) for p in on_disk.values()))
    assert "cache" in man["dirs"]


def test_manifest_hashes_each_file_exactly_once(cache, monkeypatch):
    calls = []
    real = mf.hash_file
    monkeypatch.setattr(mf, "hash_file", lambda path, buf=None: calls.append(path) or real(path, buf))
    man = mf.build(str(cache), workers=4)
    assert len(calls) == len(man["files"]) == len(set(calls))


def test_manifest_skips_scratch_dir_and_excludes(cache):
    (cache / mf.TMP_DIR).mkdir()
    (cache / mf.TMP_DIR / "partial").write_bytes(b"x" * 10)
    (cache / "cache" / "tmp.pid_1_2").mkdir()
    (cache / "cache" / "tmp.pid_1_2" / "k.json").write_text("{}")
    man = mf.build(str(cache), excludes=["tmp.pid_*"])
    assert not [r for r in man["files"] if mf.TMP_DIR in r or "tmp.pid_" in r]
    assert len(man["files"]) == 75


def test_missing_root_is_an_empty_tree(tmp_path):
    man = mf.build(str(tmp_path / "nope"))
    assert man["files"] == {} and man["exists"] is False


def test_kernel_detection_at_any_depth(cache):
    assert mf.kernels(mf.build(str(cache))["files"]) == FIXTURE_KERNELS
    # A TRITON_CACHE_DIR holds <hash>/ directly.
    assert mf.kernels(mf.build(str(cache / "cache"))["files"]) == FIXTURE_KERNELS
    seed = ["eagle_prepare_next", "_nvfp4_write", "update_regular_decode", "rejection_sample"]
    assert mf.missing_kernels(mf.build(str(cache))["files"], seed + ["add_kernel"]) == seed


def test_kernel_needs_metadata_and_binary_in_one_dir(cache):
    for cubin in cache.rglob("add_kernel.cubin"):
        cubin.unlink()
    found = mf.kernels(mf.build(str(cache))["files"])
    assert "add_kernel" not in found and "softmax_kernel" in found
    # Group files and launchers are not kernels.
    assert not [k for k in found if k.startswith("__")]
    assert mf.kernels(["a/x.json", "b/x.cubin"]) == set()
    assert mf.kernels(["a/x.json", "a/x.hsaco"]) == {"x"}


def test_compare_finds_same_size_same_mtime_different_bytes(cache, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(cache, other)  # copy2: same mtimes
    victim = next(iter(sorted(files_of(other))))
    path = other / victim
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    gone = sorted(files_of(other))[-1]
    (other / gone).unlink()
    (other / "extra.bin").write_bytes(b"only here")

    src, dst = mf.build(str(cache)), mf.build(str(other))
    res = mf.compare(src, dst, content=True)
    assert res["content_mismatch"] == [victim]
    assert sorted(res["send"]) == sorted([victim, gone])
    assert res["extra"] == ["extra.bin"]
    # What rsync -a sees: size and mtime only -> the flipped byte stays.
    stat_only = mf.compare(mf.build(str(cache), hashing=False), mf.build(str(other), hashing=False), content=False)
    assert stat_only["send"] == [gone]
    assert mf.digest(src) != mf.digest(dst)


def test_digest_equal_for_equal_trees(cache, tmp_path):
    other = tmp_path / "copy"
    shutil.copytree(cache, other)
    a, b = mf.build(str(cache)), mf.build(str(other))
    assert mf.compare(a, b) == {"send": [], "content_mismatch": [], "extra": []}
    assert mf.digest(a) == mf.digest(b)


def test_remove_drops_files_and_dirs_left_empty(cache):
    man = mf.build(str(cache))
    hashdir = next(d for d in man["dirs"] if d.count("/") == 1)
    rels = [r for r in man["files"] if r.startswith(hashdir + "/")]
    mf.remove(str(cache), rels, src_dirs=["cache"])
    assert not (cache / hashdir).exists() and (cache / "cache").is_dir()


def test_bootstrap_runs_the_shipped_code_in_a_fresh_python(cache):
    """The destination side: stock python3, the code and the request on stdin."""
    payload = json.dumps({"code": mf.source_text(), "action": "manifest", "path": "~/" + cache.name, "hash": True})
    out = subprocess.run([sys.executable, "-c", mf.BOOTSTRAP, str(cache.parent)], input=payload,
                         capture_output=True, text=True, check=True, env={"PATH": os.environ["PATH"]})
    remote = json.loads(out.stdout)
    assert remote["root"] == str(cache)
    assert remote["files"] == {k: list(v) for k, v in mf.build(str(cache))["files"].items()}


def test_digest_cache_rehashes_only_what_changed_and_sees_the_flip(cache):
    first = mf.build(str(cache), cache=True)
    assert first["hashed"] == 75 and (cache / mf.CACHE_FILE).exists()
    second = mf.build(str(cache), cache=True)
    assert second["hashed"] == 0 and second["files"] == first["files"]
    victim = sorted(cache.rglob("*.cubin"))[0]
    st = victim.stat()
    data = bytearray(victim.read_bytes())
    data[3] ^= 0x10
    victim.write_bytes(bytes(data))
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back; ctime moves
    third = mf.build(str(cache), cache=True)
    rel = str(victim.relative_to(cache))
    assert third["hashed"] == 1
    assert third["files"][rel][2] == hashlib.sha256(bytes(data)).hexdigest() != first["files"][rel][2]
    # The cache file is never part of the tree.
    assert mf.CACHE_FILE not in third["files"]


def test_digest_cache_is_not_written_in_check_mode(cache):
    mf.build(str(cache), cache=True, write_cache=False)
    assert not (cache / mf.CACHE_FILE).exists()
