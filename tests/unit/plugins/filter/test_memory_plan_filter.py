"""The memory_plan / kv_pool_tokens filters as Ansible calls them."""
import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.dgxspark.vllm.plugins.filter.memory_plan import FilterModule

FILTERS = FilterModule().filters()
MEMORY = {"node_total_gib": 100, "weights_gib": 50, "overhead_gib": 10, "vision_tower_gib": 4,
          "video_profile_gib": 6, "kv_bytes_per_token": {"fp8": 1024 * 1024}}


def test_kv_pool_tokens():
    recipe = {"vision": False, "memory": MEMORY,
              "args": {"gpu-memory-utilization": 0.9, "kv-cache-dtype": "fp8", "block-size": 16}}
    assert FILTERS["kv_pool_tokens"](recipe) == 30 * 1024
    assert FILTERS["memory_plan"](recipe)["kv_cache_gib"] == pytest.approx(30)


def test_errors_become_filter_errors():
    with pytest.raises(AnsibleFilterError, match="memory plan: .*kv_cache_dtype 'bf16'"):
        FILTERS["kv_pool_tokens"]({"memory": MEMORY, "args": {"kv-cache-dtype": "bf16"}})
