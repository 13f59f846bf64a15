/* tests/emu/include/cublas_v2.h — the emulator's cuBLAS (checked column-major loops in
 * tests/emu/cuda_emu_cublas.cuh, through cuda_emu.cuh) under the real header name, for emulator
 * builds (-Itests/emu/include). */
#include "../cuda_emu.cuh"
