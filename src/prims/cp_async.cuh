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

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most `N` committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace flashkit::prims
