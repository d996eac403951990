"""The RoCE devices ibdev2netdev shows Up."""

from __future__ import annotations

from ansible_collections.dgxspark.vllm.plugins.module_utils._node_info import parse_ibdev2netdev

DOCUMENTATION = r"""
name: rdma_up_devices
short_description: The RoCE devices that are Up, from the output of ibdev2netdev
version_added: 0.3.0
description:
  - The device names of the lines C(ibdev2netdev) reports C((Up)), in its order (the default C(NCCL_IB_HCA), and the
    devices the fabric role measures).
options:
  _input:
    description: The output of C(ibdev2netdev).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The Up RoCE devices
  ansible.builtin.debug:
    msg: "{{ 'rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)' | dgxspark.vllm.rdma_up_devices }}"
"""

RETURN = r"""
_value:
  description: The names of the devices that are Up.
  type: list
  elements: str
"""


def rdma_up_devices(output):
    return [p["device"] for p in parse_ibdev2netdev(output or "") if p.get("state") == "Up"]


class FilterModule:
    """dgxspark.vllm.rdma_up_devices."""

    def filters(self):
        return {"rdma_up_devices": rdma_up_devices}
