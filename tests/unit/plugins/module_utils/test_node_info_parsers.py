"""Parsers of node_info against real outputs (H200 nvidia-smi, sim node ip/meminfo) and ibdev2netdev's documented format."""
import pathlib

from ansible_collections.dgxspark.vllm.plugins.module_utils._node_info import (
    parse_gpu_query, parse_ibdev2netdev, parse_ipv4, parse_meminfo, parse_nvidia_smi)

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"


def fixture(name):
    return (FIXTURES / name).read_text()


def test_nvidia_smi_header():
    assert parse_nvidia_smi(fixture("nvidia-smi-h200.txt")) == {"driver_version": "580.159.04", "cuda_version": "13.0"}


def test_nvidia_smi_header_missing():
    assert parse_nvidia_smi("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.") == {
        "driver_version": None, "cuda_version": None}


def test_gpu_query():
    assert parse_gpu_query(fixture("nvidia-smi-h200-query-index-name-driver.csv")) == [
        {"index": 0, "name": "NVIDIA H200", "driver_version": "580.159.04"}]


def test_gpu_query_several_and_noise():
    text = "0, NVIDIA GB10, 580.95.05\n1, NVIDIA GB10, 580.95.05\nNo devices were found\n"
    assert [g["index"] for g in parse_gpu_query(text)] == [0, 1]
    assert parse_gpu_query("No devices were found\n") == []


def test_ibdev2netdev():
    ports = parse_ibdev2netdev(fixture("ibdev2netdev-spark.txt"))
    assert len(ports) == 4
    assert ports[1] == {"device": "rocep1s0f1", "port": 1, "netdev": "enp1s0f1np1", "state": "Up",
                        "line": "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)"}
    assert [p["netdev"] for p in ports if p["state"] == "Up"] == ["enp1s0f1np1", "enP2p1s0f1np1"]


def test_ibdev2netdev_empty():
    assert parse_ibdev2netdev("") == []


def test_ipv4():
    assert parse_ipv4(fixture("ip-o-4-addr.txt")) == ["10.231.108.10/24"]
    assert parse_ipv4("") == []
    two = "2: enp1s0f1np1    inet 192.168.100.10/24 scope global enp1s0f1np1\n2: enp1s0f1np1    inet 10.0.0.1/8 scope global\n"
    assert parse_ipv4(two) == ["192.168.100.10/24", "10.0.0.1/8"]


def test_meminfo():
    mem = parse_meminfo(fixture("proc-meminfo.txt"))
    assert mem["MemTotal"] > mem["MemAvailable"] > 0
    assert mem["MemTotal"] % 1024 == 0
    assert parse_meminfo("MemTotal:       24684084 kB\nHugePages_Total:       0\n") == {
        "MemTotal": 24684084 * 1024, "HugePages_Total": 0}
