"""Every role keeps its documented interface in step with its defaults."""
import pathlib
import re

import pytest
import yaml

ROLES = sorted(p for p in (pathlib.Path(__file__).resolve().parents[2] / "roles").iterdir()
               if (p / "tasks").is_dir() or (p / "defaults").is_dir())


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
    """Every role takes its container CLI from the shared one, a list of words ([docker], [sudo, docker])."""
    clis = {k: v for role in ROLES for k, v in (_load(role / "defaults" / "main.yml") or {}).items()
            if k.endswith("_container_cli")}
    assert clis.pop("common_container_cli") == ["docker"]
    assert len(clis) >= 6, clis
    assert all(v == "{{ common_container_cli }}" for v in clis.values()), clis


# The values every role shares, written out: outside the common role they would be copies that drift apart (a
# role that falls back to 8000 while the API moved). Paths under /etc, /usr/local/lib and /run name one role's own
# files; template file names are not values.
SHARED_LITERALS = re.compile(r"""(?x)
    ['"\s:\[(]dgxspark-(vllm|ray|watchdog)(?![\w./-])   # a unit or container name
    | vllm-node-minimax-m3-b12x:                          # the serving image's reference
    | /var/lib/dgxspark-vllm                              # the state directory
    | default\((8000|'0\.0\.0\.0'|"0\.0\.0\.0")\)      # a fallback for the API's port or address
""")


def test_no_role_or_playbook_copies_a_shared_value():
    root = ROLES[0].parent.parent
    files = [p for role in ROLES if role.name != "common" for sub in ("defaults", "tasks", "vars", "templates", "handlers")
             for p in (role / sub).rglob("*") if p.is_file() and p.suffix in (".yml", ".j2")]
    files += list((root / "playbooks").glob("*.yml"))
    copies = [f"{p.relative_to(root)}:{n}: {line.strip()}" for p in files
              for n, line in enumerate(p.read_text().splitlines(), 1)
              if SHARED_LITERALS.search(line) and not line.lstrip().startswith("#")]
    assert not copies, "shared values copied outside roles/common (point at common_* instead):\n" + "\n".join(copies)


def _walk(node, visit):
    """Call visit(mapping) for every mapping in a parsed task file or playbook."""
    if isinstance(node, dict):
        visit(node)
        for value in node.values():
            _walk(value, visit)
    elif isinstance(node, list):
        for value in node:
            _walk(value, visit)


def _includes(node, found):
    """(role, entry point) of every include_role / import_role in a parsed task file or playbook."""
    def visit(mapping):
        for key in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
            if isinstance(mapping.get(key), dict):
                ref = mapping[key]
                found.append((str(ref.get("name", "")).split(".")[-1], str(ref.get("tasks_from") or "main").removesuffix(".yml")))
    _walk(node, visit)
    return found


def test_every_role_reached_from_outside_is_reached_through_a_declared_entry_point():
    """A task file another role or a playbook includes is an interface: it is declared in the role's
    meta/argument_specs.yml (so its inputs are documented and checked), not reached by its path."""
    root = ROLES[0].parent.parent
    files = [p for role in ROLES for p in (role / "tasks").glob("*.yml")] + list((root / "playbooks").glob("*.yml"))
    undeclared = set()
    for path in files:
        for role, entry in _includes(yaml.safe_load(path.read_text()), []):
            declared = _load(root / "roles" / role / "meta" / "argument_specs.yml").get("argument_specs", {})
            if entry not in declared:
                undeclared.add(f"{path.relative_to(root)} -> {role}:{entry}")
    assert not undeclared, sorted(undeclared)


def test_no_role_or_playbook_reads_or_sets_another_roles_private_variables():
    """A role's _ROLE_* variables are its own: what crosses a role's border is a prefixed public variable, an
    entry point's declared input, or a fact it documents publishing (CONTRIBUTING: roles and their borders)."""
    import re
    root = ROLES[0].parent.parent
    files = [p for p in root.glob("roles/*/**/*") if p.suffix in (".yml", ".j2") and "meta" not in p.parts]
    files += list((root / "playbooks").glob("*.yml")) + [root / "site.yml"]
    crossing = set()
    for path in files:
        text = path.read_text()
        here = path.relative_to(root).parts[1] if path.relative_to(root).parts[0] == "roles" else None
        for role in (r.name for r in ROLES if r.name != here):
            for name in re.findall(r"(?<![\w.])_%s_[a-z0-9_]+" % role, text):
                crossing.add(f"{path.relative_to(root)}: {name}")
    assert not crossing, sorted(crossing)


def _set_facts(node, found):
    """The names every set_fact in a parsed task file or playbook sets."""
    _walk(node, lambda mapping: [found.update(mapping[key]) for key in ("ansible.builtin.set_fact", "set_fact")
                                 if isinstance(mapping.get(key), dict)])
    return found


def test_the_recipe_has_one_loader():
    """recipe_data is set (set_fact) by the recipe role only; every other role and playbook includes that role for it
    (no copy of the loading, no other entry point standing in for it). An include may hand a recorded recipe to
    the role it includes as an input (the rollback validates with the recipe the deployment was recorded with)."""
    root = ROLES[0].parent.parent
    files = [p for role in ROLES if role.name != "recipe" for sub in ("tasks", "handlers") for p in (role / sub).glob("*.yml")]
    files += list((root / "playbooks").glob("*.yml")) + [root / "site.yml"]
    setters = [str(p.relative_to(root)) for p in files if "recipe_data" in _set_facts(yaml.safe_load(p.read_text()), set())]
    assert not setters, f"recipe_data set outside the recipe role: {setters}"
    loads = [(str(p.relative_to(root)), entry) for p in files
             for role, entry in _includes(yaml.safe_load(p.read_text()), []) if role == "recipe"]
    assert len(loads) >= 10 and all(entry == "main" for _p, entry in loads), loads


def test_the_engine_container_has_one_owner():
    """ray_cluster owns the engine's container (image, options): serve includes none of its files and reads the
    published settings only through its own two defaults, so another fleet sets serve_container_image/_opts."""
    serve = ROLES[0].parent / "serve"
    files = [p for sub in ("tasks", "handlers", "vars", "templates") for p in (serve / sub).rglob("*") if p.is_file()]
    includes = [(p.name, role, entry) for p in files if p.suffix == ".yml"
                for role, entry in _includes(yaml.safe_load(p.read_text()), []) if role == "ray_cluster"]
    assert not includes, f"serve includes ray_cluster's files: {includes}"
    # Reads are in expressions ({{ }}, {% %}) and conditions; a message may name the published facts.
    reads = [f"{p.relative_to(serve)}: {expr.strip()[:80]}" for p in files
             for expr in re.findall(r"\{\{.*?\}\}|\{%.*?%\}|when:.*", p.read_text(), re.S) if "ray_cluster_container_" in expr]
    assert not reads, reads
    defaults = _load(serve / "defaults" / "main.yml")
    assert defaults["serve_container_image"] == "{{ ray_cluster_container_image }}"
    assert defaults["serve_container_opts"] == "{{ ray_cluster_container_opts }}"
