"""mods_results: warnings for non-strict problems, failure for strict ones, results from labels."""
import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.dgxspark.vllm.plugins.modules import mods_results

DEFS = [{"name": "fix"}, {"name": "gone"}, {"name": "hard", "strict": True}]


def run_module(args, capsys):
    with patch_module_args(dict(args, _ansible_check_mode=True)), pytest.raises(SystemExit) as exc:
        mods_results.main()
    out = json.loads(capsys.readouterr().out)
    out["_rc"] = exc.value.code
    return out


def test_non_strict_problems_warn(capsys, monkeypatch):
    # Recorded at the call: how warnings reach the output depends on what else the process imported.
    warned = []
    monkeypatch.setattr(mods_results.AnsibleModule, "warn", lambda self, msg: warned.append(msg))
    results = [{"name": "fix", "result": "applied"}, {"name": "gone", "result": "target_missing", "message": "no module x"}]
    out = run_module({"definitions": DEFS[:2], "results": results, "image": "img:mods-1"}, capsys)
    assert out["_rc"] == 0 and not out["changed"]
    assert out["summary"] == {"fix": "applied", "gone": "target_missing"}
    assert out["labels"] == {"dgxspark.mods.fix": "applied", "dgxspark.mods.gone": "target_missing"}
    assert out["problems"] == ["gone: target_missing - no module x"]
    assert warned == ["mod on img:mods-1: gone: target_missing - no module x"]


def test_strict_problems_fail(capsys):
    results = [{"name": "fix", "result": "not_needed"}, {"name": "gone", "result": "target_missing"},
               {"name": "hard", "result": "failed", "message": "ambiguous"}]
    out = run_module({"definitions": DEFS, "results": results}, capsys)
    assert out["_rc"] == 1 and "strict mods failed" in out["msg"] and "hard: failed - ambiguous" in out["msg"]
    assert "gone" not in out["msg"]
    out = run_module({"definitions": DEFS[:2], "results": results[:2], "strict": True}, capsys)
    assert out["_rc"] == 1 and "gone: target_missing" in out["msg"]


def test_results_from_labels(capsys):
    labels = {"dgxspark.mods.fix": "already_applied", "io.buildah.version": "1.28"}
    out = run_module({"definitions": DEFS[:2], "labels": labels}, capsys)
    assert out["summary"] == {"fix": "already_applied", "gone": "unknown"}
    assert out["problems"] == ["gone: unknown - recorded in the image label dgxspark.mods.gone"]
