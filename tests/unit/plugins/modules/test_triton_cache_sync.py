"""triton_cache_sync end to end on local destinations, and over a stand-in ssh that runs the remote side here
(the real SSH path runs in the molecule scenario)."""
import os
import pathlib
import re
import shutil

import pytest

from ansible_collections.dgxspark.vllm.plugins.module_utils import _manifest as mf
from ansible_collections.dgxspark.vllm.plugins.modules import triton_cache_sync





@pytest.fixture(name="run")
def fixture_run(run_module):
    return lambda check=False, diff=False, **args: run_module(triton_cache_sync.main, args, check_mode=check, diff=diff)


@pytest.fixture()
def head(triton_home):
    return triton_home


def tree(root):
    man = mf.build(str(root))
    return {r: (v[0], v[2]) for r, v in man["files"].items()}


def flip_byte_keep_stat(path):
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[0] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_cold_sync_then_nothing_to_do(head, tmp_path, run):
    worker = tmp_path / "worker"
    first = run(src=str(head), dest=[str(worker)], dest_names=["spark-worker-1"])
    assert not first["failed"], first["msg"]
    res = first["dest"]["spark-worker-1"]
    assert first["changed"] and len(res["sent"]) == 75
    assert res["verified_files"] == 75 and res["verified_bytes"] == first["bytes"]
    assert tree(worker) == tree(head)
    assert not (worker / mf.TMP_DIR).exists()
    second = run(src=str(head), dest=[str(worker)], dest_names=["spark-worker-1"])
    assert not second["changed"]
    assert second["dest"]["spark-worker-1"]["sent"] == []
    assert second["dest"]["spark-worker-1"]["verified_files"] == 75
    assert second["digest"] == first["digest"]


def test_check_mode_reports_and_touches_nothing(head, tmp_path, run):
    worker = tmp_path / "worker"
    out = run(check=True, diff=True, src=str(head), dest=[str(worker)])
    assert out["changed"] and len(out["dest"][str(worker)]["sent"]) == 75
    assert not worker.exists()
    diff = out["diff"][0]
    assert diff["before"] == "" and diff["after"].count("\n") == 75


def test_flipped_byte_with_same_size_and_mtime_is_found_and_repaired(head, tmp_path, run):
    worker = tmp_path / "worker"
    shutil.copytree(head, worker)
    victim = sorted(p for p in worker.rglob("*.cubin"))[0]
    flip_byte_keep_stat(victim)
    rel = str(victim.relative_to(worker))
    check = run(check=True, src=str(head), dest=[str(worker)])
    assert check["dest"][str(worker)]["content_mismatch"] == [rel]
    out = run(src=str(head), dest=[str(worker)])
    assert out["changed"]
    assert out["dest"][str(worker)]["content_mismatch"] == [rel]
    assert out["dest"][str(worker)]["sent"] == [rel]
    assert tree(worker) == tree(head)
    # verify=none is rsync -a's view: it cannot see the flip.
    flip_byte_keep_stat(victim)
    blind = run(src=str(head), dest=[str(worker)], verify="none")
    assert not blind["changed"]


def test_stale_scratch_dir_from_a_killed_transfer_is_removed(head, tmp_path, run):
    worker = tmp_path / "worker"
    shutil.copytree(head, worker)
    (worker / mf.TMP_DIR).mkdir()
    (worker / mf.TMP_DIR / ".add_kernel.cubin.Xy12").write_bytes(b"\0" * 100)
    out = run(src=str(head), dest=[str(worker)])
    assert out["changed"] and not (worker / mf.TMP_DIR).exists()


def test_delete_removes_what_the_source_lacks(head, tmp_path, run):
    worker = tmp_path / "worker"
    shutil.copytree(head, worker)
    (worker / "cache" / "EXTRA").mkdir()
    (worker / "cache" / "EXTRA" / "x.json").write_text("{}")
    kept = run(src=str(head), dest=[str(worker)])
    assert not kept["changed"] and (worker / "cache" / "EXTRA").exists()
    out = run(src=str(head), dest=[str(worker)], delete=True)
    assert out["dest"][str(worker)]["deleted"] == ["cache/EXTRA/x.json"]
    assert not (worker / "cache" / "EXTRA").exists()
    assert tree(worker) == tree(head)


def test_union_gives_every_node_every_kernel(head, tmp_path, run):
    w1, w2 = tmp_path / "w1", tmp_path / "w2"
    w1.mkdir()
    w2.mkdir()
    only_w1 = w1 / "cache" / "W1HASH"
    only_w1.mkdir(parents=True)
    (only_w1 / "rejection_sample.json").write_text("{}")
    (only_w1 / "rejection_sample.cubin").write_bytes(b"\x7fELF-standin")
    out = run(src=str(head), dest=[str(w1), str(w2)], mode="union", required_kernels=["rejection_sample", "add_kernel"])
    assert not out["failed"], out["msg"]
    assert out["dest"][str(w1)]["fetched"] == ["cache/W1HASH/rejection_sample.cubin", "cache/W1HASH/rejection_sample.json"]
    assert tree(w1) == tree(head) == tree(w2)
    assert out["missing_kernels"] == {}


def test_missing_required_kernel_fails_naming_node_and_kernel(head, tmp_path, run):
    worker = tmp_path / "worker"
    out = run(src=str(head), src_name="spark-head", dest=[str(worker)], dest_names=["spark-worker-1"],
              required_kernels=["add_kernel", "rejection_sample"])
    assert out["failed"]
    assert "spark-head lacks rejection_sample" in out["msg"]
    assert "spark-worker-1 lacks rejection_sample" in out["msg"]
    assert out["missing_kernels"] == {"spark-head": ["rejection_sample"], "spark-worker-1": ["rejection_sample"]}
    # The sync itself still happened.
    assert tree(worker) == tree(head)
    warn = run(src=str(head), dest=[str(worker)], required_kernels=["rejection_sample"], on_missing_kernels="warn")
    assert not warn["failed"] and warn["missing_kernels"]


def test_unreachable_destination_fails_alone(head, tmp_path, run):
    worker = tmp_path / "worker"
    out = run(src=str(head), dest=[str(worker), "spark@127.0.0.1:/tmp/x"], dest_names=["good", "down"],
              ssh_port=1, connect_timeout=2)
    assert out["failed"]
    assert out["failed_dests"] == ["down"]
    assert "cannot reach spark@127.0.0.1 over SSH" in out["dest"]["down"]["msg"]
    assert tree(worker) == tree(head)
    assert out["dest"]["good"]["verified_files"] == 75


def test_unreadable_source_fails_before_changing_anything(head, tmp_path, monkeypatch, run):
    worker = tmp_path / "worker"
    locked = str(sorted(head.rglob("*.cubin"))[0])
    real_access = os.access
    # As root nothing is unreadable: make one file look like a root-owned 0600 file to a plain user.
    monkeypatch.setattr(mf.os, "access", lambda p, mode: False if (str(p) == locked and mode == os.R_OK) else real_access(p, mode))
    out = run(src=str(head), dest=[str(worker)])
    assert out["failed"] and "cannot be read" in out["msg"] and not worker.exists()


def test_bad_input_is_refused(run):
    assert "cannot be combined" in run(dest=["/x"], mode="union", delete=True)["msg"]
    assert "one name per dest" in run(dest=["/x", "/y"], dest_names=["a"])["msg"]
    assert "expected host" in run(dest=["bad host name"])["msg"]


def test_documentation_matches_argument_spec():
    import yaml
    doc = yaml.safe_load(triton_cache_sync.DOCUMENTATION)["options"]
    src = pathlib.Path(triton_cache_sync.__file__).read_text()
    spec = set(re.findall(r"^\s+(\w+)=dict\(", src, re.M)) - {"argument_spec"}
    assert spec == set(doc), (sorted(spec - set(doc)), sorted(set(doc) - spec))


def test_digest_cache_no_op_reads_nothing_and_still_finds_the_flip(head, tmp_path, run):
    worker = tmp_path / "worker"
    first = run(src=str(head), dest=[str(worker)], digest_cache=True)
    assert first["hashed"] == 75 and first["dest"][str(worker)]["hashed"] == 75
    again = run(src=str(head), dest=[str(worker)], digest_cache=True)
    assert not again["changed"]
    assert again["hashed"] == 0 and again["dest"][str(worker)]["hashed"] == 0
    assert again["dest"][str(worker)]["verified_files"] == 75
    victim = sorted(worker.rglob("*.ptx"))[0]
    flip_byte_keep_stat(victim)
    fixed = run(src=str(head), dest=[str(worker)], digest_cache=True)
    rel = str(victim.relative_to(worker))
    assert fixed["dest"][str(worker)]["content_mismatch"] == [rel]
    assert tree(worker) == tree(head)


FAKE_SSH = r'''#!{python}
"""Test stand-in for ssh: runs the remote command here with sh, logs each manifest answer's size."""
import os, subprocess, sys
args, i = sys.argv[1:], 0
while args[i].startswith("-"):
    i += 2 if args[i] in ("-o", "-i", "-p", "-O", "-l") else 1
command = " ".join(args[i + 1:])
if "rsync" in command:  # rsync's protocol is interactive: hand over the pipes
    os.execvp("sh", ["sh", "-c", command])
out = subprocess.run(["sh", "-c", command], stdin=sys.stdin, stdout=subprocess.PIPE, check=False)
with open({log!r}, "a") as f:
    f.write("%d\n" % len(out.stdout))
sys.stdout.buffer.write(out.stdout)
sys.exit(out.returncode)
'''


@pytest.fixture(name="fake_ssh")
def fixture_fake_ssh(tmp_path, monkeypatch):
    """An `ssh` on PATH that runs the command locally: the module's remote path, end to end."""
    bindir, log = tmp_path / "fakebin", tmp_path / "answers.log"
    bindir.mkdir()
    (bindir / "ssh").write_text(FAKE_SSH.format(python=os.sys.executable, log=str(log)))
    (bindir / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ["PATH"]))
    return log


@pytest.mark.parametrize("digest_cache", [False, True])
def test_remote_no_op_is_answered_without_the_file_list(head, tmp_path, fake_ssh, digest_cache, run):
    worker = tmp_path / "worker"
    args = dict(src=str(head), dest=["tester@fakehost:%s" % worker], dest_names=["w"], digest_cache=digest_cache)
    first = run(**args)
    assert not first["failed"], first["msg"]
    assert first["changed"] and first["dest"]["w"]["verified_files"] == 75
    assert tree(worker) == tree(head)
    again = run(**args)
    assert not again["failed"] and not again["changed"], again
    assert again["dest"]["w"]["verified_files"] == 75 and again["dest"]["w"]["sent"] == []
    answers = [int(n) for n in fake_ssh.read_text().split()]
    # cold: manifest of an empty tree, then the finish step's digests; no-op: one short answer
    assert len(answers) == 3 and answers[1] > 5000 and answers[2] < 1000, answers
    flip_byte_keep_stat(sorted(worker.rglob("*.cubin"))[0])
    fixed = run(**args)
    assert len(fixed["dest"]["w"]["content_mismatch"]) == 1 and tree(worker) == tree(head)
    assert int(fake_ssh.read_text().split()[3]) > 5000  # a different tree: the whole manifest came back
