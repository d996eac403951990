"""deployment_state: record rotates current -> previous, prunes only what no kept deployment uses, restore puts
the units and the image tag back; check mode writes and removes nothing."""
import json

import pytest

from ansible.module_utils import basic
from ansible_collections.dgxspark.vllm.plugins.modules import deployment_state as ds


class FakeDocker:
    """Images by ID with their tags, running containers by name (their image ref and ID); records removals."""

    def __init__(self):
        self.images = {}      # id -> [tags]
        self.containers = {}  # name -> (ref, id)
        self.removed = []
        self.held = set()     # IDs a container holds: `image rm` of their last tag fails
        self.parent = {}      # id -> the id it was built on

    def add(self, image_id, *tags):
        for other in self.images.values():
            for t in tags:
                if t in other:
                    other.remove(t)
        self.images.setdefault(image_id, []).extend(tags)

    def lookup(self, name):
        if name in self.images:
            return name
        return next((i for i, tags in self.images.items() if name in tags), None)

    def run(self, args):
        cmd = args[1:]
        if cmd[0] == "inspect":
            c = self.containers.get(cmd[-1])
            return (0, f"true {c[0]} {c[1]}\n", "") if c else (1, "", f"Error: No such object: {cmd[-1]}")
        if cmd[:2] == ["image", "ls"]:
            return 0, "".join(i + "\n" for i in self.images), ""
        if cmd[:4] == ["image", "inspect", "--format", "{{.Parent}}"]:
            return 0, "".join(self.parent.get(i, "") + "\n" for i in cmd[4:]), ""
        if cmd[:2] == ["image", "inspect"]:
            i = self.lookup(cmd[-1])
            if not i:
                return 1, "", f"Error: No such image: {cmd[-1]}"
            return 0, (json.dumps(self.images[i]) if "RepoTags" in cmd[3] else i) + "\n", ""
        if cmd[:2] == ["image", "rm"]:
            i = self.lookup(cmd[2])
            if not i:
                return 1, "", "no such image"
            if cmd[2] in self.images[i]:
                self.images[i].remove(cmd[2])
            if self.images[i] or i in self.held:
                return (1, "", f"conflict: unable to delete {i[:19]} (image is being used by running container)") \
                    if i in self.held and not self.images[i] else (0, "Untagged", "")
            del self.images[i]
            self.removed.append(i)
            return 0, "Deleted", ""
        if cmd[0] == "tag":
            self.add(cmd[1], cmd[2])
            return 0, "", ""
        raise AssertionError(f"unexpected docker {cmd}")


@pytest.fixture(name="docker")
def fixture_docker(monkeypatch):
    fake = FakeDocker()
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, args, **kw: fake.run(args))
    return fake


@pytest.fixture(name="units")
def fixture_units(tmp_path):
    ray, eng = tmp_path / "dgxspark-ray.service", tmp_path / "dgxspark-vllm.service"
    ray.write_text("ray v1\n")
    eng.write_text("engine v1\n")
    return ray, eng


def record(run_module, tmp_path, units, **kw):
    args = dict(action="record", path=str(tmp_path / "state.json"), units=[str(u) for u in units],
                containers=["dgxspark-ray", "dgxspark-vllm"], base_image="base:latest", info={"recipe": {"name": "r"}})
    args.update(kw)
    check = args.pop("check_mode", False)
    return run_module(ds.main, args, check_mode=check, diff=True)


def deploy(docker, units, version):
    """The pair now runs `version`: its units and its image (derived from a base of the same version)."""
    docker.add(f"sha256:base{version}", "base:latest")
    docker.add(f"sha256:run{version}", f"mods:{version}")
    docker.containers["dgxspark-ray"] = (f"mods:{version}", f"sha256:run{version}")
    units[0].write_text(f"ray v{version}\n")
    units[1].write_text(f"engine v{version}\n")


def test_record_keeps_the_running_image_and_the_units_and_a_second_run_changes_nothing(run_module, tmp_path, docker, units):
    deploy(docker, units, 1)
    first = record(run_module, tmp_path, units)
    assert first["changed"] and not first["failed"], first
    assert first["current"]["image"] == {"ref": "mods:1", "id": "sha256:run1"}
    assert first["current"]["base_image"] == {"ref": "base:latest", "id": "sha256:base1"}
    assert first["current"]["units"][str(units[0])] == "ray v1\n"
    assert first["previous"] == {} and first["dropped"] == {}
    again = record(run_module, tmp_path, units)
    assert not again["changed"] and again["current"]["id"] == first["current"]["id"]


def test_a_new_deployment_rotates_and_the_third_prunes_only_the_dropped_images(run_module, tmp_path, docker, units):
    for v in (1, 2):
        deploy(docker, units, v)
        record(run_module, tmp_path, units, prune=True)
    deploy(docker, units, 3)
    res = record(run_module, tmp_path, units, prune=True)
    assert res["changed"] and res["current"]["image"]["id"] == "sha256:run3"
    assert res["previous"]["image"]["id"] == "sha256:run2"
    assert res["dropped"]["image"]["id"] == "sha256:run1"
    # The dropped deployment's running image, then its base; the previous one's stay for the next rollback.
    assert res["pruned"] == ["sha256:run1", "sha256:base1"] == docker.removed
    assert "sha256:run2" in docker.images and "sha256:base2" in docker.images


def test_pruning_keeps_an_image_a_kept_deployment_still_uses_and_names_one_a_container_holds(run_module, tmp_path, docker, units):
    deploy(docker, units, 1)
    record(run_module, tmp_path, units, prune=True)
    deploy(docker, units, 2)
    docker.add("sha256:base1", "base:latest")  # version 2 went back to the first base image
    record(run_module, tmp_path, units, prune=True)
    deploy(docker, units, 3)
    docker.held.add("sha256:run1")
    res = record(run_module, tmp_path, units, prune=True)
    assert res["pruned"] == [] and docker.removed == []
    assert len(res["prune_kept"]) == 1 and res["prune_kept"][0].startswith("sha256:run1: conflict"), res["prune_kept"]


def test_check_mode_records_and_prunes_nothing(run_module, tmp_path, docker, units):
    for v in (1, 2):
        deploy(docker, units, v)
        record(run_module, tmp_path, units, prune=True)
    before = (tmp_path / "state.json").read_text()
    deploy(docker, units, 3)
    res = record(run_module, tmp_path, units, prune=True, check_mode=True)
    assert res["changed"] and res["pruned"] == ["sha256:run1", "sha256:base1"]
    assert docker.removed == [] and (tmp_path / "state.json").read_text() == before
    assert "sha256:run3" in res["diff"]["after"] and "sha256:run3" not in res["diff"]["before"]


def test_nothing_running_fails_naming_the_containers_but_a_check_run_only_says_it_would_record(run_module, tmp_path, docker, units):
    res = record(run_module, tmp_path, units)
    assert res["failed"] and "dgxspark-ray, dgxspark-vllm" in res["msg"] and "site.yml" in res["msg"]
    res = record(run_module, tmp_path, units, check_mode=True)
    assert not res["failed"] and res["changed"] and not (tmp_path / "state.json").exists()


def test_restore_writes_the_units_back_removes_one_recorded_absent_and_points_the_tag_back(run_module, tmp_path, docker, units):
    units[1].unlink()  # the recorded deployment ran Ray only on this node
    deploy(docker, units, 1)
    units[1].unlink()
    record(run_module, tmp_path, units)
    # A failed upgrade left new units (and an engine unit) and moved the tag to a new image.
    units[0].write_text("ray v2\n")
    units[1].write_text("engine v2\n")
    docker.add("sha256:run2", "mods:1")
    args = dict(action="restore", path=str(tmp_path / "state.json"))
    dry = run_module(ds.main, args, check_mode=True, diff=True)
    assert dry["changed"] and units[0].read_text() == "ray v2\n" and docker.lookup("mods:1") == "sha256:run2"
    res = run_module(ds.main, args, diff=True)
    assert res["changed"] and sorted(res["restored_units"]) == sorted(map(str, units))
    assert units[0].read_text() == "ray v1\n" and not units[1].exists()
    assert res["retagged"] == "mods:1" and docker.lookup("mods:1") == "sha256:run1"
    assert not run_module(ds.main, args)["changed"]


def test_restore_refuses_when_nothing_is_recorded_or_the_image_is_gone(run_module, tmp_path, docker, units):
    args = dict(action="restore", path=str(tmp_path / "state.json"))
    res = run_module(ds.main, args)
    assert res["failed"] and "nothing to roll back" in res["msg"]
    deploy(docker, units, 1)
    record(run_module, tmp_path, units)
    del docker.images["sha256:run1"]
    res = run_module(ds.main, args)
    assert res["failed"] and "sha256:run1" in res["msg"] and "no longer on this node" in res["msg"]
    assert units[0].read_text() == "ray v1\n"


def test_an_unreadable_state_file_is_named_with_the_fix(run_module, tmp_path, docker):
    (tmp_path / "state.json").write_text("{not json")
    res = run_module(ds.main, dict(action="read", path=str(tmp_path / "state.json")))
    assert res["failed"] and str(tmp_path / "state.json") in res["msg"] and "move it away" in res["msg"]


def test_pruning_keeps_a_base_other_images_were_built_on_with_its_tag(run_module, tmp_path, docker, units):
    for v in (1, 2):
        deploy(docker, units, v)
        record(run_module, tmp_path, units, prune=True)
    docker.add("sha256:base1", "base:v1")
    docker.add("sha256:child", "next:latest")
    docker.parent["sha256:child"] = "sha256:base1"  # a later build FROM the first base
    deploy(docker, units, 3)
    res = record(run_module, tmp_path, units, prune=True)
    assert res["pruned"] == ["sha256:run1"] == docker.removed
    assert res["prune_kept"] == ["sha256:base1: other images on this node were built on it"]
    assert docker.images["sha256:base1"] == ["base:v1"]
