// Bulk (non-tensor) asynchronous copies global -> shared through the Hopper copy engine
// (sm_90), completing on an mbarrier by transaction bytes. PTX ISA: "cp.async.bulk",
// "mbarrier.expect_tx", "fence.proxy.async". Both addresses 16-byte aligned, the size a
// multiple of 16.
#pragma once

#include <cstdint>

namespace flashkit::prims {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// Arrives on `bar` and adds `bytes` to the transaction count its current phase waits for.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// Copies `bytes` from global `src` to shared `dst`; completion is counted on `bar`.
// The L2 policy (createpolicy) marks the lines evict-first: the data is read once.
__device__ __forceinline__ void bulk_copy_g2s(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar,
                                              uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(
          dst),
      "l"(src), "r"(bytes), "r"(bar), "l"(policy)
      : "memory");
}

// Orders this thread's prior generic-proxy shared-memory writes before later async-proxy
// (bulk copy) accesses of the same memory.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
#endif

}  // namespace flashkit::prims
