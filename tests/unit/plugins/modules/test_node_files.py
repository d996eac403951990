"""node_files: folders, files and removals in one call; a second run changes nothing; check mode writes
nothing and tells the truth; diffs per path; bad modes and kinds named with the fix."""
import grp
import os
import pwd
import stat

from ansible_collections.dgxspark.vllm.plugins.modules import node_files as nf


def run(run_module, paths, check=False):
    return run_module(nf.main, {"paths": paths}, check_mode=check, diff=True)


def me():
    return pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name


def test_creates_folders_files_and_removes_then_a_second_run_changes_nothing(run_module, tmp_path):
    (tmp_path / "old.service").write_text("old\n")
    user, group = me()
    paths = [
        {"path": str(tmp_path / "a" / "b"), "state": "directory", "mode": "0750"},
        {"path": str(tmp_path / "a" / "b" / "unit"), "content": "[Unit]\n", "mode": "0640", "owner": user, "group": group},
        {"path": str(tmp_path / "old.service"), "state": "absent"},
    ]
    first = run(run_module, paths)
    assert first["changed"] and not first["failed"], first
    assert first["changed_paths"] == [p["path"] for p in paths]
    assert first["existed"] == {paths[0]["path"]: False, paths[1]["path"]: False, paths[2]["path"]: True}
    assert stat.S_IMODE(os.stat(paths[0]["path"]).st_mode) == 0o750
    assert (tmp_path / "a" / "b" / "unit").read_text() == "[Unit]\n"
    assert stat.S_IMODE(os.stat(paths[1]["path"]).st_mode) == 0o640
    assert not (tmp_path / "old.service").exists()
    assert [d["after"] for d in first["diff"]] == ["directory mode 0750\n", "[Unit]\n", "absent\n"]
    again = run(run_module, paths)
    assert not again["changed"] and again["changed_paths"] == [] and "diff" not in again
    assert again["existed"][paths[1]["path"]] is True


def test_a_changed_content_or_mode_is_the_only_change_and_shown_as_a_diff(run_module, tmp_path):
    unit = tmp_path / "unit"
    unit.write_text("ExecStart=old\n")
    os.chmod(unit, 0o644)
    out = run(run_module, [{"path": str(unit), "content": "ExecStart=new\n", "mode": "0644"},
                           {"path": str(tmp_path), "state": "directory"}])
    assert out["changed_paths"] == [str(unit)]
    assert out["diff"] == [{"before_header": str(unit), "after_header": str(unit),
                            "before": "ExecStart=old\n", "after": "ExecStart=new\n"}]
    mode_only = run(run_module, [{"path": str(unit), "content": "ExecStart=new\n", "mode": "0600"}])
    assert mode_only["changed_paths"] == [str(unit)] and "mode 0600" in mode_only["diff"][0]["after"]
    assert stat.S_IMODE(os.stat(unit).st_mode) == 0o600 and unit.read_text() == "ExecStart=new\n"


def test_check_mode_reports_every_change_and_writes_nothing(run_module, tmp_path):
    keep = tmp_path / "keep"
    keep.write_text("x\n")
    paths = [{"path": str(tmp_path / "new"), "state": "directory"},
             {"path": str(tmp_path / "new" / "f"), "content": "y\n"},
             {"path": str(keep), "state": "absent"}]
    out = run(run_module, paths, check=True)
    assert out["changed"] and out["changed_paths"] == [p["path"] for p in paths]
    assert not (tmp_path / "new").exists() and keep.read_text() == "x\n"


def test_a_file_keeps_its_mode_when_none_is_given_and_new_files_are_0644(run_module, tmp_path):
    f = tmp_path / "f"
    f.write_text("a")
    os.chmod(f, 0o600)
    run(run_module, [{"path": str(f), "content": "b"}, {"path": str(tmp_path / "g"), "content": "c"}])
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o600 and f.read_text() == "b"
    assert stat.S_IMODE(os.stat(tmp_path / "g").st_mode) == 0o644
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".dgxspark-")]


def test_bad_input_is_named_with_the_fix_and_nothing_is_written(run_module, tmp_path):
    (tmp_path / "file").write_text("")
    (tmp_path / "dir").mkdir()
    cases = [
        ({"path": str(tmp_path / "x"), "content": "", "mode": "rw-r--r--"}, "is not octal"),
        ({"path": str(tmp_path / "file"), "state": "directory"}, "is a file where a folder must be"),
        ({"path": str(tmp_path / "dir"), "content": "x"}, "is a folder where a file must be"),
        ({"path": str(tmp_path / "y"), "content": "", "owner": "no-such-user-dgxspark"}, "no user 'no-such-user-dgxspark'"),
        ({"path": "relative/path", "content": ""}, "is not an absolute path"),
    ]
    good = {"path": str(tmp_path / "written-first"), "content": "z\n"}
    for spec, words in cases:
        # A good path before the bad one is not written either: every path is judged before any changes.
        out = run(run_module, [good, spec])
        assert out["failed"] and words in out["msg"], (spec, out)
        assert not (tmp_path / "written-first").exists(), spec
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    out = run(run_module, [{"path": str(tmp_path / "g"), "content": "", "group": "no-such-group-dgxspark"}])
    assert out["failed"] and "no group 'no-such-group-dgxspark'" in out["msg"]
