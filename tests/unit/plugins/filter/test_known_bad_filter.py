"""known_bad: the filter's errors (the matching itself: module_utils/test_known_bad.py)."""
import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.vllm.plugins.filter.known_bad import FilterModule

known_bad = FilterModule().filters()["known_bad"]
ROW = {"id": "k", "match": {"kernel": ["7.0.0-1019"]}, "symptom": "s", "fix": "f", "source": "https://x"}


def test_a_hit_and_its_acceptance():
    assert known_bad({"kernel": "7.0.0-1019-nvidia"}, [ROW])["hits"][0]["accepted"] is False
    assert known_bad({"kernel": "7.0.0-1019-nvidia"}, [ROW], ["k"])["hits"][0]["accepted"] is True


def test_a_broken_table_is_named():
    with pytest.raises(AnsibleFilterError, match=r"known-bad table: row 1 \(k\) lacks source"):
        known_bad({}, [dict(ROW, source="")])


def test_facts_must_be_a_mapping():
    with pytest.raises(AnsibleFilterError, match="as a mapping"):
        known_bad(["kernel"], [ROW])
