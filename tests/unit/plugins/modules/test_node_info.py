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


def test_reads_what_the_deployment_relies_on(run_module, commands, tmp_path):
    calls = commands({
        "nvidia-smi": (0, "", ""), "ibdev2netdev": (0, "", ""), "ip": (0, "", ""),
        "sudo -n true": (1, "", "sudo: a password is required\n"),
        "docker info": (0, '{"DockerRootDir":"/var/lib/docker","Runtimes":{"io.containerd.runc.v2":{"path":"runc"},'
                           '"nvidia":{"path":"nvidia-container-runtime"}}}', ""),
        "docker image inspect": (1, "", "Error: No such image: vllm-node-minimax-m3-b12x:latest"),
        "rsync": (0, "", ""),
    })
    hub = tmp_path / "hub"
    (hub / "models--Org--Done").mkdir(parents=True)
    (hub / "models--Org--Done" / node_info.MODEL_MARKER).write_text("{}")
    info = run_module(node_info.main, {
        "fabric_iface": "lo", "check_sudo": True, "container_cli": ["docker"], "image": "vllm-node-minimax-m3-b12x:latest",
        "commands": ["rsync", "nosuchtool"], "disk_paths": {"models": str(tmp_path / "not" / "yet")},
        "hf_cache": str(hub), "models": ["Org/Done", "Org/Missing"], "_ansible_check_mode": True})["node_info"]
    assert info["sudo"] == {"ok": False, "error": "sudo: a password is required"}
    assert info["containers"]["ok"] and info["containers"]["nvidia"] and not info["containers"]["image_present"]
    assert info["containers"]["runtimes"] == ["io.containerd.runc.v2", "nvidia"]
    assert info["containers"]["root_dir"] == "/var/lib/docker"
    assert info["commands_missing"] == ["nosuchtool"]
    assert info["disk"]["models"]["measured"] == str(tmp_path) and info["disk"]["models"]["free_bytes"] > 0
    assert "images" in info["disk"], "the engine's data root is measured too"
    assert info["models_complete"] == {"Org/Done": True, "Org/Missing": False}
    # Reads only: sudo runs `true`, docker only `info` and `image inspect`.
    assert [c for c in calls if c[0] == "sudo"] == [["sudo", "-n", "true"]]
    assert {tuple(c[1:3]) for c in calls if c[0] == "docker"} == {("info", "--format"), ("image", "inspect")}


def test_a_docker_without_the_nvidia_runtime_or_access(run_module, commands):
    base = {"nvidia-smi": (0, "", ""), "ibdev2netdev": (0, "", ""), "ip": (0, "", "")}
    commands(dict(base, **{"docker info": (0, '{"Runtimes":{"runc":{"path":"runc"}}}', "")}))
    assert run_module(node_info.main, {"fabric_iface": "lo", "container_cli": ["docker"]})["node_info"]["containers"]["nvidia"] is False
    commands(dict(base, **{"docker info": (1, "", "permission denied while trying to connect to the Docker daemon socket")}))
    containers = run_module(node_info.main, {"fabric_iface": "lo", "container_cli": ["docker"]})["node_info"]["containers"]
    assert containers["ok"] is False and "permission denied" in containers["error"]
    # Docker 26's CLI says the same with rc 0, in the JSON's ServerErrors.
    commands(dict(base, **{"docker info": (0, '{"ServerErrors":["permission denied while trying to connect to the Docker '
                                              'daemon socket at unix:///var/run/docker.sock"],"Runtimes":null}', "")}))
    containers = run_module(node_info.main, {"fabric_iface": "lo", "container_cli": ["docker"]})["node_info"]["containers"]
    assert containers["ok"] is False and "permission denied" in containers["error"] and not containers["nvidia"]
    # No docker at all: named, not a module failure.
    commands(base)
    containers = run_module(node_info.main, {"fabric_iface": "lo", "container_cli": ["docker"], "check_sudo": True})["node_info"]
    assert containers["containers"]["error"] == "docker: command not found"
    assert containers["sudo"] == {"ok": False, "error": "sudo: command not found"}


def test_reads_the_host_stack_the_known_bad_table_matches(run_module, commands, tmp_path):
    commands({
        "nvidia-smi --query-gpu": (0, (FIXTURES / "nvidia-smi-h200-query-index-name-driver.csv").read_text(), ""),
        "nvidia-smi": (0, (FIXTURES / "nvidia-smi-h200.txt").read_text(), ""),
        "ibdev2netdev": (0, (FIXTURES / "ibdev2netdev-spark.txt").read_text(), ""),
        "ip": (0, "", ""),
        "uname -r": (0, "7.0.0-1019-nvidia\n", ""),
        "dpkg-query -W -f=${Version} nvidia-container-toolkit": (0, "1.19.1-1", ""),
    })
    sysfs = tmp_path / "sys"
    # The two Up twins; the second trained at x2. A Down device's width is not read.
    for dev, width in (("rocep1s0f1", "4"), ("roceP2p1s0f1", "2"), ("rocep1s0f0", "1")):
        (sysfs / "class" / "infiniband" / dev / "device").mkdir(parents=True)
        (sysfs / "class" / "infiniband" / dev / "device" / "current_link_width").write_text(width + "\n")
    (sysfs / "class" / "dmi" / "id").mkdir(parents=True)
    (sysfs / "class" / "dmi" / "id" / "bios_version").write_text("5.36_0ACUM023\n")
    stack = run_module(node_info.main, {"fabric_iface": "lo", "sysfs": str(sysfs)})["node_info"]["host_stack"]
    assert stack["kernel"] == "7.0.0-1019-nvidia" and stack["container_toolkit"] == "1.19.1-1"
    assert stack["driver"] == "580.159.04"  # the real H200 output in the fixture
    assert stack["rail_pcie_width"] == "2"
    assert stack["bios_version"] == "5.36_0ACUM023" and stack["bios_date"] is None
    assert stack["kho"] in ("on", "off")


def test_a_host_stack_it_cannot_read_is_null(run_module, commands, tmp_path):
    commands({"nvidia-smi": (1, "", "NVIDIA-SMI has failed"), "ibdev2netdev": (0, "", ""), "ip": (0, "", "")})
    stack = run_module(node_info.main, {"fabric_iface": "lo", "sysfs": str(tmp_path)})["node_info"]["host_stack"]
    assert {k: v for k, v in stack.items() if k != "kho" and k != "container_toolkit_mode"} == {
        "kernel": None, "driver": None, "container_toolkit": None, "bios_version": None, "bios_date": None,
        "rail_pcie_width": None}
