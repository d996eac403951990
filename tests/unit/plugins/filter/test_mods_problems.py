"""mods_problems: the engine's rules plus unique names, for the role's up-front check."""
from ansible_collections.dgxspark.vllm.plugins.filter.mods_problems import FilterModule

mods_problems = FilterModule().filters()["mods_problems"]
GOOD = {"name": "a", "module": "x.y", "old": "1\n", "new": "2\n"}


def test_valid_mods_have_no_problems():
    assert mods_problems([GOOD, dict(GOOD, name="b")]) == []


def test_problems_are_named():
    problems = mods_problems([GOOD, GOOD, {"name": "c", "old": "1"}, "text"])
    assert "a: two mods have this name; names must be unique (they become image labels)" in problems
    assert any(p.startswith("c: set exactly one of 'module'") for p in problems)
    assert "a mod must be a dict, got str" in problems
    assert mods_problems({"name": "a"}) == ["the mods must be a list of dicts, got dict"]
