# -*- coding: utf-8 -*-
# Copyright: dgxspark.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A compute load on every GPU of a node through the CUDA driver alone (libcuda, which the NVIDIA driver
installs): no CUDA toolkit, no Python package, no container image. The kernel is PTX that the driver
compiles for whatever GPU it finds, so the same text loads a GB10 (sm_121) and any other NVIDIA GPU.

Run on a node as a script (``script()``: ``python3 -c "<it>" SECONDS``): it loads every GPU for SECONDS,
one thread per GPU, and writes one line per GPU with the kernels it ran. Standard library only (it runs
outside Ansible).
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time

# A dependent chain of fused multiply-adds per thread, long enough that a launch keeps the GPU busy for
# milliseconds; the result is stored so the compiler keeps the work. PTX 6.0 / sm_52: every driver of
# the last years compiles it for its own GPU.
PTX = r"""
.version 6.0
.target sm_52
.address_size 64

.visible .entry dgxspark_burn(.param .u64 out, .param .u32 iters)
{
    .reg .pred %p;
    .reg .b32 %r<4>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<3>;

    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [iters];
    mov.u32 %r2, %tid.x;
    cvt.rn.f32.u32 %f1, %r2;
    mov.f32 %f2, 0f3F7FFFFE;
    mov.f32 %f3, 0f3A83126F;
    mov.u32 %r3, 0;
LOOP:
    fma.rn.f32 %f1, %f1, %f2, %f3;
    fma.rn.f32 %f3, %f3, %f2, %f1;
    add.u32 %r3, %r3, 1;
    setp.lt.u32 %p, %r3, %r1;
    @%p bra LOOP;
    add.f32 %f4, %f1, %f3;
    cvta.to.global.u64 %rd2, %rd1;
    st.global.f32 [%rd2], %f4;
    ret;
}
"""
KERNEL = b"dgxspark_burn"
# Blocks x threads per launch (enough to fill the SMs of any current GPU) and the chain's length.
GRID, BLOCK, ITERS = 4096, 256, 4096
LIBRARIES = ("libcuda.so.1", "libcuda.so")


class CudaError(RuntimeError):
    pass


def load_driver(names=LIBRARIES):
    errors = []
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError as exc:
            errors.append(str(exc))
    raise CudaError("the CUDA driver library (libcuda.so.1) is not on this node: %s. Is the NVIDIA driver installed?"
                    % "; ".join(errors))


def check(lib, status, what):
    if status != 0:
        text = ctypes.c_char_p()
        lib.cuGetErrorString(status, ctypes.byref(text))
        raise CudaError("%s failed: CUDA error %d (%s)" % (what, status, (text.value or b"unknown").decode()))


def burn_device(lib, ordinal, seconds, report):
    """Launch the kernel on one GPU until `seconds` have passed; report[ordinal] = kernels run."""
    device, context = ctypes.c_int(), ctypes.c_void_p()
    module, function, buffer = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_uint64()
    check(lib, lib.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet(%d)" % ordinal)
    check(lib, lib.cuCtxCreate_v2(ctypes.byref(context), 0, device), "cuCtxCreate on GPU %d" % ordinal)
    try:
        check(lib, lib.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(PTX.encode())),
              "compiling the load kernel for GPU %d" % ordinal)
        check(lib, lib.cuModuleGetFunction(ctypes.byref(function), module, KERNEL), "cuModuleGetFunction")
        check(lib, lib.cuMemAlloc_v2(ctypes.byref(buffer), ctypes.c_size_t(4)), "cuMemAlloc")
        out, iters = ctypes.c_uint64(buffer.value), ctypes.c_uint32(ITERS)
        params = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.byref(out), ctypes.c_void_p),
                                       ctypes.cast(ctypes.byref(iters), ctypes.c_void_p))
        end, launched = time.time() + seconds, 0
        while time.time() < end:
            # A few launches queued before each wait keep the GPU busy between them.
            for _launch in range(4):
                check(lib, lib.cuLaunchKernel(function, GRID, 1, 1, BLOCK, 1, 1, 0, None, params, None), "cuLaunchKernel")
                launched += 1
            check(lib, lib.cuCtxSynchronize(), "cuCtxSynchronize")
        report[ordinal] = launched
    finally:
        lib.cuCtxDestroy_v2(context)


def burn(seconds, lib=None):
    """Load every GPU for `seconds`; returns {ordinal: kernels run}. Raises CudaError with the driver's reason."""
    lib = lib or load_driver()
    lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.cuLaunchKernel.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                                   ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p,
                                   ctypes.c_void_p, ctypes.c_void_p]
    lib.cuModuleGetFunction.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p]
    lib.cuMemAlloc_v2.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    check(lib, lib.cuInit(0), "cuInit")
    count = ctypes.c_int()
    check(lib, lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
    if count.value < 1:
        raise CudaError("the CUDA driver sees no GPU")
    report, errors = {}, []

    def run(ordinal):
        try:
            burn_device(lib, ordinal, seconds, report)
        except CudaError as exc:
            errors.append(str(exc))

    # ctypes lets go of the GIL in every driver call: one thread per GPU loads them all at once.
    threads = [threading.Thread(target=run, args=(n,)) for n in range(count.value)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise CudaError("; ".join(errors))
    return report


def main(argv):
    seconds = float(argv[1]) if len(argv) > 1 else 30.0
    try:
        report = burn(seconds)
    except CudaError as exc:
        sys.stderr.write("GPU load: %s\n" % exc)
        return 1
    for ordinal, launched in sorted(report.items()):
        sys.stdout.write("GPU %d: %d kernels in %.0f s\n" % (ordinal, launched, seconds))
    return 0


def script():
    """This file as a script for ``python3 -c`` (its argument: the seconds to load the GPUs)."""
    # Imported here: as a script this file runs alone, without the collection.
    from ansible_collections.dgxspark.vllm.plugins.module_utils._source import source_of  # pylint: disable=import-outside-toplevel
    return source_of(__name__) + "\nraise SystemExit(main(sys.argv))\n"
