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

/* a runtime version as the runtime encodes it (1000·major + 10·minor) -> "13.0" */
static void cuda_ver(char *buf, size_t len, int v) { snprintf(buf, len, "%d.%d", v / 1000, v % 1000 / 10); }

/* The runtime answers cudaErrorInsufficientDriver both without a driver (cudaDriverGetVersion
 * gives 0) and with one too old for it: only the second is "driver too old". */
static int cuda_driver_too_old(cudaError_t e) {
    int drv = 0;
    (void)cudaDriverGetVersion(&drv);
    return e == cudaErrorInsufficientDriver && drv > 0;
}

/* "the NVIDIA driver supports CUDA 12.4, older than this build's CUDA 13.0 runtime: ..." when the
 * driver is too old for the runtime, so that it is never taken for "no device"; "no NVIDIA
 * driver" without one; the runtime's reason otherwise */
static void cuda_why(cudaError_t e, char *err, size_t errlen) {
    if (!err || !errlen) return;
    int drv = 0, rt = 0;
    (void)cudaDriverGetVersion(&drv);
    (void)cudaRuntimeGetVersion(&rt);
    char d[32], r[32];
    cuda_ver(d, sizeof d, drv);
    cuda_ver(r, sizeof r, rt);
    if (cuda_driver_too_old(e))
        snprintf(err, errlen,
                 "the NVIDIA driver supports CUDA %s, older than this build's CUDA %s runtime: update the driver "
                 "(or use a build against CUDA %s or older)", d, r, d);
    else if (drv == 0)
        snprintf(err, errlen, "no NVIDIA driver (%s; runtime CUDA %s)", cudaGetErrorString(e), r);
    else
        snprintf(err, errlen, "no CUDA device (%s; driver CUDA %s, runtime CUDA %s)", cudaGetErrorString(e), d, r);
}

extern "C" int cuda_versions(char *buf, size_t len, char *why, size_t whylen) {
    int drv = 0, rt = 0, n = 0, cb[3] = {0, 0, 0};
    (void)cudaDriverGetVersion(&drv);
    (void)cudaRuntimeGetVersion(&rt);
    (void)cublasGetProperty(MAJOR_VERSION, &cb[0]);
    (void)cublasGetProperty(MINOR_VERSION, &cb[1]);
    (void)cublasGetProperty(PATCH_LEVEL, &cb[2]);
    cudaError_t e = cudaGetDeviceCount(&n);
    (void)cudaGetLastError();
    char d[32], r[32];
    if (drv > 0) cuda_ver(d, sizeof d, drv);
    else snprintf(d, sizeof d, "none");
    cuda_ver(r, sizeof r, rt);
    if (why && whylen) why[0] = 0;
    if (e != cudaSuccess || n <= 0) cuda_why(e != cudaSuccess ? e : cudaErrorNoDevice, why, whylen);
    snprintf(buf, len, "driver CUDA %s, runtime CUDA %s, cuBLAS %d.%d.%d", d, r, cb[0], cb[1], cb[2]);
    if (cuda_driver_too_old(e)) return 2;
    return e == cudaSuccess && n > 0 ? 0 : 1;
}

extern "C" int cuda_device_count(void) {
    int n = 0;
    /* no driver or no device: report none instead of aborting, so that the CUDA build still runs
       its CPU paths (and tests print skip lines) on machines without GPUs. A driver too old for the
       runtime is not "no device": it is said once, on stderr, with both versions. */
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the error so it cannot surface in a later check */
        static int said = 0;
        if (!said && cuda_driver_too_old(e)) {
            char why[256];
            cuda_why(e, why, sizeof why);
            fprintf(stderr, "cuda: %s\n", why);
            said = 1;
        }
        return 0;
    }
    return n;
}

extern "C" int cuda_select_device(int local_rank, char *err, size_t errlen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        cuda_why(e != cudaSuccess ? e : cudaErrorNoDevice, err, errlen);
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
        if (cuda_driver_too_old(e)) cuda_why(e, err, errlen);
        else if (err && errlen) snprintf(err, errlen, "cannot use CUDA device %d: %s", dev, cudaGetErrorString(e));
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
