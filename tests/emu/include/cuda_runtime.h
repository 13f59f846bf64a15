/* tests/emu/include/cuda_runtime.h — in an emulator build (-Itests/emu/include) <cuda_runtime.h> is the
 * host emulator's runtime (tests/emu/cuda_emu.cuh), so the engine and the kernels include the real
 * header names and know nothing of the emulator's files. */
#include "../cuda_emu.cuh"
