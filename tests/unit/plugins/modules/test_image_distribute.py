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
    if os.environ.get("FAKE_OTHER_ID"):  # the tag moved to another image between the probe and the save
        data = b"x" * PAYLOAD + b"b" * 64
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


@pytest.fixture(name="distribute")
def fixture_distribute(run_module):
    return lambda args, check=False: run_module(mod.main, args, check_mode=check)


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


def test_streams_to_workers_that_lack_the_image_then_does_nothing(cluster, distribute):
    res = distribute(cluster.args())
    assert res["changed"] and not res.get("failed"), res
    assert cluster.worker_id("w1") == cluster.worker_id("w2") == HEAD_ID
    assert {w["status"] for w in res["workers"]} == {"transferred"}
    assert all(w["bytes"] == PAYLOAD + 64 for w in res["workers"])
    again = distribute(cluster.args())
    assert not again["changed"] and {w["status"] for w in again["workers"]} == {"present"}


def test_the_stream_keeps_its_count_in_the_progress_file(cluster, distribute, tmp_path):
    counter = tmp_path / "stream.progress"
    res = distribute(dict(cluster.args(), progress_file=str(counter)))
    assert res["changed"] and not res.get("failed"), res
    # One save for both workers: what was read once, against the image's size (whole, uncompressed).
    done, total = (int(x) for x in counter.read_text().split())
    assert done == PAYLOAD + 64 and total == res["size"]


def test_the_new_id_comes_back_in_the_load_session(cluster, monkeypatch, distribute):
    probed = []
    real = mod.Distributor.probe
    monkeypatch.setattr(mod.Distributor, "probe", lambda self, w: probed.append(w["name"]) or real(self, w))
    res = distribute(cluster.args())
    assert [by_name(res)[n]["id"] for n in ("w1", "w2")] == [HEAD_ID, HEAD_ID]
    assert sorted(probed) == ["w1", "w2"]  # one probe each before the transfer, none after


@pytest.mark.parametrize("parallel, saves", [(4, 1), (1, 2)])
def test_workers_that_receive_at_once_share_one_save(cluster, parallel, saves, distribute):
    res = distribute(cluster.args(parallel=parallel))
    assert {w["status"] for w in res["workers"]} == {"transferred"}
    assert cluster.worker_id("w1") == cluster.worker_id("w2") == HEAD_ID
    assert (cluster.path / "state" / "saves").read_text().count("save") == saves


def test_only_the_differing_worker_receives(cluster, distribute):
    cluster.set_worker_id("w1", HEAD_ID)
    cluster.set_worker_id("w2", "b" * 64)
    res = by_name(distribute(cluster.args()))
    assert res["w1"]["status"] == "present" and res["w1"]["bytes"] == 0
    assert res["w2"]["status"] == "transferred" and res["w2"]["previous_id"] == "b" * 64
    assert cluster.worker_id("w2") == HEAD_ID


def test_check_mode_lists_receivers_and_changes_nothing(cluster, distribute):
    cluster.set_worker_id("w1", HEAD_ID)
    res = distribute(cluster.args(), check=True)
    assert res["changed"]
    assert by_name(res)["w2"]["status"] == "would_receive" and by_name(res)["w1"]["status"] == "present"
    assert "w2: would receive example/serving:latest" in res["msg"]
    assert cluster.worker_id("w2") is None
    assert "w2: absent" in res["diff"]["before"] and "w2: " + HEAD_ID in res["diff"]["after"]


def test_too_little_free_space_fails_before_any_transfer(cluster, distribute):
    res = distribute(cluster.args(free_space_factor=1e9))
    assert res["failed"]
    assert res["msg"].startswith("Nothing was transferred.")
    assert "w1:" in res["msg"] and "free on %s" % cluster.path in res["msg"] and "the image needs" in res["msg"]
    assert cluster.worker_id("w1") is None and cluster.worker_id("w2") is None


def test_cut_stream_leaves_no_image_and_the_next_run_converges(cluster, monkeypatch, distribute):
    monkeypatch.setenv("FAKE_CUT", "1")
    res = distribute(cluster.args(workers=[{"name": "w1", "host": "10.0.0.11"}]))
    assert res["failed"] and "w1" in res["msg"]
    assert by_name(res)["w1"]["status"] == "failed" and by_name(res)["w1"]["message"]
    assert cluster.worker_id("w1") is None
    monkeypatch.delenv("FAKE_CUT")
    again = distribute(cluster.args(workers=[{"name": "w1", "host": "10.0.0.11"}]))
    assert by_name(again)["w1"]["status"] == "transferred" and cluster.worker_id("w1") == HEAD_ID


def test_a_load_that_registers_another_id_is_never_accepted(cluster, monkeypatch, distribute):
    # The stand-in's load takes the stream whole, so only the module's own ID check stands in the way.
    monkeypatch.setenv("FAKE_OTHER_ID", "1")
    res = distribute(cluster.args(workers=[{"name": "w1", "host": "10.0.0.11"}]))
    assert cluster.worker_id("w1") == "b" * 64, "the stand-in did not load the other image"
    assert res["failed"] and by_name(res)["w1"]["status"] != "transferred", res
    assert "w1" in res["msg"] and HEAD_ID[:12] in res["msg"], res["msg"]


@pytest.mark.skipif(not shutil.which("zstd"), reason="zstd not installed")
def test_compressed_stream_sends_fewer_bytes(cluster, distribute):
    res = distribute(cluster.args(compress=True))
    assert {w["status"] for w in res["workers"]} == {"transferred"}
    assert all(0 < w["bytes"] < PAYLOAD // 10 for w in res["workers"])
    assert cluster.worker_id("w1") == HEAD_ID


def test_unreachable_worker_is_named_with_the_fix(cluster, monkeypatch, distribute):
    monkeypatch.setattr(mod.Distributor, "ssh_cmd",
                        lambda self, w, c: ["sh", "-c", "echo 'Permission denied (publickey).' >&2; exit 255"])
    res = distribute(cluster.args(workers=[{"name": "w1", "host": "10.0.0.11", "user": "spark"}]))
    assert res["failed"]
    assert "w1 (10.0.0.11)" in res["msg"] and "Permission denied" in res["msg"] and "node_trust" in res["msg"]


def test_head_without_the_image_fails(cluster, distribute):
    (cluster.path / "state" / "head" / "image").unlink()
    res = distribute(cluster.args())
    assert res["failed"] and "is not on this node" in res["msg"]


def test_check_mode_before_the_head_has_the_image_lists_every_worker(cluster, distribute):
    (cluster.path / "state" / "head" / "image").unlink()
    cluster.set_worker_id("w1", HEAD_ID)
    res = distribute(cluster.args(), check=True)
    assert not res.get("failed") and res["changed"]
    # Without the head's ID any worker image may be stale: both would receive.
    assert {w["status"] for w in res["workers"]} == {"would_receive"}


# A container CLI stand-in whose images are layers: `save` writes a real archive (podman's layout,
# or Docker's legacy one), `load` reads it as podman does: every layer the manifest names must be
# in the archive, and a layer's bytes are read only when the node lacks that layer
# (FAKE_REFUSE_PARTIAL: this engine reads and checks every one).
LAYERED_CLI = r'''#!/usr/bin/env python3
import hashlib, io, json, os, pathlib, sys, tarfile
state = pathlib.Path(os.environ["FAKE_STATE"]) / os.environ.get("FAKE_NODE", "head")
state.mkdir(parents=True, exist_ok=True)
db = state / "db.json"
data = json.loads(db.read_text()) if db.exists() else {"images": {}, "layers": {}}
args = sys.argv[1:]
def layer_bytes(d):
    return (d * 2000).encode()
if args[:2] == ["image", "inspect"]:
    fmt, refs = args[3], args[4:]
    for ref in refs:
        img = data["images"].get(ref) or next((i for i in data["images"].values() if i["id"] == ref), None)
        if img is None:
            sys.exit(print("Error: image not known: %s" % ref, file=sys.stderr) or 125)
        out = fmt.replace("{{.Id}}", img["id"]).replace("{{.Size}}", str(len(img["layers"]) * 128000))
        out = out.replace("{{range .RootFS.Layers}}{{.}},{{end}}", "".join(l + "," for l in img["layers"]))
        out = out.replace("{{range .RootFS.Layers}}{{println .}}{{end}}", "".join(l + "\n" for l in img["layers"]))
        sys.stdout.write(out if out.endswith("\n") else out + "\n")
elif args[:2] == ["image", "ls"]:
    print("\n".join(sorted({i["id"] for i in data["images"].values()})))
elif args[0] == "save":
    img = data["images"][args[1]]
    buf = io.BytesIO()
    legacy = os.environ.get("FAKE_LAYOUT") == "legacy"
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def add(name, blob):
            info = tarfile.TarInfo(name); info.size = len(blob); tar.addfile(info, io.BytesIO(blob))
        names = []
        for i, l in enumerate(img["layers"]):
            name = ("%064x/layer.tar" % (i + 1)) if legacy else l.split(":")[1] + ".tar"
            add(name, layer_bytes(l)); names.append(name)
        add("config.json", json.dumps({"id": img["id"], "layers": img["layers"]}).encode())
        add("manifest.json", json.dumps([{"Config": "config.json", "RepoTags": [args[1]], "Layers": names}]).encode())
    sys.stdout.buffer.write(buf.getvalue())
elif args[0] == "load":
    tar = tarfile.open(fileobj=io.BytesIO(sys.stdin.buffer.read()))
    files = {m.name: m for m in tar.getmembers()}
    manifest = json.loads(tar.extractfile(files["manifest.json"]).read())[0]
    cfg = json.loads(tar.extractfile(files[manifest["Config"]]).read())
    if any(name not in files for name in manifest["Layers"]):  # podman's reader refuses that
        sys.exit(print("Error: Some layer tarfiles are missing in the tarball", file=sys.stderr) or 125)
    for l, name in zip(cfg["layers"], manifest["Layers"]):
        if l in data["layers"] and not os.environ.get("FAKE_REFUSE_PARTIAL"):
            continue  # held: the file is not read
        if tar.extractfile(files[name]).read() != layer_bytes(l):
            sys.exit(print("Error: layer %s: content does not match its diff ID" % l, file=sys.stderr) or 125)
        data["layers"][l] = True
    data["images"][manifest["RepoTags"][0]] = {"id": cfg["id"], "layers": cfg["layers"]}
    db.write_text(json.dumps(data))
    print("Loaded image: %s" % manifest["RepoTags"][0])
'''

BASE = ["sha256:" + c * 64 for c in "123"]
TOP = "sha256:" + "9" * 64


@pytest.fixture
def layered(cluster):
    cli = cluster.path / "layered-cli"
    cli.write_text(LAYERED_CLI)
    cli.chmod(cli.stat().st_mode | stat.S_IEXEC)

    def put(node, ref, image_id, layers):
        f = cluster.path / "state" / node / "db.json"
        f.parent.mkdir(parents=True, exist_ok=True)
        data = json.loads(f.read_text()) if f.exists() else {"images": {}, "layers": {}}
        data["images"][ref] = {"id": image_id, "layers": layers}
        data["layers"].update({x: True for x in layers})
        f.write_text(json.dumps(data))

    put("head", "example/serving:base", "b" * 64, BASE)
    put("head", "example/serving:mods", "d" * 64, BASE + [TOP])
    put("w1", "example/serving:base", "b" * 64, BASE)  # w1 has the base; w2 nothing

    def args(**kw):
        return cluster.args(ref="example/serving:mods", container_cli=[str(cli)], **kw)

    def image_id(node, ref="example/serving:mods"):
        f = cluster.path / "state" / node / "db.json"
        return json.loads(f.read_text())["images"].get(ref, {}).get("id") if f.exists() else None
    return args, image_id


def test_a_worker_with_the_base_gets_only_the_top_layer(layered, distribute):
    args, image_id = layered
    res = distribute(args())
    assert res["changed"] and not res.get("failed"), res
    w = by_name(res)
    assert image_id("w1") == image_id("w2") == "d" * 64
    assert (w["w1"]["layers_sent"], w["w1"]["layers_reused"], w["w1"]["stream"]) == (1, 3, "layers")
    assert (w["w2"]["layers_sent"], w["w2"]["layers_reused"], w["w2"]["stream"]) == (4, 0, "whole")
    assert w["w1"]["bytes"] < w["w2"]["bytes"] / 3


def test_check_mode_counts_the_layers_without_sending(layered, distribute):
    args, image_id = layered
    res = distribute(args(), check=True)
    w = by_name(res)
    assert (w["w1"]["status"], w["w1"]["layers_sent"], w["w1"]["layers_reused"]) == ("would_receive", 1, 3)
    assert image_id("w1") is None


def test_an_engine_that_refuses_the_partial_archive_gets_the_whole_one(layered, monkeypatch, distribute):
    args, image_id = layered
    monkeypatch.setenv("FAKE_REFUSE_PARTIAL", "1")
    res = distribute(args(workers=[{"name": "w1", "host": "10.0.0.11"}]))
    w = by_name(res)["w1"]
    assert image_id("w1") == "d" * 64 and w["status"] == "transferred"
    assert w["stream"].startswith("whole: the load refused the archive without the 3 layers") and w["layers_sent"] == 4
    assert "content does not match" in w["stream"]


def test_dockers_legacy_layout_is_sent_whole_and_says_so(layered, monkeypatch, distribute):
    args, image_id = layered
    monkeypatch.setenv("FAKE_LAYOUT", "legacy")
    res = distribute(args(workers=[{"name": "w1", "host": "10.0.0.11"}]))
    w = by_name(res)["w1"]
    assert image_id("w1") == "d" * 64
    assert w["stream"].startswith("whole: the archive is in Docker's legacy layout") and w["layers_reused"] == 0


def test_layers_false_sends_the_whole_image(layered, distribute):
    args, _ = layered
    w = by_name(distribute(args(layers=False, workers=[{"name": "w1", "host": "10.0.0.11"}])))["w1"]
    assert (w["layers_sent"], w["layers_reused"], w["stream"]) == (4, 0, "whole")


# Docker's store as the layered CLI keeps it: the wanted layers in full, the others empty, the image's
# own config and a manifest; FAKE_STORE_BROKEN rebuilds the wanted layers wrong.
STORE_SCRIPT = r'''
import io, json, os, sys, tarfile
db, image_id, ref, wanted = sys.argv[1], sys.argv[2], sys.argv[3], set(sys.argv[4:])
img = json.load(open(db))["images"][ref]
assert img["id"] == image_id
if os.environ.get("FAKE_STORE_ASKED"):  # what the module asked the store for, as it asked
    open(os.environ["FAKE_STORE_ASKED"], "a").write(json.dumps(sys.argv[4:]) + "\n")
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as tar:
    def add(name, blob):
        info = tarfile.TarInfo(name); info.size = len(blob); tar.addfile(info, io.BytesIO(blob))
    for l in img["layers"]:
        full = b"x" if os.environ.get("FAKE_STORE_BROKEN") else (l * 2000).encode()
        add(l.split(":")[1] + ".tar", full if l in wanted else b"")
    add("config.json", json.dumps({"id": img["id"], "layers": img["layers"]}).encode())
    add("manifest.json", json.dumps([{"Config": "config.json", "RepoTags": [ref],
                                      "Layers": [l.split(":")[1] + ".tar" for l in img["layers"]]}]).encode())
sys.stdout.buffer.write(buf.getvalue())
'''


@pytest.fixture
def store(layered, cluster, monkeypatch):
    """The head reads the layers from the (stand-in) store; returns the layered fixture's helpers and the
    layer lists the store was asked for (as the store script received them)."""
    asked = []
    db = str(cluster.path / "state" / "head" / "db.json")
    log = cluster.path / "store-asked.jsonl"
    monkeypatch.setenv("FAKE_STORE_ASKED", str(log))

    def source(self, head_id):
        return [], "/var/lib/docker", "Docker Engine's overlay2 store at /var/lib/docker"

    monkeypatch.setattr(mod.Distributor, "store_source", source)
    monkeypatch.setattr(mod._layerstore, "script", lambda: STORE_SCRIPT)
    real = mod.Distributor.transfer

    def transfer(self, group, skip=None, layers=(), store=None):
        result = real(self, group, skip, layers, None if store is None else dict(store, root=db))
        if log.exists():
            asked.extend(json.loads(line) for line in log.read_text().splitlines())
            log.unlink()
        return result

    monkeypatch.setattr(mod.Distributor, "transfer", transfer)
    return layered, asked


def test_the_store_is_asked_only_for_the_layers_a_worker_lacks(store, distribute):
    (args, image_id), asked = store
    res = distribute(args(workers=[{"name": "w1", "host": "10.0.0.11"}]))
    w = by_name(res)["w1"]
    assert image_id("w1") == "d" * 64 and w["status"] == "transferred", res
    assert asked == [[TOP]] and (w["layers_sent"], w["layers_reused"], w["stream"]) == (1, 3, "layers")
    assert res["read_from"] == "store: Docker Engine's overlay2 store at /var/lib/docker"


def test_a_store_archive_the_worker_refuses_is_followed_by_the_whole_save(store, monkeypatch, distribute):
    (args, image_id), _ = store
    monkeypatch.setenv("FAKE_STORE_BROKEN", "1")
    res = distribute(args(workers=[{"name": "w1", "host": "10.0.0.11"}]))
    w = by_name(res)["w1"]
    assert image_id("w1") == "d" * 64 and w["status"] == "transferred", res
    assert w["stream"].startswith("whole: the archive read from the store failed") and "content does not match" in w["stream"]


def test_store_without_a_readable_store_fails_before_any_transfer(layered, distribute):
    args, image_id = layered
    res = distribute(args(read_from="store", workers=[{"name": "w1", "host": "10.0.0.11"}]))
    assert res.get("failed") and "read_from is store, but the CLI is not Docker Engine's" in res["msg"], res
    assert image_id("w1") is None


def test_auto_without_a_store_reads_through_save_and_says_why(layered, distribute):
    args, image_id = layered
    res = distribute(args(workers=[{"name": "w1", "host": "10.0.0.11"}]))
    assert res["read_from"].startswith("save: the CLI is not Docker Engine's") and image_id("w1") == "d" * 64


class _Module:
    """What store_source asks of the module: Docker's info, then whether the image's config is readable."""

    def __init__(self, info):
        self.info, self.params, self.asked = info, {
            "ref": "img", "container_cli": ["docker"], "ssh_key": None, "known_hosts": None, "ssh_port": 22,
            "host_key_checking": "accept-new", "connect_timeout": 10, "progress_file": None}, []

    def run_command(self, argv):
        self.asked.append(argv)
        return (0, self.info, "") if "info" in argv else (0, "", "")


def test_the_store_is_read_only_from_docker_engines_overlay2_driver():
    # The layer-wise reader knows overlay2's layout alone: another driver reads through docker save instead.
    prefix, root, why = mod.Distributor(_Module("devicemapper|/var/lib/docker")).store_source("sha256:" + "a" * 64)
    assert (prefix, root) == (None, None) and why == "Docker's storage driver is devicemapper, not overlay2"
    module = _Module("overlay2|/var/lib/docker")
    prefix, root, why = mod.Distributor(module).store_source("sha256:" + "a" * 64)
    assert root == "/var/lib/docker" and why == "Docker Engine's overlay2 store at /var/lib/docker"
    assert module.asked[-1][-1] == "/var/lib/docker/image/overlay2/imagedb/content/sha256/" + "a" * 64
