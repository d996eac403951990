"""gpu_watch_findings: every node's watch state as diagnose reads it, named across the nodes."""
import json

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.vllm.plugins.filter.gpu_watch_findings import gpu_watch_findings


def state(findings=(), util=0, updated_at=1000.0, interval=10):
    return {"gpus": {"0": {"utilization_pct": util}}, "updated_at": updated_at, "interval": interval,
            "findings": [{"gpu": "0", "finding": f, "why": "why"} for f in findings]}


def printed(value):
    """As diagnose's command prints it: the state file, then the unit's state."""
    return json.dumps(value, indent=1) + "\nactive\n"


def test_the_printed_states_name_a_stuck_collective():
    said = gpu_watch_findings({"spark-head": printed(state(["busy_low_power"], 96)), "spark-worker-1": printed(state())})
    assert len(said) == 1 and said[0].startswith("Stuck collective: spark-head GPU 0") and "spark-worker-1 is idle" in said[0]


def test_nodes_without_a_state_are_left_out_and_nothing_breaks():
    said = gpu_watch_findings({
        "spark-head": printed(state(["wedged"], 95)),
        "spark-worker-1": "no GPU watch state at /var/lib/dgxspark-vllm/gpu-watch/state.json\ninactive",
        "spark-worker-2": '{"truncated": ', "spark-worker-3": None})
    assert said == ["Wedged GPU clock on spark-head (GPU 0): why. Only a full AC power-cycle clears it."]


def test_a_state_older_than_three_intervals_is_named_stale():
    said = gpu_watch_findings({"spark-head": state(updated_at=1000.0), "spark-worker-1": state(updated_at=1025.0)}, now=1040)
    assert said == ["GPU watch on spark-head is stale: its last sample is 40 s old (it samples every 10 s); "
                    "check `systemctl status dgxspark-gpu-watch` there."]
    assert gpu_watch_findings({"spark-head": state(updated_at=1000.0)}) == []  # no time given, not judged


def test_not_a_mapping_is_refused():
    with pytest.raises(AnsibleFilterError, match="mapping of node name"):
        gpu_watch_findings(["spark-head"])
