"""node_info: reads only, reports missing commands as errors rather than failing."""
import pathlib

import pytest

from ansible.module_utils import basic
from ansible_collections.dgxspark.vllm.plugins.modules import node_info

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "module_utils" / "fixtures"


@pytest.fixture
def commands(monkeypatch):
    def make(outputs):
        calls = []

        def run_command(self, args, **kwargs):
            calls.append(args)
            key = " ".join([args[0].rsplit("/", 1)[-1]] + args[1:])
            for prefix, result in outputs.items():
                if key.startswith(prefix):
                    return result
            raise AssertionError(f"unexpected command {key}")

        def get_bin_path(self, name, required=False, opt_dirs=None):
            return "/usr/bin/" + name if any(k.split()[0] == name for k in outputs) else None

        monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
        return calls
    return make


def test_reads_gpu_and_ports(run_module, commands):
    calls = commands({
        "nvidia-smi --query-gpu": (0, (FIXTURES / "nvidia-smi-h200-query-index-name-driver.csv").read_text(), ""),
        "nvidia-smi": (0, (FIXTURES / "nvidia-smi-h200.txt").read_text(), ""),
        "ibdev2netdev": (0, (FIXTURES / "ibdev2netdev-spark.txt").read_text(), ""),
        "ip": (0, "", ""),
    })
    result = run_module(node_info.main, {"fabric_iface": "lo", "_ansible_check_mode": True})
    info = result["node_info"]
    assert result["changed"] is False
    assert info["gpu"] == {"driver_version": "580.159.04", "cuda_version": "13.0", "gpus": [{"index": 0, "name": "NVIDIA H200"}]}
    assert len(info["rdma_ports"]) == 4
    assert info["fabric"]["exists"] and info["fabric"]["mtu"] > 0
    assert info["errors"] == []
    assert info["mem_total_bytes"] > 0
    # Reads only: every command it ran is one of the three readers, and none with a verb that writes.
    assert {c[0].rsplit("/", 1)[-1] for c in calls} <= {"nvidia-smi", "ibdev2netdev", "ip"}, calls
    assert not [c for c in calls if {"set", "add", "del", "delete", "flush", "change", "replace"} & set(c)], calls
    assert len(calls) >= 3


def test_missing_commands_are_reported(run_module, commands):
    commands({"ip": (0, "", "")})
    info = run_module(node_info.main, {"fabric_iface": "no-such-iface0"})["node_info"]
    assert info["gpu"] is None
    assert info["rdma_ports"] == []
    assert info["fabric"] == {"name": "no-such-iface0", "exists": False, "ipv4": [], "mtu": None, "operstate": None}
    assert "nvidia-smi: command not found" in info["errors"]
    assert "ibdev2netdev: command not found" in info["errors"]


def test_failing_driver_is_reported(run_module, commands):
    commands({
        "nvidia-smi": (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", ""),
        "ibdev2netdev": (0, "", ""), "ip": (0, "", "")})
    info = run_module(node_info.main, {"fabric_iface": "lo"})["node_info"]
    assert info["gpu"] is None
    assert any("exit 9" in e and "couldn't communicate" in e for e in info["errors"])
