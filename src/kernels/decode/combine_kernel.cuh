// Paged-decode combine: merges the fp32 partial (O, LSE) of the splits of one
// (sequence, head-row group) into the final output, in split order (deterministic):
//   lse = log(sum_s exp(lse_s)),   O = sum_s exp(lse_s - lse) * O_s
// One CTA per combine entry of the plan; rows that saw no key (every lse_s = -inf) get
// O = 0 and LSE = -inf.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/decode_params.h"
#include "prims/numeric.cuh"

namespace flashkit::decode {

constexpr int kCombineThreads = 128;
constexpr int kMaxRows = 32;
constexpr int kCombineCols = 16;      // output columns per work pair
constexpr int kStageFloats = 8192;    // 32 KB of partial O staged per batch of splits

// Persistent: the CTAs loop over the (combine entry, 16-column group) pairs. Latency, not
// bandwidth, is what a combine costs (the partials were just written and sit in L2), so
// every global load of a batch
// of splits is issued at once into shared memory and the sums run from there:
//   phase 1: all (split, row) LSEs -> per-row total LSE (online over batches),
//   phase 2: per batch, all (split, row, 16 columns) partials and their weights
//            exp(lse_s - lse) -> shared memory; each thread sums its outputs in split order.
template <typename T>
__device__ __forceinline__ void combine_one(const DecodeParams& p, int e, int cg, float* s_lse,
                                            float* s_o, float* s_w) {
  const int2 entry = p.ws.combines[e];
  const int b = entry.x, hr = entry.y;
  if (b < 0 || b >= p.batch || hr < 0 || hr >= p.hr_count) return;
  const int n = p.ws.num_splits[b];
  const int first = p.ws.first_partial[b];
  if (first < 0 || n < 2 || int64_t(first + n) * p.hr_count > p.max_partials) return;
  const int kv_head = hr / p.row_groups;
  const int row0 = (hr % p.row_groups) * p.rows;
  const int rows_valid = min(p.rows, p.ratio * p.s_q - row0);
  const int rows = p.rows;
  auto slot = [&](int s) { return int64_t(first + s) * p.hr_count + hr; };
  const int tid = threadIdx.x;
  const int per_batch = kStageFloats / (rows * kCombineCols);  // splits per batch (16 or 32)

  // Phase 1: total LSE of each row.
  float m = -INFINITY, l = 0.f;  // running, for row tid (tid < rows_valid)
  for (int s0 = 0; s0 < n; s0 += per_batch) {
    const int ns = min(per_batch, n - s0);
    __syncthreads();
    for (int i = tid; i < ns * rows; i += kCombineThreads) {
      const int s = i / rows, r = i - (i / rows) * rows;
      s_w[i] = p.ws.part_lse[slot(s0 + s) * rows + r];
    }
    __syncthreads();
    if (tid < rows_valid) {
      for (int s = 0; s < ns; ++s) {
        const float x = s_w[s * rows + tid];
        if (x > m) {
          l = l * __expf(m - x) + 1.f;  // exp(-inf) = 0 on the first finite value
          m = x;
        } else if (x != -INFINITY) {
          l += __expf(x - m);
        }
      }
    }
  }
  if (tid < rows_valid) {
    const float lse = m == -INFINITY ? -INFINITY : m + __logf(l);
    s_lse[tid] = lse;
    if (p.lse != nullptr && cg == 0) {
      const int R = row0 + tid;
      const int hg = R / p.s_q, t = R - (R / p.s_q) * p.s_q;
      p.lse[(int64_t(b) * p.h_q + kv_head * p.ratio + hg) * p.s_q + t] = lse;
    }
  }

  // Phase 2: thread -> outputs (row, column pair) of this CTA's 16 columns.
  const int col0 = cg * kCombineCols;
  constexpr int kPairs = kCombineCols / 2;
  constexpr int kMaxOut = kMaxRows * kPairs / kCombineThreads;  // 2 per thread at 32 rows
  float2 acc[kMaxOut];
#pragma unroll
  for (int j = 0; j < kMaxOut; ++j) acc[j] = make_float2(0.f, 0.f);
  for (int s0 = 0; s0 < n; s0 += per_batch) {
    const int ns = min(per_batch, n - s0);
    __syncthreads();  // s_lse visible; previous batch consumed
    for (int i = tid; i < ns * rows * (kCombineCols / 4); i += kCombineThreads) {
      const int s = i / (rows * (kCombineCols / 4));
      const int rest = i - s * (rows * (kCombineCols / 4));
      const int r = rest / (kCombineCols / 4), c4 = rest - r * (kCombineCols / 4);
      const float* src = p.ws.part_o + (slot(s0 + s) * rows + r) * p.head_dim_v + col0 + c4 * 4;
      *reinterpret_cast<float4*>(s_o + i * 4) = *reinterpret_cast<const float4*>(src);
    }
    for (int i = tid; i < ns * rows; i += kCombineThreads) {
      const int s = i / rows, r = i - (i / rows) * rows;
      const float lse = r < rows_valid ? s_lse[r] : -INFINITY;
      const float x = p.ws.part_lse[slot(s0 + s) * rows + r];
      s_w[i] = lse == -INFINITY ? 0.f : __expf(x - lse);
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kMaxOut; ++j) {
      const int o = tid + j * kCombineThreads;
      const int r = o / kPairs, c = (o - r * kPairs) * 2;
      if (r >= rows_valid) continue;
      for (int s = 0; s < ns; ++s) {
        const float w = s_w[s * rows + r];
        const float2 v = *reinterpret_cast<const float2*>(s_o + (s * rows + r) * kCombineCols + c);
        acc[j].x += w * v.x;
        acc[j].y += w * v.y;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kMaxOut; ++j) {
    const int o = tid + j * kCombineThreads;
    const int r = o / kPairs, c = (o - r * kPairs) * 2;
    if (r >= rows_valid) continue;
    const int R = row0 + r;
    const int hg = R / p.s_q, t = R - (R / p.s_q) * p.s_q;
    T* dst = static_cast<T*>(p.o) + int64_t(b) * p.o_batch_stride + int64_t(t) * p.o_tok_stride +
             int64_t(kv_head * p.ratio + hg) * p.o_head_stride + col0 + c;
    *reinterpret_cast<uint32_t*>(dst) = prims::pack2<T>(acc[j].x, acc[j].y);
  }
}


template <typename T>
__global__ void __launch_bounds__(kCombineThreads) decode_combine_kernel(const DecodeParams p) {
  __shared__ float s_lse[kMaxRows];
  __shared__ __align__(16) float s_o[kStageFloats];
  __shared__ float s_w[kStageFloats / kCombineCols];  // weights of the staged (split, row)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");  // the split kernel's partials are complete
#endif
  const int col_groups = (p.head_dim_v + kCombineCols - 1) / kCombineCols;
  const int work = p.ws.header[kHdrNumCombines] * col_groups;
  for (int w = blockIdx.x; w < work; w += gridDim.x) {
    __syncthreads();  // shared buffers of the previous pair are consumed
    combine_one<T>(p, w / col_groups, w % col_groups, s_lse, s_o, s_w);
  }
}

}  // namespace flashkit::decode
