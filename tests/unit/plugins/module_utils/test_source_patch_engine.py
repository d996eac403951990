"""The patch engine on real files: results, idempotence, check mode, restore on failure, the script entry."""
import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

from ansible_collections.dgxspark.vllm.plugins.module_utils import _source_patch as engine

SOURCE = textwrap.dedent('''\
    import os

    TIMEOUT = 10


    def timeout():
        return TIMEOUT
    ''')
OLD = "TIMEOUT = 10\n"
NEW = "TIMEOUT = int(os.environ.get('APP_TIMEOUT', '60'))\n"


@pytest.fixture
def pkg(tmp_path, monkeypatch):
    """An importable package `demoapp` with a settings module and installed metadata (version 1.4.0)."""
    (tmp_path / "demoapp").mkdir()
    (tmp_path / "demoapp" / "__init__.py").write_text("raise RuntimeError('the engine must not import packages')\n")
    (tmp_path / "demoapp" / "settings.py").write_text(SOURCE)
    meta = tmp_path / "demoapp-1.4.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: demoapp\nVersion: 1.4.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path / "demoapp" / "settings.py"


def mod(**kw):
    base = {"name": "demo", "module": "demoapp.settings", "old": OLD, "new": NEW}
    base.update(kw)
    return base


def test_applies_by_module_name_without_importing_the_package(pkg):
    res = engine.patch(mod())
    assert (res["result"], res["changed"], res["target"]) == ("applied", True, str(pkg))
    assert pkg.read_text() == SOURCE.replace(OLD, NEW)
    assert "-TIMEOUT = 10\n+TIMEOUT = int(" in res["diff"]
    assert list((pkg.parent / "__pycache__").glob("settings.*.pyc"))


def test_second_run_is_already_applied(pkg):
    engine.patch(mod())
    stamp = pkg.stat().st_mtime_ns
    res = engine.patch(mod())
    assert (res["result"], res["changed"], res["diff"]) == ("already_applied", False, "")
    assert pkg.stat().st_mtime_ns == stamp


def test_by_path_keeps_the_file_mode(pkg):
    pkg.chmod(0o640)
    assert engine.patch(mod(module=None, path=str(pkg)))["result"] == "applied"
    assert pkg.stat().st_mode & 0o777 == 0o640


def test_check_mode_reports_the_diff_and_writes_nothing(pkg):
    res = engine.patch(mod(), check=True)
    assert res["result"] == "applied" and "+TIMEOUT = int(" in res["diff"]
    assert pkg.read_text() == SOURCE


def test_marker_means_not_needed(pkg):
    res = engine.patch(mod(not_needed={"marker": "def timeout"}))
    assert (res["result"], res["changed"]) == ("not_needed", False)
    assert pkg.read_text() == SOURCE


@pytest.mark.parametrize("spec, expected", [(">=1.4", "not_needed"), (">=2.0", "target_missing"),
                                            (">=1.0,<1.4", "target_missing")])
def test_version_condition_applies_only_when_the_block_is_gone(pkg, spec, expected):
    pkg.write_text(SOURCE.replace(OLD, "TIMEOUT = 30\n"))
    res = engine.patch(mod(not_needed={"distribution": "demoapp", "version": spec}))
    assert (res["result"], res["version"]) == (expected, "1.4.0")


def test_version_condition_does_not_skip_a_block_that_is_still_there(pkg):
    res = engine.patch(mod(not_needed={"distribution": "demoapp", "version": ">=1.0"}))
    assert res["result"] == "applied"


def test_missing_targets(pkg, tmp_path):
    assert engine.patch(mod(module="demoapp.nothere"))["result"] == "target_missing"
    assert engine.patch(mod(module="no_such_package.settings"))["result"] == "target_missing"
    assert engine.patch(mod(module=None, path=str(tmp_path / "gone.py")))["result"] == "target_missing"
    res = engine.patch(mod(old="TIMEOUT = 99\n"))
    assert res["result"] == "target_missing" and "old block is not in" in res["message"]
    assert res["ok"] and not engine.patch(mod(old="TIMEOUT = 99\n"), strict=True)["ok"]
    assert not engine.patch(mod(old="TIMEOUT = 99\n", strict=True))["ok"]
    assert engine.patch(mod(old="TIMEOUT = 99\n", strict=False), strict=True)["ok"]


def test_ambiguous_block_fails_untouched(pkg):
    pkg.write_text(SOURCE + OLD)
    res = engine.patch(mod())
    assert res["result"] == "failed" and "2 times" in res["message"]
    assert pkg.read_text() == SOURCE + OLD


def test_new_code_that_does_not_compile_is_refused(pkg):
    res = engine.patch(mod(new="TIMEOUT = (\n"))
    assert res["result"] == "failed" and "would not compile" in res["message"]
    assert pkg.read_text() == SOURCE


def test_failed_byte_compile_restores_the_file(pkg, monkeypatch):
    import py_compile

    def broken(path):
        raise py_compile.PyCompileError(SyntaxError, SyntaxError("disk full"), path)
    monkeypatch.setattr(engine, "_byte_compile", broken)
    res = engine.patch(mod())
    assert res["result"] == "failed" and "restored" in res["message"]
    assert pkg.read_text() == SOURCE


@pytest.mark.parametrize("bad, problem", [
    ({"name": "has space"}, "use letters"),
    ({"module": None}, "exactly one of 'module'"),
    ({"path": "/x.py"}, "exactly one of 'module'"),
    ({"script": "true"}, "either 'old' and 'new'"),
    ({"new": NEW.replace(NEW, OLD)}, "the same text"),
    ({"not_needed": {"version": ">=1"}}, "both 'distribution' and 'version'"),
    ({"not_needed": {"distribution": "x", "version": "~1"}}, "clauses like"),
    ({"targte": "typo"}, "unknown keys targte"),
])
def test_invalid_definitions_are_named(pkg, bad, problem):
    res = engine.patch(mod(**bad))
    assert res["result"] == "failed" and problem in res["message"], res["message"]
    assert pkg.read_text() == SOURCE


def test_a_definition_that_is_not_a_dict_is_a_failed_result():
    res = engine.patch("fix_it")
    assert (res["result"], res["ok"]) == ("failed", True)
    assert "a mod must be a dict, got str" in res["message"]
    assert not engine.patch(["x"], strict=True)["ok"]


@pytest.mark.parametrize("version, spec, ok", [
    ("7.1.0", ">=8.0.0", False), ("8.0.2", ">=8.0.0", True), ("8.0", ">=8.0.0", True),
    ("8.0.0rc1", ">=8.0.0", False), ("10.1", ">9.2", True), ("1.2.3", "==1.2.3", True), ("1.2.3", "!=1.2.3", False),
])
def test_version_matches(version, spec, ok):
    assert engine.version_matches(version, spec) is ok


def test_script_mods(pkg):
    res = engine.patch({"name": "s", "path": str(pkg), "script": "grep -q 'TIMEOUT = 10' \"$MOD_TARGET\" && echo not_needed"})
    assert res["result"] == "not_needed"
    assert engine.patch({"name": "s", "path": str(pkg), "script": "echo patched"})["result"] == "applied"
    res = engine.patch({"name": "s", "path": str(pkg), "script": "echo oops; exit 3"})
    assert res["result"] == "failed" and "exited 3" in res["message"]


def test_script_entry_reports_json(pkg, tmp_path):
    spec = tmp_path / "mods.json"
    spec.write_text(json.dumps({"mods": [mod(), mod(name="gone", old="nope\n", new="yes\n")], "strict": True}))
    run = subprocess.run([sys.executable, engine.__file__, str(spec)], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(pkg.parent.parent), "PATH": "/usr/bin:/bin"})
    out = json.loads(run.stdout)
    assert [r["result"] for r in out["results"]] == ["applied", "target_missing"]
    assert out["failed"] == ["gone"]


@pytest.fixture
def launcher_mod(tmp_path, monkeypatch):
    """A launcher mod folder whose run.sh records where and how it ran."""
    monkeypatch.setattr(engine, "LAUNCHER_DEST", str(tmp_path / "workspace" / "mods"))
    folder = tmp_path / "checkout" / "fix-demo"
    folder.mkdir(parents=True)
    (folder / "data.txt").write_text("payload\n")
    (folder / "run.sh").write_text('#!/bin/bash\nset -e\npwd > ran.txt\necho "$WORKSPACE_DIR" >> ran.txt\n'
                                   'cat data.txt >> ran.txt\necho "patched it"\n')
    return folder


def test_launcher_mod_runs_from_its_copy_like_the_launcher(launcher_mod, tmp_path):
    result = engine.patch({"name": "fix-demo", "launcher": str(launcher_mod)})
    dest = tmp_path / "workspace" / "mods" / "fix-demo"
    assert (result["result"], result["ok"], result["strict"]) == ("applied", True, True)
    assert "patched it" in result["message"]
    assert (dest / "ran.txt").read_text().splitlines() == [str(dest), str(pathlib.Path.cwd()), "payload"]
    assert not (launcher_mod / "ran.txt").exists(), "the mod runs from its copy, not from the checkout"


def test_failed_launcher_mod_is_strict_by_default(launcher_mod):
    (launcher_mod / "run.sh").write_text("#!/bin/bash\necho 'Could not find expected block' >&2\nexit 3\n")
    result = engine.patch({"name": "fix-demo", "launcher": str(launcher_mod)})
    assert (result["result"], result["ok"]) == ("failed", False)
    assert "run.sh exited 3: Could not find expected block" in result["message"]
    relaxed = engine.patch({"name": "fix-demo", "launcher": str(launcher_mod), "strict": False})
    assert (relaxed["result"], relaxed["ok"]) == ("failed", True)


def test_launcher_mod_is_not_run_in_check_mode(launcher_mod, tmp_path):
    result = engine.patch({"name": "fix-demo", "launcher": str(launcher_mod)}, check=True)
    assert result["result"] == "applied" and "not run" in result["message"]
    assert not (tmp_path / "workspace").exists()


def test_launcher_mod_takes_no_patch_keys():
    problems = engine.validate({"name": "fix-demo", "launcher": "/x", "old": "a", "new": "b"})
    assert problems and "takes only" in problems[0]
