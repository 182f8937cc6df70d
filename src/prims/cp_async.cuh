// Asynchronous global->shared copies (sm_80+): cp.async with zero-fill, commit, wait.
// PTX ISA: "Data Movement and Conversion Instructions: cp.async".
#pragma once

#include <cstdint>

namespace flashkit::prims {

__device__ __forceinline__ uint32_t smem_addr(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// Copies 16 bytes from global `src` to shared `dst`, or writes 16 zero bytes when
// `pred` is false (src-size 0: nothing is read, so `src` may point anywhere valid-looking).
// .cg bypasses L1: tiles are read once per CTA and live in shared memory.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool pred) {
  const int src_size = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_size));
}

// The same with cache hints for data that is read exactly once (decode's K/V stream):
// kPrefetch256 asks L2 to fetch the whole 256-byte block around the access (neighbouring
// threads read it anyway), kEvictFirst marks the lines first in line for eviction.
// PTX ISA: cp.async ".level::prefetch_size", ".level::cache_hint" with createpolicy.
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// kIgnoreSrc: the zero fill by cp.async's ignore-src predicate instead of a src-size operand. With a
// register src-size ptxas emits a chain of ~6 integer instructions per copy to turn it into the
// LDGSTS.ZFILL predicate and an address adjustment (SASS of the decode split kernel, CUDA 13.0,
// decode.md "Where the split kernel's instructions go"); the predicate form maps onto it directly.
template <bool kPrefetch256, bool kEvictFirst, bool kIgnoreSrc = false>
__device__ __forceinline__ void cp_async_16_stream(void* dst, const void* src, bool pred,
                                                   uint64_t policy) {
  if constexpr (kIgnoreSrc) {
    const uint32_t ignore = pred ? 0u : 1u;
    if constexpr (kEvictFirst && kPrefetch256) {
      asm volatile("{\n .reg .pred ig;\n setp.ne.u32 ig, %2, 0;\n"
                   " cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, ig, %3;\n}\n" ::"r"(
                       smem_addr(dst)), "l"(src), "r"(ignore), "l"(policy));
    } else if constexpr (kEvictFirst) {
      asm volatile("{\n .reg .pred ig;\n setp.ne.u32 ig, %2, 0;\n"
                   " cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, ig, %3;\n}\n" ::"r"(smem_addr(dst)),
                   "l"(src), "r"(ignore), "l"(policy));
    } else if constexpr (kPrefetch256) {
      asm volatile("{\n .reg .pred ig;\n setp.ne.u32 ig, %2, 0;\n"
                   " cp.async.cg.shared.global.L2::256B [%0], [%1], 16, ig;\n}\n" ::"r"(smem_addr(dst)), "l"(src),
                   "r"(ignore));
    } else {
      asm volatile("{\n .reg .pred ig;\n setp.ne.u32 ig, %2, 0;\n"
                   " cp.async.cg.shared.global [%0], [%1], 16, ig;\n}\n" ::"r"(smem_addr(dst)), "l"(src),
                   "r"(ignore));
    }
    return;
  }
  const int src_size = pred ? 16 : 0;
  if constexpr (kEvictFirst && kPrefetch256) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2, %3;\n" ::"r"(
                     smem_addr(dst)), "l"(src), "r"(src_size), "l"(policy));
  } else if constexpr (kEvictFirst) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(smem_addr(dst)),
                 "l"(src), "r"(src_size), "l"(policy));
  } else if constexpr (kPrefetch256) {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(src_size));
  } else {
    cp_async_16(dst, src, pred);
  }
}

// cp_async_16_stream without the zero fill: the 16 bytes at `src` are always copied (the caller knows the row is
// valid; no predicate operand, so no per-copy instructions to form one).
template <bool kPrefetch256, bool kEvictFirst>
__device__ __forceinline__ void cp_async_16_stream_always(void* dst, const void* src, uint64_t policy) {
  if constexpr (kEvictFirst && kPrefetch256) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
                 "l"(src), "l"(policy));
  } else if constexpr (kEvictFirst) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "l"(policy));
  } else if constexpr (kPrefetch256) {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
  } else {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
  }
}

// The same with the destination as a 32-bit shared-memory address.
template <bool kPrefetch256, bool kEvictFirst>
__device__ __forceinline__ void cp_async_16_stream_addr(uint32_t dst, const void* src, bool pred,
                                                        uint64_t policy) {
  static_assert(!kPrefetch256 && kEvictFirst, "only the evict-first form is used");
  const int src_size = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(dst), "l"(src),
               "r"(src_size), "l"(policy));
}

// 4-byte copy (.ca: the only cache mode for sizes below 16), zero-filled when !pred (kIgnoreSrc: by the
// ignore-src predicate, as cp_async_16_stream's).
template <bool kIgnoreSrc = false>
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, bool pred) {
  if constexpr (kIgnoreSrc) {
    asm volatile("{\n .reg .pred ig;\n setp.ne.u32 ig, %2, 0;\n cp.async.ca.shared.global [%0], [%1], 4, ig;\n}\n" ::"r"(
                     smem_addr(dst)), "l"(src), "r"(pred ? 0u : 1u));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(pred ? 4 : 0));
  }
}

// cp_async_4 without the zero fill (always copies).
__device__ __forceinline__ void cp_async_4_always(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(dst)), "l"(src));
}

// A hint: the 128-byte line at ptr into L2 (no register written, no fault on the hint's account).
__device__ __forceinline__ void prefetch_l2(const void* ptr) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(ptr));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most `N` committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace flashkit::prims
