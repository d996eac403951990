"""Sim only: vLLM's CPU platform, schedulable on Ray like a GPU platform."""
import os

from vllm.platforms.cpu import CpuPlatform


class SimSparkPlatform(CpuPlatform):
    # Each sim node's Ray announces one stand-in GPU (ray start --num-gpus 1): a rank per node,
    # placed by Ray exactly as on the pair.
    ray_device_key = "GPU"

    # Named, not imported: vLLM resolves it once the platform is set (its module imports the platform).
    @classmethod
    def get_device_communicator_cls(cls) -> str:
        return "dgxspark_sim_vllm.communicator.NodeLocalShmCommunicator"

    @classmethod
    def check_and_update_config(cls, vllm_config) -> None:
        # The CPU platform makes vLLM start its processes by spawn, each a new interpreter that imports vLLM
        # again. A GB10's CUDA platform leaves vLLM's own rule (fork, unless CUDA is initialised or the process
        # is a Ray actor), so the engine core is a fork of the API server as on the pair: one import of vLLM
        # fewer per engine start.
        before = os.environ.get("VLLM_WORKER_MULTIPROC_METHOD")
        super().check_and_update_config(vllm_config)
        if before is None:
            os.environ.pop("VLLM_WORKER_MULTIPROC_METHOD", None)
        else:
            os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = before
