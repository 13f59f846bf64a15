/* core/init.h — mesh-independent initialisation (design 4.2): every element of every full HF tensor
 * is a pure function of (seed, tensor name, element index): splitmix64 hashing of the three gives two
 * uniforms, Box–Muller (cosine branch) a standard normal. Any mesh generates exactly its own elements. */
#ifndef MESHSWEEP_INIT_H
#define MESHSWEEP_INIT_H
#include <stdint.h>
uint64_t init_name_hash(const char *name);
/* standard normal N(0,1) for (seed, name hash, element index) */
double init_normal(uint64_t seed, uint64_t name_hash, uint64_t index);
uint64_t init_splitmix64(uint64_t x);
#endif
