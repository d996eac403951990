/*
 * Stand-in for the CUDA driver library (libcuda.so.1) on a simulated DGX Spark node (sim only; built by
 * sim/simctl.py and installed as /usr/lib/libcuda.so.1). It answers the driver calls a compute load
 * makes (the collection's own GPU load: plugins/module_utils/_gpu_burn.py) the way a node with one GPU does,
 * and while a process holds a context it "loads" the stand-in GPU: it leaves
 * /tmp/dgxspark-sim-gpu-load.<pid>, which the nvidia-smi stand-in reads as a busy GPU (with the clocks of
 * the node's gpu_state in /etc/dgxspark-sim/scenario.json). Kernels do no work; a synchronize waits a little,
 * as a queue of real kernels would, so a load loop does not spin the sim's shared cores.
 * No GPU on the node (no scenario file; DGXSPARK_SIM_SCENARIO names another) is CUDA_ERROR_NO_DEVICE, as the
 * real driver says it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
enum {
    CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_NOT_INITIALIZED = 3, CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101, CUDA_ERROR_INVALID_PTX = 218, CUDA_ERROR_NOT_FOUND = 500,
};

static int initialized;
static char marker[64];
static char module_text[65536];
static int context_token, function_token;

static const char *scenario(void) {
    const char *path = getenv("DGXSPARK_SIM_SCENARIO");
    return path && *path ? path : "/etc/dgxspark-sim/scenario.json";
}

CUresult cuGetErrorString(CUresult error, const char **text) {
    switch (error) {
    case CUDA_SUCCESS: *text = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *text = "invalid argument"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *text = "initialization error"; break;
    case CUDA_ERROR_NO_DEVICE: *text = "no CUDA-capable device is detected"; break;
    case CUDA_ERROR_INVALID_DEVICE: *text = "invalid device ordinal"; break;
    case CUDA_ERROR_INVALID_PTX: *text = "a PTX JIT compilation failed"; break;
    case CUDA_ERROR_NOT_FOUND: *text = "named symbol not found"; break;
    default: *text = "unknown error"; return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int flags) {
    (void)flags;
    if (access(scenario(), R_OK) != 0)
        return CUDA_ERROR_NO_DEVICE;
    initialized = 1;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count) {
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    *count = 1;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(int *device, int ordinal) {
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *device = 0;
    return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v2(void **context, unsigned int flags, int device) {
    FILE *f;
    (void)flags;
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (device != 0) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(marker, sizeof(marker), "/tmp/dgxspark-sim-gpu-load.%d", (int)getpid());
    f = fopen(marker, "w");
    if (f) fclose(f);
    *context = &context_token;
    return CUDA_SUCCESS;
}

CUresult cuCtxDestroy_v2(void *context) {
    (void)context;
    if (marker[0]) unlink(marker);
    marker[0] = 0;
    return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(void **module, const void *image) {
    const char *text = image;
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (!text || !strstr(text, ".version") || !strstr(text, ".entry")) return CUDA_ERROR_INVALID_PTX;
    strncpy(module_text, text, sizeof(module_text) - 1);
    *module = module_text;
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
    char entry[256];
    snprintf(entry, sizeof(entry), ".entry %s(", name);
    if (!module || !strstr((const char *)module, entry)) return CUDA_ERROR_NOT_FOUND;
    *function = &function_token;
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(unsigned long long *pointer, size_t size) {
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    *pointer = 0x7f0000000000ULL;
    return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(void *function, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int shared, void *stream, void **params,
                        void **extra) {
    (void)gy; (void)gz; (void)by; (void)bz; (void)shared; (void)stream; (void)extra;
    if (function != &function_token || !gx || !bx || !params) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
    struct timespec wait = {0, 50 * 1000 * 1000};
    if (!marker[0]) return CUDA_ERROR_INVALID_VALUE;
    nanosleep(&wait, NULL);
    return CUDA_SUCCESS;
}
