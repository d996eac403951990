"""The sim runs the shipped inventory: group spark's values are the shipped file itself, the hosts have the
shipped layout, and every value the sim sets on top (groups sim and sim_real_engine) is a swap that
docs/fidelity.md lists with its reason."""
import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "inventories" / "spark-pair"
SIM = ROOT / "inventories" / "sim"
OVERLAYS = {"sim": 10, "sim_real_engine": 20}
HOST_KEYS = {"ansible_host", "spark_fabric_ip"}
# Values that would put a stand-in path beside a role instead of under it.
STAND_IN_PATHS = {"gpu_health_load_command", "gpu_health_image", "models_image"}


def documented_keys():
    """{key: groups} from the table of docs/fidelity.md's section on the overlay."""
    text = (ROOT / "docs" / "fidelity.md").read_text()
    section = text.split("## The sim's overlay, key by key", 1)[1].split("\n## ", 1)[0]
    keys = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            for key in re.findall(r"`([a-z_]+)`", cells[0]):
                keys[key] = {g.strip() for g in cells[1].split(",")}
    return keys


def scenario_inventories():
    return sorted(p for p in (ROOT / "molecule").glob("*/inventory/hosts.yml") if p.parts[-3] != "fleet")


def test_group_spark_is_the_shipped_file_itself():
    link = SIM / "group_vars" / "spark.yml"
    assert link.is_symlink(), "inventories/sim/group_vars/spark.yml must link to the shipped file, not copy it"
    assert link.resolve() == (SHIPPED / "group_vars" / "spark.yml").resolve()
    assert {p.name for p in (SIM / "group_vars").iterdir()} == {"spark.yml", "sim.yml", "sim_real_engine.yml"}


@pytest.mark.parametrize("group", sorted(OVERLAYS))
def test_every_overlay_key_is_a_swap_the_fidelity_doc_explains(group):
    values = yaml.safe_load((SIM / "group_vars" / f"{group}.yml").read_text()) or {}
    documented = documented_keys()
    unexplained = sorted(k for k in values if group not in documented.get(k, set()))
    assert not unexplained, (f"inventories/sim/group_vars/{group}.yml sets {unexplained}, which docs/fidelity.md's "
                             f"overlay table does not list for group {group}: add the reason there, or drop the value")
    assert not STAND_IN_PATHS & set(values), f"{group} sets a stand-in path beside the roles: {STAND_IN_PATHS & set(values)}"


def test_the_table_lists_no_key_the_overlay_does_not_set():
    values = {g: yaml.safe_load((SIM / "group_vars" / f"{g}.yml").read_text()) or {} for g in OVERLAYS}
    stale = sorted(k for k, groups in documented_keys().items() if not any(k in values.get(g, {}) for g in groups))
    assert not stale, f"docs/fidelity.md's overlay table lists keys no overlay sets: {stale}"


def layout(path):
    """(groups of spark, its host variable keys, extra top-level groups) of an inventory file."""
    data = yaml.safe_load(path.read_text())["all"]["children"]
    spark = data["spark"]["children"]
    hosts = {name: set(v) for g in ("spark_head", "spark_workers") for name, v in spark[g]["hosts"].items()}
    return spark, hosts, {k: v for k, v in data.items() if k != "spark"}


@pytest.mark.parametrize("path", [SIM / "hosts.yml"] + scenario_inventories(), ids=lambda p: str(p.relative_to(ROOT)))
def test_sim_hosts_have_the_shipped_layout(path):
    shipped, shipped_hosts, _ = layout(SHIPPED / "hosts.yml")
    spark, hosts, extra = layout(path)
    assert set(spark) == set(shipped) == {"spark_head", "spark_workers"}
    assert len(spark["spark_head"]["hosts"]) == 1 and spark["spark_workers"]["hosts"]
    assert set().union(*shipped_hosts.values()) == HOST_KEYS
    for name, keys in hosts.items():
        # A scenario may add a value of its own to a host (what it tests: a user's setting); the pair adds none.
        assert keys == HOST_KEYS if path == SIM / "hosts.yml" else keys >= HOST_KEYS, (path, name, keys)
    assert set(extra) <= set(OVERLAYS) and "sim" in extra, (path, sorted(extra))
    for group, body in extra.items():
        assert body["vars"] == {"ansible_group_priority": OVERLAYS[group]}, (path, group)
        assert set(body["children"]) == {"spark_head", "spark_workers"}, (path, group)
    if path == SIM / "hosts.yml":
        data = yaml.safe_load(path.read_text())["all"]["children"]["spark"]
        assert "vars" not in data, "the sim pair's inventory sets no values of its own: the overlay does"


def test_the_shipped_inventory_leaves_become_to_the_roles():
    """A host's ansible_become overrides a task's `become: true` (a connection variable wins over the keyword):
    `ansible_become: false` in the shipped file made every root task of a real run fail (Permission denied)."""
    values = yaml.safe_load((SHIPPED / "group_vars" / "spark.yml").read_text())
    assert not {"ansible_become", "become"} & set(values)
