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

// The row address is a 32-bit shared-memory address (see smem_addr); callers pass
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

// One 32-bit word from a 32-bit shared-memory address (volatile like the ldmatrix forms:
// it stays between the barriers that guard its stage).
__device__ __forceinline__ uint32_t lds_u32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

// Transpose of one 8x8 matrix of 16-bit values held as an MMA fragment (lane l: row l / 4, columns
// 2 (l % 4) and 2 (l % 4) + 1 in one register): returns lane l's register of the transposed matrix.
// (PTX movmatrix, sm_75+; the 8-bit decode kernels' narrow form turns S^T fragments into P^T operands.)
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t r;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(x));
  return r;
}

}  // namespace flashkit::prims
