"""image_distribute: probing, the free space check, check mode and the streaming pipeline.

The container CLI is a stand-in script with one image per node kept in a state
folder, and SSH is replaced by a local shell that tells the stand-in which node
it is on, so the real save | relay | load pipeline runs end to end.
"""

import json
import shlex
import shutil
import stat

import pytest

from ansible.module_utils.testing import patch_module_args
from ansible_collections.dgxspark.vllm.plugins.modules import image_distribute as mod

PAYLOAD = 3_000_000
HEAD_ID = "a" * 64
CLI_STANDIN = r'''#!/usr/bin/env python3
"""Container CLI stand-in: one image per node, the node named by FAKE_NODE."""
import os, pathlib, sys
state = pathlib.Path(os.environ["FAKE_STATE"]) / os.environ.get("FAKE_NODE", "head")
state.mkdir(parents=True, exist_ok=True)
image = state / "image"
args = sys.argv[1:]
if args[:2] == ["image", "inspect"]:
    if not image.exists():
        sys.exit(print("Error: inspecting object: %s: image not known" % args[-1], file=sys.stderr) or 125)
    print(args[3].replace("{{.Id}}", image.read_text()).replace("{{.Size}}", str(PAYLOAD)))
elif args[0] == "save":
    with open(state.parent / "saves", "a") as f:
        f.write("save\n")
    data = b"x" * PAYLOAD + image.read_text().encode()
    if os.environ.get("FAKE_CUT"):  # the link drops halfway
        sys.stdout.buffer.write(data[: PAYLOAD // 2])
        sys.exit(1)
    sys.stdout.buffer.write(data)
elif args[0] == "load":
    data = sys.stdin.buffer.read()
    if len(data) != PAYLOAD + 64:
        sys.exit(print("Error: payload does not match: unexpected EOF", file=sys.stderr) or 125)
    image.write_text(data[-64:].decode())
    print("Loaded image: ref")
'''.replace("PAYLOAD", str(PAYLOAD))


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    cli = tmp_path / "cli"
    cli.write_text(CLI_STANDIN)
    cli.chmod(cli.stat().st_mode | stat.S_IEXEC)
    state = tmp_path / "state"
    monkeypatch.setenv("FAKE_STATE", str(state))
    monkeypatch.delenv("FAKE_NODE", raising=False)
    (state / "head").mkdir(parents=True)
    (state / "head" / "image").write_text(HEAD_ID)

    def local_shell(self, worker, command):
        if not isinstance(command, str):
            command = shlex.join(command)
        return ["env", "FAKE_NODE=" + worker["name"], "sh", "-c", command]

    monkeypatch.setattr(mod.Distributor, "ssh_cmd", local_shell)

    class Cluster:
        path = tmp_path

        def args(self, **kw):
            a = dict(ref="example/serving:latest", container_cli=[str(cli)], storage_path=str(tmp_path),
                     workers=[{"name": "w1", "host": "10.0.0.11"}, {"name": "w2", "host": "10.0.0.12"}])
            a.update(kw)
            return a

        def worker_id(self, name):
            f = state / name / "image"
            return f.read_text() if f.exists() else None

        def set_worker_id(self, name, value):
            (state / name).mkdir(parents=True, exist_ok=True)
            (state / name / "image").write_text(value)

    return Cluster()


def run_module(args, capsys, check=False):
    if check:
        args["_ansible_check_mode"] = True
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            mod.main()
    return json.loads(capsys.readouterr().out)


def by_name(result):
    return {w["name"]: w for w in result["workers"]}


def test_parse_probe_podman_id_and_free_space():
    out = "f4a27e5c\n__rc=0\nFilesystem 1024-blocks Used Available Capacity Mounted on\n/dev/vda 100 50 40 50% /\n__df=0\n"
    res = mod.parse_probe(out)
    assert res["id"] == "f4a27e5c" and res["free_bytes"] == 40 * 1024 and not res["missing"]


def test_parse_probe_missing_image_and_broken_cli():
    assert mod.parse_probe("Error: No such image: x\n__rc=1\n/dev/vda 1 1 7 1% /\n__df=0\n")["missing"]
    broken = mod.parse_probe("permission denied while trying to connect to the Docker daemon socket\n__rc=1\n__df=0\n")
    assert "permission denied" in broken["error"] and not broken["missing"]
    assert "No such file" in mod.parse_probe("__rc=0\ndf: /nope: No such file or directory\n__df=1\n")["df_error"]


def test_ids_compare_without_the_digest_prefix():
    assert mod.normalize_id("sha256:abc\n") == mod.normalize_id("abc")


def test_streams_to_workers_that_lack_the_image_then_does_nothing(cluster, capsys):
    res = run_module(cluster.args(), capsys)
    assert res["changed"] and not res.get("failed"), res
    assert cluster.worker_id("w1") == cluster.worker_id("w2") == HEAD_ID
    assert {w["status"] for w in res["workers"]} == {"transferred"}
    assert all(w["bytes"] == PAYLOAD + 64 for w in res["workers"])
    again = run_module(cluster.args(), capsys)
    assert not again["changed"] and {w["status"] for w in again["workers"]} == {"present"}


def test_the_new_id_comes_back_in_the_load_session(cluster, capsys, monkeypatch):
    probed = []
    real = mod.Distributor.probe
    monkeypatch.setattr(mod.Distributor, "probe", lambda self, w: probed.append(w["name"]) or real(self, w))
    res = run_module(cluster.args(), capsys)
    assert [by_name(res)[n]["id"] for n in ("w1", "w2")] == [HEAD_ID, HEAD_ID]
    assert sorted(probed) == ["w1", "w2"]  # one probe each before the transfer, none after


@pytest.mark.parametrize("parallel, saves", [(4, 1), (1, 2)])
def test_workers_that_receive_at_once_share_one_save(cluster, capsys, parallel, saves):
    res = run_module(cluster.args(parallel=parallel), capsys)
    assert {w["status"] for w in res["workers"]} == {"transferred"}
    assert cluster.worker_id("w1") == cluster.worker_id("w2") == HEAD_ID
    assert (cluster.path / "state" / "saves").read_text().count("save") == saves


def test_only_the_differing_worker_receives(cluster, capsys):
    cluster.set_worker_id("w1", HEAD_ID)
    cluster.set_worker_id("w2", "b" * 64)
    res = by_name(run_module(cluster.args(), capsys))
    assert res["w1"]["status"] == "present" and res["w1"]["bytes"] == 0
    assert res["w2"]["status"] == "transferred" and res["w2"]["previous_id"] == "b" * 64
    assert cluster.worker_id("w2") == HEAD_ID


def test_check_mode_lists_receivers_and_changes_nothing(cluster, capsys):
    cluster.set_worker_id("w1", HEAD_ID)
    res = run_module(cluster.args(), capsys, check=True)
    assert res["changed"]
    assert by_name(res)["w2"]["status"] == "would_receive" and by_name(res)["w1"]["status"] == "present"
    assert "w2: would receive example/serving:latest" in res["msg"]
    assert cluster.worker_id("w2") is None
    assert "w2: absent" in res["diff"]["before"] and "w2: " + HEAD_ID in res["diff"]["after"]


def test_too_little_free_space_fails_before_any_transfer(cluster, capsys):
    res = run_module(cluster.args(free_space_factor=1e9), capsys)
    assert res["failed"]
    assert res["msg"].startswith("Nothing was transferred.")
    assert "w1:" in res["msg"] and "free on %s" % cluster.path in res["msg"] and "the image needs" in res["msg"]
    assert cluster.worker_id("w1") is None and cluster.worker_id("w2") is None


def test_cut_stream_leaves_no_image_and_the_next_run_converges(cluster, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_CUT", "1")
    res = run_module(cluster.args(workers=[{"name": "w1", "host": "10.0.0.11"}]), capsys)
    assert res["failed"] and "w1" in res["msg"]
    assert by_name(res)["w1"]["status"] == "failed" and by_name(res)["w1"]["message"]
    assert cluster.worker_id("w1") is None
    monkeypatch.delenv("FAKE_CUT")
    again = run_module(cluster.args(workers=[{"name": "w1", "host": "10.0.0.11"}]), capsys)
    assert by_name(again)["w1"]["status"] == "transferred" and cluster.worker_id("w1") == HEAD_ID


@pytest.mark.skipif(not shutil.which("zstd"), reason="zstd not installed")
def test_compressed_stream_sends_fewer_bytes(cluster, capsys):
    res = run_module(cluster.args(compress=True), capsys)
    assert {w["status"] for w in res["workers"]} == {"transferred"}
    assert all(0 < w["bytes"] < PAYLOAD // 10 for w in res["workers"])
    assert cluster.worker_id("w1") == HEAD_ID


def test_unreachable_worker_is_named_with_the_fix(cluster, capsys, monkeypatch):
    monkeypatch.setattr(mod.Distributor, "ssh_cmd",
                        lambda self, w, c: ["sh", "-c", "echo 'Permission denied (publickey).' >&2; exit 255"])
    res = run_module(cluster.args(workers=[{"name": "w1", "host": "10.0.0.11", "user": "spark"}]), capsys)
    assert res["failed"]
    assert "w1 (10.0.0.11)" in res["msg"] and "Permission denied" in res["msg"] and "node_trust" in res["msg"]


def test_head_without_the_image_fails(cluster, capsys):
    (cluster.path / "state" / "head" / "image").unlink()
    res = run_module(cluster.args(), capsys)
    assert res["failed"] and "is not on this node" in res["msg"]


def test_check_mode_before_the_head_has_the_image_lists_every_worker(cluster, capsys):
    (cluster.path / "state" / "head" / "image").unlink()
    cluster.set_worker_id("w1", HEAD_ID)
    res = run_module(cluster.args(), capsys, check=True)
    assert not res.get("failed") and res["changed"]
    # Without the head's ID any worker image may be stale: both would receive.
    assert {w["status"] for w in res["workers"]} == {"would_receive"}
