"""Parsing and classification of nvidia-smi output: real H200 outputs and documented GB10 outputs."""
import pathlib

import pytest

from ansible_collections.dgxspark.vllm.plugins.module_utils import _nvidia_smi as smi

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "nvidia-smi"


def text(name):
    return (FIXTURES / name).read_text()


def gb10(state):
    """Samples and active reasons of a GB10 fixture state (query lines + PERFORMANCE text)."""
    rows = smi.parse_query_csv(text(f"gb10/query_{state}.csv"), smi.QUERY_FIELDS)
    perf_state = "idle" if state == "idle" else state.replace("_721", "")
    perf = smi.parse_performance(text(f"gb10/perf_{perf_state}.txt"))
    return rows, set(smi.active_reasons(perf[0]["reasons"]))


@pytest.mark.parametrize("cell, value", [
    ("1980 MHz", 1980), ("1980", 1980), ("121.66 W", 121.66), ("10.00", 10.0), ("0 %", 0),
    ("[N/A]", None), ("N/A", None), ("[Not Supported]", None), ("P8", "P8"), ("NVIDIA GB10", "NVIDIA GB10"),
    ("0x0000000000000001", "0x0000000000000001"),
])
def test_parse_value(cell, value):
    assert smi.parse_value(cell) == value


def test_h200_query_csv_with_header_units_and_a_repeated_field():
    rows = smi.parse_query_csv(text("h200/smi_query_idle.csv"))
    assert len(rows) == 2
    for row in rows:  # the same reading printed with and without units
        assert row["clocks.current.sm"] == 1980 and row["clocks.max.sm"] == 1980
        assert row["power.draw"] == 121.66 and row["power.limit"] == 700.0
        assert row["utilization.gpu"] == 0 and row["memory.used"] == 0 and row["name"] == "NVIDIA H200"
        assert row["clocks_event_reasons.active"] == "0x0000000000000001"


def test_h200_performance_idle_reason_is_active_but_not_a_slowdown():
    gpus = smi.parse_performance(text("h200/smi_q_idle.txt"))
    assert len(gpus) == 1 and gpus[0]["bus_id"] == "00000000:00:06.0" and gpus[0]["pstate"] == "P0"
    reasons = gpus[0]["reasons"]
    assert reasons["Idle"] is True and reasons["HW Thermal Slowdown"] is False and len(reasons) == 9
    # The counters section that follows is not read as reasons.
    assert "SW Power Capping" not in reasons
    assert smi.active_reasons(reasons) == []
    assert smi.active_reasons(reasons, ignored=()) == ["Idle"]


def test_gb10_n_a_fields_read_as_none():
    rows = smi.parse_query_csv(text("gb10/query_with_header.csv"))
    assert rows == [{"clocks.sm": 611, "clocks.max.memory": None, "memory.used": None, "power.draw": 10.12,
                     "power.limit": None, "pstate": "P0"}]
    rows, _ = gb10("wedged_load")
    assert all(r["memory.used"] is None and r["power.limit"] is None and r["clocks.max.sm"] == 3003 for r in rows)


def test_gb10_performance_n_a_reason_is_unknown_not_active():
    reasons = smi.parse_performance(text("gb10/perf_wedged_load.txt"))[0]["reasons"]
    assert reasons["HW Power Brake Slowdown"] is None
    assert smi.active_reasons(reasons) == []


@pytest.mark.parametrize("state, expected", [
    ("healthy_load", smi.HEALTHY), ("idle", smi.IDLE), ("throttled_load", smi.THROTTLED),
    ("wedged_load", smi.WEDGED), ("wedged_721_load", smi.WEDGED),
])
def test_gb10_classification(state, expected):
    rows, reasons = gb10(state)
    verdict = smi.classify(rows, reasons)
    assert verdict["state"] == expected, verdict["why"]


def test_gb10_figures_of_a_wedged_gpu():
    verdict = smi.classify(*gb10("wedged_load"))
    assert (verdict["sm_clock_mhz"], verdict["sm_clock_min_mhz"], verdict["sm_clock_max_mhz"]) == (611, 611, 611)
    assert verdict["power_w"] == 10.05 and verdict["utilization_pct"] == 95 and verdict["reasons"] == []
    assert "611 MHz" in verdict["why"] and "no active reason" in verdict["why"]


def test_gb10_throttled_names_its_reasons():
    verdict = smi.classify(*gb10("throttled_load"))
    assert verdict["reasons"] == ["HW Slowdown", "HW Thermal Slowdown"]
    assert verdict["sm_clock_min_mhz"] == 480 and verdict["sm_clock_max_mhz"] == 859


def test_slow_moving_clock_without_reason_is_throttled_not_wedged():
    rows, _ = gb10("throttled_load")
    verdict = smi.classify(rows, set())
    assert verdict["state"] == smi.THROTTLED and verdict["reasons"] == ["none reported"]


def test_pinned_slow_clock_at_high_power_is_not_wedged():
    rows, _ = gb10("wedged_load")
    for row in rows:
        row["power.draw"] = 80.0
    assert smi.classify(rows, set())["state"] == smi.THROTTLED


@pytest.mark.parametrize("threshold, expected", [(2500, smi.THROTTLED), (2300, smi.HEALTHY)])
def test_thresholds_are_parameters(threshold, expected):
    rows, reasons = gb10("healthy_load")
    assert smi.classify(rows, reasons, min_clock_mhz=threshold)["state"] == expected


def test_h200_idle_reading_is_idle():
    rows = smi.parse_query_csv(text("h200/smi_query_idle.csv"))
    for row in rows:
        row["clocks.sm"] = row["clocks.current.sm"]
    assert smi.classify(rows, set())["state"] == smi.IDLE


def test_classify_needs_clocks():
    with pytest.raises(ValueError):
        smi.classify([], set())
    with pytest.raises(ValueError, match="clocks.sm"):
        smi.classify([{"clocks.sm": None, "utilization.gpu": 99}], set())


def test_csv_row_with_wrong_column_count_is_an_error():
    with pytest.raises(ValueError, match="columns"):
        smi.parse_query_csv("0, 611\n", smi.QUERY_FIELDS)



def h200_load():
    rows = smi.parse_query_csv(text("h200/smi_query_load.csv"), smi.QUERY_FIELDS)
    perf = smi.parse_performance(text("h200/smi_q_performance_load.txt"))
    return rows, set(smi.active_reasons(perf[0]["reasons"]))


def test_h200_real_load_at_its_power_cap_is_healthy():
    rows, reasons = h200_load()
    assert len(rows) == 5 and rows[0]["power.limit"] == 700.0 and rows[0]["memory.used"] == 883
    assert reasons == {"SW Power Cap"}
    verdict = smi.classify(rows, reasons)
    assert verdict["state"] == smi.HEALTHY, verdict["why"]
    assert (verdict["sm_clock_mhz"], verdict["sm_clock_min_mhz"], verdict["sm_clock_max_mhz"]) == (1500, 1485, 1515)
    assert verdict["reasons"] == ["SW Power Cap"] and verdict["utilization_pct"] == 98


def test_h200_real_load_below_a_stricter_threshold_is_throttled_by_its_power_cap():
    verdict = smi.classify(*h200_load(), min_clock_mhz=1900)
    assert verdict["state"] == smi.THROTTLED and "SW Power Cap" in verdict["why"]


def test_h200_real_idle_before_the_load_is_idle():
    rows = smi.parse_query_csv(text("h200/smi_query_idle_header.csv"))
    assert rows[0]["clocks.current.sm"] == 345 and rows[0]["utilization.gpu"] == 0
    rows[0]["clocks.sm"] = rows[0]["clocks.current.sm"]
    perf = smi.parse_performance(text("h200/smi_q_performance_idle.txt"))
    assert perf[0]["reasons"]["Idle"] is True and smi.active_reasons(perf[0]["reasons"]) == []
    assert smi.classify(rows * 2, set())["state"] == smi.IDLE


def test_h200_query_with_header_under_load_matches_the_noheader_form():
    (row,) = smi.parse_query_csv(text("h200/smi_query_load_header.csv"))
    assert row["clocks.current.sm"] == 1485 and row["power.draw"] == 693.2 and row["memory.used"] == 883


def test_an_even_number_of_samples_keeps_whole_clocks_whole():
    rows, _ = gb10("wedged_load")
    verdict = smi.classify(rows[:4], set())
    assert verdict["sm_clock_mhz"] == 611 and isinstance(verdict["sm_clock_mhz"], int)
    assert "pinned at 611 MHz" in verdict["why"]
    rows = [dict(rows[0], **{"clocks.sm": c, "utilization.gpu": 99, "power.draw": 60}) for c in (2400, 2405)]
    assert smi.classify(rows, set())["sm_clock_mhz"] == 2402.5


def test_a_wedged_gpu_with_gaps_in_its_load_is_still_wedged():
    # A decode load with pauses between steps: some samples read idle (208 MHz, P8, ~4.5 W). Judged on
    # every sample the clock "varies 208-611 MHz" and reads throttled; under load it is pinned at 611.
    rows, reasons = gb10("wedged_load")
    idle_rows, _ = gb10("idle")
    mixed = rows + idle_rows[:max(1, len(rows) // 2 - 1)]
    verdict = smi.classify(mixed, reasons)
    assert verdict["state"] == smi.WEDGED, verdict["why"]
    assert (verdict["sm_clock_min_mhz"], verdict["sm_clock_max_mhz"]) == (611, 611)
    assert verdict["samples"] == len(mixed)


def test_a_mostly_idle_gpu_stays_idle_whatever_its_busy_samples_read():
    rows, reasons = gb10("wedged_load")
    idle_rows, _ = gb10("idle")
    assert smi.classify(idle_rows * 3 + rows[:1], reasons)["state"] == smi.IDLE
