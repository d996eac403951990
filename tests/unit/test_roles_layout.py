"""Every role keeps its documented interface in step with its defaults."""
import pathlib

import pytest
import yaml

ROLES = sorted(p for p in (pathlib.Path(__file__).resolve().parents[2] / "roles").iterdir()
               if (p / "tasks").is_dir())


def _load(path):
    return yaml.safe_load(path.read_text()) or {} if path.exists() else {}


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_argument_specs_match_defaults(role):
    defaults = _load(role / "defaults" / "main.yml")
    specs = _load(role / "meta" / "argument_specs.yml").get("argument_specs", {})
    assert "main" in specs, f"{role.name}: meta/argument_specs.yml has no 'main' entry point"
    documented = set(specs["main"].get("options", {}))
    assert documented >= set(defaults), f"{role.name}: undocumented defaults {set(defaults) - documented}"
    undocumented_default = {k for k, v in specs["main"]["options"].items()
                            if not v.get("required") and k not in defaults}
    assert not undocumented_default, f"{role.name}: options without a default in defaults/main.yml: {undocumented_default}"


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_public_variables_carry_the_role_prefix(role):
    prefix = role.name + "_"
    defaults = _load(role / "defaults" / "main.yml")
    wrong = [k for k in defaults if not k.startswith(prefix)]
    assert not wrong, f"{role.name}: defaults without the '{prefix}' prefix: {wrong}"


def test_the_container_cli_is_one_type_everywhere():
    """Every role takes its container CLI as a list of words ([docker], [sudo, docker]), never as a string."""
    clis = {k: v for role in ROLES for k, v in (_load(role / "defaults" / "main.yml") or {}).items()
            if k.endswith("_container_cli")}
    assert len(clis) >= 6, clis
    assert all(v == ["docker"] for v in clis.values()), clis
