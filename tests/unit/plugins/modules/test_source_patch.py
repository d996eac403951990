"""The source_patch module: results, check mode with diff, warnings, strict failures, another Python."""
import sys

import pytest

from ansible_collections.dgxspark.vllm.plugins.modules import source_patch

SOURCE = "import os\n\nTIMEOUT = 10\n"
OLD = "TIMEOUT = 10\n"
NEW = "TIMEOUT = int(os.environ.get('APP_TIMEOUT', '60'))\n"


@pytest.fixture(name="run")
def fixture_run(run_module):
    def run(args, check_mode=False, diff=False):
        out = run_module(source_patch.main, args, check_mode=check_mode, diff=diff)
        out["_rc"] = 1 if out["failed"] else 0
        return out
    return run


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "settings.py"
    path.write_text(SOURCE)
    return path


def test_applies_then_is_already_applied(target, run):
    out = run({"path": str(target), "old": OLD, "new": NEW})
    assert (out["changed"], out["result"], out["_rc"]) == (True, "applied", 0)
    assert target.read_text() == SOURCE.replace(OLD, NEW)
    out = run({"path": str(target), "old": OLD, "new": NEW})
    assert (out["changed"], out["result"]) == (False, "already_applied")


def test_check_mode_with_diff_shows_the_change_and_writes_nothing(target, run):
    out = run({"path": str(target), "old": OLD, "new": NEW}, check_mode=True, diff=True)
    assert (out["changed"], out["result"]) == (True, "applied")
    assert "-TIMEOUT = 10\n+TIMEOUT = int(os.environ" in out["diff"]["prepared"]
    assert target.read_text() == SOURCE


def test_missing_block_warns_and_reports(target, monkeypatch, run):
    # Recorded at the call: how warnings reach the output depends on what else the process imported.
    warned = []
    monkeypatch.setattr(source_patch.AnsibleModule, "warn", lambda self, msg: warned.append(msg))
    out = run({"name": "demo", "path": str(target), "old": "nope\n", "new": NEW})
    assert (out["_rc"], out["changed"], out["result"]) == (0, False, "target_missing")
    assert len(warned) == 1 and warned[0].startswith("demo: the old block is not in")


def test_strict_fails_on_a_missing_target(tmp_path, run):
    out = run({"path": str(tmp_path / "gone.py"), "old": OLD, "new": NEW, "strict": True})
    assert out["_rc"] == 1 and out["failed"] and out["result"] == "target_missing"
    assert "does not exist" in out["msg"]


def test_bad_version_condition_fails_before_touching(target, run):
    out = run({"path": str(target), "old": OLD, "new": NEW,
                      "not_needed": {"distribution": "x", "version": "latest"}})
    assert out["_rc"] == 1 and "clauses like" in out["msg"]
    assert target.read_text() == SOURCE


def test_module_resolved_with_another_python(tmp_path, run):
    """`python` runs the engine under that interpreter; here one whose path holds package `demoapp`."""
    site = tmp_path / "site"
    (site / "demoapp").mkdir(parents=True)
    (site / "demoapp" / "__init__.py").write_text("")
    (site / "demoapp" / "settings.py").write_text(SOURCE)
    python = tmp_path / "python3"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    out = run({"module": "demoapp.settings", "python": str(python), "old": OLD, "new": NEW}, check_mode=True)
    assert (out["result"], out["target"]) == ("applied", str(site / "demoapp" / "settings.py"))
    assert (site / "demoapp" / "settings.py").read_text() == SOURCE
    out = run({"module": "demoapp.settings", "old": OLD, "new": NEW})
    assert out["result"] == "target_missing"
