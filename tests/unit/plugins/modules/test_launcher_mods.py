"""The launcher_mods module: groups expanded in order with digests, clear failures, no PyYAML needed."""

import pytest

from ansible_collections.dgxspark.vllm.plugins.modules import launcher_mods

GROUP = "# a group\nname: g\ndescription: >-\n  two mods\nmods:\n  - mods/a   # first\n  - 'mods/b'\n"


@pytest.fixture(name="run")
def fixture_run(run_module):
    """(result, exit code as Ansible would see it)."""
    def run(args):
        out = run_module(launcher_mods.main, args, check_mode=True)
        return out, 1 if out["failed"] else 0
    return run


@pytest.fixture
def checkout(tmp_path):
    for name in ("a", "b"):
        (tmp_path / "mods" / name).mkdir(parents=True)
        (tmp_path / "mods" / name / "run.sh").write_text("echo %s\n" % name)
    (tmp_path / "mods" / "g").mkdir()
    (tmp_path / "mods" / "g" / "mod-group.yaml").write_text(GROUP)
    return tmp_path


def test_expands_the_group_with_digests_in_check_mode(checkout, run):
    out, rc = run({"root": str(checkout), "mods": ["mods/g"]})
    assert rc == 0 and not out["changed"]
    assert [m["name"] for m in out["mods"]] == ["a", "b"]
    assert all(len(m["digest"]) == 64 for m in out["mods"]) and out["mods"][0]["digest"] != out["mods"][1]["digest"]


def test_group_files_read_without_pyyaml(checkout, monkeypatch):
    monkeypatch.setattr(launcher_mods, "yaml", None)
    assert launcher_mods.load_group(str(checkout / "mods" / "g" / "mod-group.yaml")) == {"mods": ["mods/a", "mods/b"]}


def test_missing_checkout_and_missing_mod_are_named(checkout, run):
    out, rc = run({"root": str(checkout / "nope"), "mods": ["mods/g"]})
    assert rc == 1 and "is not a folder on this host" in out["msg"]
    (checkout / "mods" / "b" / "run.sh").unlink()
    out, rc = run({"root": str(checkout), "mods": ["mods/g"]})
    assert rc == 1 and "mods/b" in out["msg"] and "has no run.sh" in out["msg"] and "mods/g/mod-group.yaml" in out["msg"]
