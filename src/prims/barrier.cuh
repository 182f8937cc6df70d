// Named barriers (bar.sync with an id and a thread count): synchronize a subset of a CTA,
// e.g. the two warps of a warp pair. Id 0 is __syncthreads(). PTX ISA: "bar, barrier".
#pragma once

namespace flashkit::prims {

// All `threads` threads (a multiple of 32) of barrier `id` wait here; the warps taking
// part must use the same id and count.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace flashkit::prims
