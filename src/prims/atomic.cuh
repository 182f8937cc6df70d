// Global-memory atomics and ordered flag accesses. PTX ISA: "Parallel synchronization and
// communication instructions: ld (.acquire), st (.release), red".
#pragma once

#include <cstdint>

namespace flashkit::prims {

// Load with acquire semantics at GPU scope: later reads of this thread see every write
// that happened before the matching release store (another CTA's).
__device__ __forceinline__ int ld_acquire_gpu(const int32_t* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Relaxed load at GPU scope: for polling (ld.acquire invalidates the SM's L1 on every
// poll); follow the loop with one ld_acquire_gpu.
__device__ __forceinline__ int ld_relaxed_gpu(const int32_t* p) {
  int v;
  asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Store with release semantics at GPU scope (pairs with ld_acquire_gpu).
__device__ __forceinline__ void st_release_gpu(int32_t* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" : : "l"(p), "r"(v) : "memory");
}

// *p += v with release semantics at GPU scope (pairs with ld_acquire_gpu): a counter
// that several writers advance, each after its own writes.
__device__ __forceinline__ void red_add_release_gpu(int32_t* p, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" : : "l"(p), "r"(v) : "memory");
}

// *p += v without returning the old value (a RED instruction, performed in L2).
__device__ __forceinline__ void red_add_f32(float* p, float v) {
  asm volatile("red.global.add.f32 [%0], %1;\n" : : "l"(p), "f"(v) : "memory");
}

// p[0] += a, p[1] += b in one vector reduction (sm_90+; p 8-byte aligned).
__device__ __forceinline__ void red_add_v2_f32(float* p, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" : : "l"(p), "f"(a), "f"(b) : "memory");
#else
  red_add_f32(p, a);
  red_add_f32(p + 1, b);
#endif
}

}  // namespace flashkit::prims
