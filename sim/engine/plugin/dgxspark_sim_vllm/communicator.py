"""Sim only: vLLM's CPU collectives with shared memory kept within a node."""
import socket

import torch
from vllm.distributed.device_communicators.cpu_communicator import CpuCommunicator


class NodeLocalShmCommunicator(CpuCommunicator):
    """The CPU build's collectives, with its shared-memory path only when every rank is on one node.

    vLLM's CPU communicator takes /dev/shm for a TP group whenever the ranks agree on a name, which
    assumes one host: across two sim nodes (each its own /dev/shm, as two Sparks are two machines) the
    second rank fails with "open shm in SHMManager failed. errno: 2". Ranks on different nodes talk
    over torch.distributed (gloo, on the fabric interface the roles set), as NCCL does on the pair.
    """

    def _all_group_ranks_share_shm_group_name(self) -> bool:
        hosts = [""] * self.world_size
        torch.distributed.all_gather_object(hosts, socket.gethostname(), group=self.device_group)
        # Both gathers run on every rank, in the same order, whatever the first one found.
        same_name = super()._all_group_ranks_share_shm_group_name()
        return len(set(hosts)) == 1 and same_name
