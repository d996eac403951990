"""Sim only: what the CPU build needs from the machine the sim runs on (not a DGX Spark: an x86 host).

vLLM's CPU build picks its AMX kernels when the host CPU has AMX tiles (``_get_attn_isa``), but Linux
lets a process run AMX instructions only after it asked for them (``arch_prctl(ARCH_REQ_XCOMP_PERM)``);
a process that did not dies of SIGILL at its first AMX instruction. vLLM's multiprocessing executor
spawns its ranks fresh, and nothing in a spawned rank asks before the first forward pass: on an AMX host
(Sapphire Rapids and later) both ranks of the mp backend died of "Fatal Python error: Illegal instruction"
at the first request, and the API answered 500. Every vLLM process of the sim engine asks at start.
"""
import ctypes
import platform

ARCH_PRCTL = 158  # x86_64 syscall number
ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18


def allow_amx():
    """Ask the kernel for AMX tile state in this process (harmless where the CPU has none)."""
    if platform.machine() != "x86_64":
        return False
    try:
        import torch  # pylint: disable=import-outside-toplevel
        if hasattr(torch.cpu, "_init_amx"):
            return bool(torch.cpu._init_amx())  # pylint: disable=protected-access
    except ImportError:
        pass
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0
