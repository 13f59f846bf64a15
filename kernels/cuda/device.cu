/* kernels/cuda/device.cu — device discovery and selection, memory and name queries, the datasheet
 * peak for MFU, and the process's one cuBLAS handle.
 *
 * What it is: the cuda_* helpers of kernels/cuda/cuda_backend.h that are not arithmetic, and
 * `device_cuda`, the engine's view of them (kernels/device.h).
 * What it is not: an allocator (ops_cuda.cu) or a stream manager: every op runs on the legacy default stream,
 * so host-side copies (to_host/from_host) order themselves after the kernels before them.
 */
#include "kernels/cuda/cuda_common.cuh"

#include <string.h>

extern "C" int cuda_device_count(void) {
    int n = 0;
    /* no driver, no device, or a driver too old: report none instead of aborting, so that the
       CUDA build still runs its CPU paths (and tests print skip lines) on machines without GPUs */
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the error so it cannot surface in a later check */
        return 0;
    }
    return n;
}

extern "C" int cuda_select_device(int local_rank, char *err, size_t errlen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        if (err && errlen)
            snprintf(err, errlen, "no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "count is 0");
        (void)cudaGetLastError();
        return -1;
    }
    if (local_rank < 0) local_rank = 0;
    int dev = local_rank % n;
    e = cudaSetDevice(dev);
    /* cudaFree(0) creates the context now, so a broken device fails here with a clear message
       rather than inside the first kernel */
    if (e == cudaSuccess) e = cudaFree(0);
    if (e != cudaSuccess) {
        if (err && errlen) snprintf(err, errlen, "cannot use CUDA device %d: %s", dev, cudaGetErrorString(e));
        (void)cudaGetLastError();
        return -1;
    }
    return 0;
}

extern "C" void cuda_mem_info(size_t *free_b, size_t *total_b) {
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess) {
        (void)cudaGetLastError();
        f = t = 0;
    }
    if (free_b) *free_b = f;
    if (total_b) *total_b = t;
}

extern "C" const char *cuda_device_name(void) {
    static char name[256];
    int dev = 0;
    cudaDeviceProp prop;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(name, sizeof name, "unknown");
        return name;
    }
    snprintf(name, sizeof name, "%s", prop.name);
    return name;
}

extern "C" double cuda_peak_bf16_tflops(const char *name) {
    if (!name) return 0.0;
    /* dense (not 2:4 sparse) bf16 tensor-core rates from NVIDIA's datasheets */
    if (strstr(name, "H100") || strstr(name, "H200")) {
        if (strstr(name, "PCIe")) return 756.0;
        if (strstr(name, "NVL")) return 835.0;
        return 989.0; /* SXM, and GH200 */
    }
    if (strstr(name, "A100")) return 312.0;
    return 0.0;
}

extern "C" double cuda_peak_bw_gbs(const char *name) {
    if (!name) return 0.0;
    /* HBM bandwidth from NVIDIA's datasheets, GB/s */
    if (strstr(name, "GH200")) return 4000.0;
    if (strstr(name, "H200")) return 4800.0;
    if (strstr(name, "H100")) {
        if (strstr(name, "PCIe")) return 2000.0;
        if (strstr(name, "NVL")) return 3900.0;
        return 3350.0;
    }
    if (strstr(name, "A100")) return strstr(name, "80GB") ? 2039.0 : 1555.0;
    return 0.0;
}

cublasHandle_t cuda_cublas(void) {
    static cublasHandle_t handle;
    static int ready = 0;
    if (!ready) {
        cublasCheck(cublasCreate(&handle));
        /* fp32 GEMMs stay fp32 (no TF32) unless asked for: the CUDA backend is checked against
           the CPU reference at 1e-3, which TF32's 10-bit mantissa would not meet */
        const char *tf32 = getenv("MESHSWEEP_TF32");
        cublasCheck(cublasSetMathMode(handle, (tf32 && tf32[0] == '1') ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                       : CUBLAS_DEFAULT_MATH));
        ready = 1;
    }
    return handle;
}

/* ---- the device as the engine sees it (kernels/device.h) ---------------------------------------
 * In the order of device_t (C++17 has no designated initialisers; -Wextra names a member left out);
 * only addresses, so it is constant-initialised, before any other static initialisation. */
static double cu_peak_flops(void) { return cuda_peak_bf16_tflops(cuda_device_name()) * 1e12; }

extern "C" const device_t device_cuda = {"cuda", 0, &ops_cuda, &ops_cuda_bf16, cuda_device_count, cuda_select_device,
                                         cuda_mem_info, cuda_device_name, cu_peak_flops, cuda_pool_reserved};
