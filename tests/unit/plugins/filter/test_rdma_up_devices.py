"""rdma_up_devices: the Up devices of ibdev2netdev's output, in its order; Down ones and other lines left out."""
from ansible_collections.dgxspark.vllm.plugins.filter.rdma_up_devices import rdma_up_devices


def test_only_the_up_devices_in_order():
    out = ("rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)\nrocep1s0f1 port 1 ==> enp1s0f1np1 (Up)\n"
           "roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)\n")
    assert rdma_up_devices(out) == ["rocep1s0f1", "roceP2p1s0f1"]


def test_nothing_read_is_no_device():
    assert rdma_up_devices("") == [] and rdma_up_devices(None) == []
