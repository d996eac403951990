"""The source_patch module: results, check mode with diff, warnings, strict failures, another Python."""
import json
import sys

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.vllm.plugins.modules import source_patch

SOURCE = "import os\n\nTIMEOUT = 10\n"
OLD = "TIMEOUT = 10\n"
NEW = "TIMEOUT = int(os.environ.get('APP_TIMEOUT', '60'))\n"


def run_module(args, capsys, check_mode=False, diff=False):
    args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
    with patch_module_args(args), pytest.raises(SystemExit) as exc:
        source_patch.main()
    out = json.loads(capsys.readouterr().out)
    out["_rc"] = exc.value.code
    return out


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "settings.py"
    path.write_text(SOURCE)
    return path


def test_applies_then_is_already_applied(target, capsys):
    out = run_module({"path": str(target), "old": OLD, "new": NEW}, capsys)
    assert (out["changed"], out["result"], out["_rc"]) == (True, "applied", 0)
    assert target.read_text() == SOURCE.replace(OLD, NEW)
    out = run_module({"path": str(target), "old": OLD, "new": NEW}, capsys)
    assert (out["changed"], out["result"]) == (False, "already_applied")


def test_check_mode_with_diff_shows_the_change_and_writes_nothing(target, capsys):
    out = run_module({"path": str(target), "old": OLD, "new": NEW}, capsys, check_mode=True, diff=True)
    assert (out["changed"], out["result"]) == (True, "applied")
    assert "-TIMEOUT = 10\n+TIMEOUT = int(os.environ" in out["diff"]["prepared"]
    assert target.read_text() == SOURCE


def test_missing_block_warns_and_reports(target, capsys, monkeypatch):
    # Recorded at the call: how warnings reach the output depends on what else the process imported.
    warned = []
    monkeypatch.setattr(source_patch.AnsibleModule, "warn", lambda self, msg: warned.append(msg))
    out = run_module({"name": "demo", "path": str(target), "old": "nope\n", "new": NEW}, capsys)
    assert (out["_rc"], out["changed"], out["result"]) == (0, False, "target_missing")
    assert len(warned) == 1 and warned[0].startswith("demo: the old block is not in")


def test_strict_fails_on_a_missing_target(tmp_path, capsys):
    out = run_module({"path": str(tmp_path / "gone.py"), "old": OLD, "new": NEW, "strict": True}, capsys)
    assert out["_rc"] == 1 and out["failed"] and out["result"] == "target_missing"
    assert "does not exist" in out["msg"]


def test_bad_version_condition_fails_before_touching(target, capsys):
    out = run_module({"path": str(target), "old": OLD, "new": NEW,
                      "not_needed": {"distribution": "x", "version": "latest"}}, capsys)
    assert out["_rc"] == 1 and "clauses like" in out["msg"]
    assert target.read_text() == SOURCE


def test_module_resolved_with_another_python(tmp_path, capsys):
    """`python` runs the engine under that interpreter; here one whose path holds package `demoapp`."""
    site = tmp_path / "site"
    (site / "demoapp").mkdir(parents=True)
    (site / "demoapp" / "__init__.py").write_text("")
    (site / "demoapp" / "settings.py").write_text(SOURCE)
    python = tmp_path / "python3"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    out = run_module({"module": "demoapp.settings", "python": str(python), "old": OLD, "new": NEW}, capsys,
                     check_mode=True)
    assert (out["result"], out["target"]) == ("applied", str(site / "demoapp" / "settings.py"))
    assert (site / "demoapp" / "settings.py").read_text() == SOURCE
    out = run_module({"module": "demoapp.settings", "old": OLD, "new": NEW}, capsys)
    assert out["result"] == "target_missing"
