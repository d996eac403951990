"""mods_results: warnings for non-strict problems, failure for strict ones, results from labels."""

import pytest

from ansible_collections.dgxspark.vllm.plugins.modules import mods_results

DEFS = [{"name": "fix"}, {"name": "gone"}, {"name": "hard", "strict": True}]


@pytest.fixture(name="run")
def fixture_run(run_module):
    def run(args):
        out = run_module(mods_results.main, args, check_mode=True)
        out["_rc"] = 1 if out["failed"] else 0
        return out
    return run


def test_non_strict_problems_warn(monkeypatch, run):
    # Recorded at the call: how warnings reach the output depends on what else the process imported.
    warned = []
    monkeypatch.setattr(mods_results.AnsibleModule, "warn", lambda self, msg: warned.append(msg))
    results = [{"name": "fix", "result": "applied"}, {"name": "gone", "result": "target_missing", "message": "no module x"}]
    out = run({"definitions": DEFS[:2], "results": results, "image": "img:mods-1"})
    assert out["_rc"] == 0 and not out["changed"]
    assert out["summary"] == {"fix": "applied", "gone": "target_missing"}
    assert out["labels"] == {"dgxspark.mods.fix": "applied", "dgxspark.mods.gone": "target_missing"}
    assert out["problems"] == ["gone: target_missing - no module x"]
    assert warned == ["mod on img:mods-1: gone: target_missing - no module x"]


def test_strict_problems_fail(run):
    results = [{"name": "fix", "result": "not_needed"}, {"name": "gone", "result": "target_missing"},
               {"name": "hard", "result": "failed", "message": "ambiguous"}]
    out = run({"definitions": DEFS, "results": results})
    assert out["_rc"] == 1 and "strict mods failed" in out["msg"] and "hard: failed - ambiguous" in out["msg"]
    assert "gone" not in out["msg"]
    out = run({"definitions": DEFS[:2], "results": results[:2], "strict": True})
    assert out["_rc"] == 1 and "gone: target_missing" in out["msg"]


def test_results_from_labels(run):
    labels = {"dgxspark.mods.fix": "already_applied", "io.buildah.version": "1.28"}
    out = run({"definitions": DEFS[:2], "labels": labels})
    assert out["summary"] == {"fix": "already_applied", "gone": "unknown"}
    assert out["problems"] == ["gone: unknown - recorded in the image label dgxspark.mods.gone"]
