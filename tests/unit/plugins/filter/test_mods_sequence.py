"""The order mods apply in: the launcher's, ours in place of the ones they replace, then ours."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.vllm.plugins.filter.mods_problems import mods_sequence

LAUNCHER = [{"name": n, "path": "/checkout/mods/" + n, "digest": n * 2, "via": ["mods/g/mod-group.yaml"], "ref": "mods/" + n}
            for n in ("fix-a", "fix-prometheus-fastapi-routing", "fix-c")]
OURS = {"name": "fix_prometheus_fastapi_routing", "replaces": "fix-prometheus-fastapi-routing", "path": "/x",
        "old": "a", "new": "b"}
EXTRA = {"name": "my_mod", "path": "/y", "old": "a", "new": "b"}


def test_ours_take_the_replaced_mods_place_and_the_rest_follow():
    seq = mods_sequence([OURS, EXTRA], LAUNCHER, "/run/m/launcher")
    assert [m["name"] for m in seq] == ["fix-a", "fix_prometheus_fastapi_routing", "fix-c", "my_mod"]
    assert seq[0] == {"name": "fix-a", "launcher": "/run/m/launcher/fix-a", "strict": True, "digest": "fix-afix-a",
                      "via": ["mods/g/mod-group.yaml"], "ref": "mods/fix-a"}


def test_without_launcher_mods_ours_apply_alone():
    assert mods_sequence([OURS, EXTRA], []) == [OURS, EXTRA]


def test_a_mod_listed_twice_is_refused():
    with pytest.raises(AnsibleFilterError, match="fix-a is listed twice"):
        mods_sequence([], LAUNCHER + LAUNCHER[:1])


def test_a_name_clash_without_replaces_is_refused():
    with pytest.raises(AnsibleFilterError, match="fix-c have the name of a launcher mod"):
        mods_sequence([dict(EXTRA, name="fix-c")], LAUNCHER)
