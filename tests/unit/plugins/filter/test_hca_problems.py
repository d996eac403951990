"""hca_problems: NCCL_IB_HCA against the Up RoCE devices (ibdev2netdev of a Spark with one cable: two Up twins)."""
import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.vllm.plugins.filter.hca_problems import FilterModule

problems = FilterModule().filters()["hca_problems"]
SPARK = [{"device": "rocep1s0f0", "state": "Up"}, {"device": "rocep1s0f1", "state": "Down"},
         {"device": "roceP2p1s0f0", "state": "Up"}, {"device": "roceP2p1s0f1", "state": "Down"}]


@pytest.mark.parametrize("value", ["rocep1s0f0,roceP2p1s0f0", "rocep1s0f0:1,roceP2p1s0f0:1", "=rocep1s0f0,=roceP2p1s0f0",
                                   "", None, "^rocep1s0f1"])
def test_both_twins_or_nothing_to_check(value):
    assert problems(value, SPARK) == []


def test_one_twin_is_half_the_port():
    (p,) = problems("rocep1s0f0", SPARK)
    assert p["kind"] == "missing_up" and p["devices"] == ["roceP2p1s0f0"]
    assert "98 against 161 Gb/s" in p["message"]


def test_a_prefix_covers_both_twins_of_one_controller_only():
    # "roce" matches every device, the Down ones too; "rocep1" misses the twin on the second controller.
    assert [p["kind"] for p in problems("roce", SPARK)] == []
    assert problems("rocep1", SPARK)[0]["devices"] == ["roceP2p1s0f0"]


def test_the_other_ports_devices_are_not_up():
    # The list written for the other cabling: its devices are Down here, the Up ones unlisted.
    found = {p["kind"]: p["devices"] for p in problems("rocep1s0f1,roceP2p1s0f1", SPARK)}
    assert found == {"missing_up": ["rocep1s0f0", "roceP2p1s0f0"], "not_up": ["rocep1s0f1", "roceP2p1s0f1"]}


def test_ibdev2netdevs_own_output_is_read():
    text = "\n".join("%s port 1 ==> enx (%s)" % (p["device"], p["state"]) for p in SPARK)
    assert problems("rocep1s0f0", text)[0]["devices"] == ["roceP2p1s0f0"]


def test_ports_must_be_a_list_or_text():
    with pytest.raises(AnsibleFilterError):
        problems("rocep1s0f0", 7)
