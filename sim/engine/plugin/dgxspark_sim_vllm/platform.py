"""Sim only: vLLM's CPU platform, schedulable on Ray like a GPU platform."""
from vllm.platforms.cpu import CpuPlatform


class SimSparkPlatform(CpuPlatform):
    # Each sim node's Ray announces one stand-in GPU (ray start --num-gpus 1): a rank per node,
    # placed by Ray exactly as on the pair.
    ray_device_key = "GPU"

    # Named, not imported: vLLM resolves it once the platform is set (its module imports the platform).
    @classmethod
    def get_device_communicator_cls(cls) -> str:
        return "dgxspark_sim_vllm.communicator.NodeLocalShmCommunicator"
