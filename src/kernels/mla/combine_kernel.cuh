// MLA combine: merges the fp32 partial results of the pieces of each sequence, in split
// order (deterministic), and writes out / lse for sequences that no part visited.
//   n == 1: nothing to do (the split kernel wrote out and lse itself)
//   n == 0: out = 0, lse = +inf for every row of the sequence
//   n >= 2: lse = log(sum_s exp(lse_s)), out = sum_s exp(lse_s - lse) * part_o_s
// Rows where every lse_s is -inf (no key seen by any piece) get out = 0 and lse = +inf.
// Partials (natural log): part_o[(slot * h_kv * rows_per_kv + kvh * rows_per_kv + row) * 512
// + col], part_lse[...] likewise, slot = num_splits[b] + split. A sequence whose slots would
// fall outside [0, max_partials) (metadata not made for these lengths) is treated as having
// no piece: out 0 / lse +inf, and no partial is read.
// Grid (batch, h_kv, ceil(rows_per_kv / 8)), 8 warps, one row each: the per-row chain of
// dependent loads (LSEs, then the partials in split order) is latency, so every row gets
// its own warp (8 rows per warp in turn made it 23 us at b = 128, 128 rows, 2 pieces).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/mla_params.h"
#include "prims/numeric.cuh"

namespace flashkit::mla {

constexpr int kCombineThreads = 256;
constexpr int kCombineRows = kCombineThreads / 32;  // rows per CTA

template <typename T>
__global__ void __launch_bounds__(kCombineThreads) mla_combine_kernel(const MlaParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");  // the split kernel's results are complete
#endif
  const int b = blockIdx.x, kvh = blockIdx.y;
  const int first = p.num_splits[b];
  const int n = p.num_splits[b + 1] - first;
  if (n == 1) return;
  const bool ok = n >= 2 && first >= 0 && int64_t(first) + n <= int64_t(p.max_partials);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int rpk = p.rows_per_kv;
  const int64_t slot_rows = int64_t(p.h_kv) * rpk;
  {
    const int row = blockIdx.z * kCombineRows + warp;
    if (row >= rpk) return;
    const int t = row / p.ratio, head = kvh * p.ratio + row % p.ratio;
    const int64_t prow = int64_t(kvh) * rpk + row;
    float lse = INFINITY;
    float4 acc[kMlaHeadDimV / 128];
#pragma unroll
    for (int j = 0; j < kMlaHeadDimV / 128; ++j) acc[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (ok) {
      float m = -INFINITY;
      for (int s = lane; s < n; s += 32) m = fmaxf(m, p.part_lse[(first + s) * slot_rows + prow]);
#pragma unroll
      for (int o = 16; o >= 1; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
      if (m != -INFINITY) {
        float sum = 0.f;
        for (int s = lane; s < n; s += 32) {
          const float x = p.part_lse[(first + s) * slot_rows + prow];
          if (x != -INFINITY) sum += expf(x - m);
        }
#pragma unroll
        for (int o = 16; o >= 1; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        lse = m + logf(sum);
        for (int s = 0; s < n; ++s) {  // split order
          const int64_t at = (first + s) * slot_rows + prow;
          const float x = p.part_lse[at];
          if (x == -INFINITY) continue;  // that piece saw no key (its part_o is 0)
          const float w = expf(x - lse);
          const float4* src = reinterpret_cast<const float4*>(p.part_o + at * kMlaHeadDimV);
#pragma unroll
          for (int j = 0; j < kMlaHeadDimV / 128; ++j) {
            const float4 v = src[j * 32 + lane];
            acc[j].x += w * v.x, acc[j].y += w * v.y, acc[j].z += w * v.z, acc[j].w += w * v.w;
          }
        }
      }
    }
    T* dst = static_cast<T*>(p.o) + int64_t(b) * p.o_batch_stride + int64_t(t) * p.o_tok_stride +
             int64_t(head) * p.o_head_stride;
#pragma unroll
    for (int j = 0; j < kMlaHeadDimV / 128; ++j) {
      uint2 v;
      v.x = prims::pack2<T>(acc[j].x, acc[j].y);
      v.y = prims::pack2<T>(acc[j].z, acc[j].w);
      *reinterpret_cast<uint2*>(dst + (j * 32 + lane) * 4) = v;
    }
    if (lane == 0) p.lse[(int64_t(b) * p.h_q + head) * p.s_q + t] = lse;
  }
}

}  // namespace flashkit::mla
