/* tests/emu/include/nccl.h — the emulator's NCCL (tests/emu/nccl_emu.cuh: each collective carried out
 * by MPI when its stream reaches it) under the real header name, for emulator builds (-Itests/emu/include). */
#include "../nccl_emu.cuh"
