"""The fabric's figures: perftest's report, the rail and collective verdicts."""
import pytest

from ansible_collections.dgxspark.vllm.plugins.module_utils._fabric import (
    bus_bandwidth, collective_verdict, parse_ib_write_bw, rail_verdict)

# perftest's report layout (--report_gbits), with the figure NVIDIA's guide measured on one twin.
REPORT = """
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF          Device         : rocep1s0f0
 Number of qps   : 1            Transport type : IB
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      5000             92.63              92.57              0.176554
---------------------------------------------------------------------------------------
"""


def test_the_average_of_a_gbits_report():
    assert parse_ib_write_bw(REPORT) == 92.57


def test_a_report_in_mb_per_second_is_converted():
    text = REPORT.replace("[Gb/sec]", "[MB/sec]").replace("92.57", "11571.25")
    assert parse_ib_write_bw(text) == pytest.approx(92.57)


@pytest.mark.parametrize("text", ["", "Couldn't connect to 10.0.0.2:18515\n", REPORT.split(" 65536")[0]])
def test_no_result_line_is_none(text):
    assert parse_ib_write_bw(text) is None


def test_a_healthy_rail_passes():
    assert rail_verdict("spark-head -> spark-worker-1", "rocep1s0f0", 92.57)["ok"]


def test_a_tenth_of_the_rail_is_named_the_degraded_initialization():
    v = rail_verdict("spark-head -> spark-worker-1", "rocep1s0f0", 13.23)
    assert not v["ok"] and "degraded initialization" in v["message"] and "power-cycle" in v["message"]


def test_half_a_rail_points_at_the_link_width_and_the_mtu():
    v = rail_verdict("spark-head -> spark-worker-1", "roceP2p1s0f0", 48.0)
    assert not v["ok"] and "current_link_width" in v["message"] and "MTU" in v["message"]


def test_no_figure_fails_naming_the_device():
    assert "gave no figure" in rail_verdict("a -> b", "rocep1s0f0", None)["message"]


def test_bus_bandwidth_as_nccl_tests_reports_it():
    # 1 GB gathered by 2 ranks in 0.1 s: algbw 10 GB/s; all-gather busbw 5, all-reduce 10.
    assert bus_bandwidth("all_gather", 1e9, 0.1, 2) == pytest.approx(5.0)
    assert bus_bandwidth("all_reduce", 1e9, 0.1, 2) == pytest.approx(10.0)
    assert bus_bandwidth("all_gather", 1e9, 0, 2) is None


@pytest.mark.parametrize("busbw,twins,ok,words", [
    (23.7, True, True, "at least"),
    (3.0, True, False, "NET/IB : Using"),
    (11.0, False, False, "list both Up RoCE devices"),
    (11.0, True, False, "MTU below 9000"),
    (None, True, False, "did not complete"),
])
def test_collective_verdicts(busbw, twins, ok, words):
    v = collective_verdict("all_gather", busbw, hca_twins_listed=twins)
    assert v["ok"] is ok and words in v["message"]
