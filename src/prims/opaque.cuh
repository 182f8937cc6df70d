// opaque(x): returns x, but the compiler can no longer see where it came from.
//
// Used to stop loop-invariant code motion from hoisting many (base + constant) values out
// of the key loop, where each would pin registers for the whole loop. Measured on the d128
// forward kernel: with the row step of the cp.async tile copies made opaque, ptxas stopped
// hoisting 16 64-bit row offsets per K/V tile and the spills fell from 88 to 8 bytes
// (+6-9% at d128). Doing the same to the ldmatrix base addresses changed nothing.
#pragma once

#include <cstdint>

namespace flashkit::prims {

__device__ __forceinline__ uint32_t opaque(uint32_t x) {
  asm volatile("" : "+r"(x));
  return x;
}

__device__ __forceinline__ int opaque(int x) {
  asm volatile("" : "+r"(x));
  return x;
}

__device__ __forceinline__ uint64_t opaque(uint64_t x) {
  asm volatile("" : "+l"(x));
  return x;
}

__device__ __forceinline__ int64_t opaque(int64_t x) {
  asm volatile("" : "+l"(x));
  return x;
}

// threadIdx.x read again where it is used (a volatile S2R the compiler neither hoists nor keeps live), for code at a
// tight register budget whose thread-derived indices would otherwise be held over a loop and spilled.
__device__ __forceinline__ int tid_x_fresh() {
  uint32_t x;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(x));
  return int(x);
}

}  // namespace flashkit::prims
