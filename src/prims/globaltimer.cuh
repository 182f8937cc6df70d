// %globaltimer (nanoseconds, one clock for the whole GPU; 32 ns steps on an H100): the
// timestamps of the kernels' diagnostic trace builds (FLASHKIT_FWD_TRACE, FLASHKIT_DECODE_TRACE).
#pragma once

#include <cstdint>

namespace flashkit::prims {

__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace flashkit::prims
