"""socket_ifname_problems: the socket interface variables that name no interface of the node."""
import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.vllm.plugins.filter.socket_ifname_problems import FilterModule

problems = FilterModule().filters()["socket_ifname_problems"]
NODE = ["lo", "eth0", "enp1s0f1np1", "docker0"]


def test_the_fabric_interface_everywhere_is_fine():
    env = dict.fromkeys(("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME"), "enp1s0f1np1")
    assert problems(dict(env, OTHER="enp9s0"), NODE) == []


def test_a_missing_gloo_interface_is_named_with_what_the_node_has():
    (p,) = problems({"GLOO_SOCKET_IFNAME": "enp9s0", "NCCL_SOCKET_IFNAME": "enp1s0f1np1"}, NODE)
    assert (p["name"], p["missing"]) == ("GLOO_SOCKET_IFNAME", ["enp9s0"])
    assert p["message"] == ("GLOO_SOCKET_IFNAME=enp9s0 names no interface of this node (enp9s0; it has "
                            "docker0, enp1s0f1np1, eth0, lo).")


def test_gloo_and_tp_take_exact_names_only():
    assert problems({"GLOO_SOCKET_IFNAME": "enp1s0"}, NODE)[0]["missing"] == ["enp1s0"]
    assert problems({"GLOO_SOCKET_IFNAME": "enp1s0f1np1,eth9"}, NODE)[0]["missing"] == ["eth9"]
    assert problems({"TP_SOCKET_IFNAME": "eth"}, NODE)[0]["name"] == "TP_SOCKET_IFNAME"


def test_nccl_takes_prefixes_exact_names_and_exclusions():
    assert problems({"NCCL_SOCKET_IFNAME": "enp1s0"}, NODE) == []
    assert problems({"NCCL_SOCKET_IFNAME": "enp9,enp1"}, NODE) == []
    assert problems({"NCCL_SOCKET_IFNAME": "^docker,lo"}, NODE) == []
    # An exclusion list names what NCCL must not use, often interfaces this node lacks: never a problem.
    assert problems({"NCCL_SOCKET_IFNAME": "^ib,virbr"}, NODE) == []
    assert problems({"NCCL_SOCKET_IFNAME": "=enp1s0"}, NODE)[0]["missing"] == ["=enp1s0"]
    assert problems({"NCCL_SOCKET_IFNAME": "ib"}, NODE)[0]["missing"] == ["ib"]


def test_unset_or_empty_values_are_not_checked():
    assert problems({"GLOO_SOCKET_IFNAME": "", "NCCL_SOCKET_IFNAME": None}, NODE) == []


def test_bad_arguments_are_refused():
    with pytest.raises(AnsibleFilterError):
        problems("GLOO_SOCKET_IFNAME=x", NODE)
    with pytest.raises(AnsibleFilterError):
        problems({}, "lo")
