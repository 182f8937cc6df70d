// ldmatrix: warp-cooperative loads of 8x8 b16 matrices from shared memory into the
// register fragments that mma.sync expects. PTX ISA: "Warp-level matrix load: ldmatrix".
//
// For .x4 each lane l gives the address of one row: lanes 8i..8i+7 address the 8 rows of
// matrix i; afterwards register i of lane l holds row l/4, columns 2(l%4), 2(l%4)+1 of
// matrix i (.trans: of its transpose).
#pragma once

#include <cstdint>

#include "prims/cp_async.cuh"

namespace flashkit::prims {

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row_ptr)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row_ptr)));
}

// Variants taking a 32-bit shared-memory address (see smem_addr); callers pass
// `base + constant` so that ptxas folds the constant into the instruction's immediate.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// Hides a value from the compiler's loop-invariant code motion: without it, the dozens
// of distinct (base + constant) shared-memory addresses of an unrolled tile GEMM get
// hoisted out of the key loop, each pinning a register for the whole loop (seen as
// spills at 255 registers).
__device__ __forceinline__ uint32_t opaque(uint32_t x) {
  asm volatile("" : "+r"(x));
  return x;
}

__device__ __forceinline__ int64_t opaque(int64_t x) {
  asm volatile("" : "+l"(x));
  return x;
}

}  // namespace flashkit::prims
