// Tensor-core MMA m16n8k16 with fp32 accumulation (sm_80+), fp16 or bf16 inputs.
// PTX ISA: "Warp-level matrix multiply-accumulate: mma.sync", fragment layouts for
// .m16n8k16 (g = lane/4, t = lane%4):
//   A (16x16, row): a0 = (g, 2t..2t+1)  a1 = (g+8, 2t..)  a2 = (g, 2t+8..)  a3 = (g+8, 2t+8..)
//   B (16x8, col):  b0 = (k 2t..2t+1, n g)                 b1 = (k 2t+8.., n g)
//   C (16x8):       c0,c1 = (g, 2t..2t+1)                  c2,c3 = (g+8, 2t..2t+1)
// So the C fragments of two adjacent n8 tiles, packed to 16 bits, are exactly the A
// fragment of one k16 tile: attention keeps P in registers between its two GEMMs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace flashkit::prims {

template <typename T>
struct MmaF32;

template <>
struct MmaF32<__half> {
  __device__ __forceinline__ static void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

template <>
struct MmaF32<__nv_bfloat16> {
  __device__ __forceinline__ static void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// d += a * b for a 16x16 A fragment and a 16x8 B fragment.
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
  MmaF32<T>::run(d, a, b0, b1);
}

}  // namespace flashkit::prims
