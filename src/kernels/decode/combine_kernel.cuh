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

constexpr int kCombineThreads = 256;
constexpr int kMaxRows = 32;

template <typename T>
__global__ void __launch_bounds__(kCombineThreads) decode_combine_kernel(const DecodeParams p) {
  __shared__ float s_lse[kMaxRows];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");  // the split kernel's partials are complete
#endif
  if (int(blockIdx.x) >= p.ws.header[kHdrNumCombines]) return;
  const int2 entry = p.ws.combines[blockIdx.x];
  const int b = entry.x, hr = entry.y;
  if (b < 0 || b >= p.batch || hr < 0 || hr >= p.hr_count) return;
  const int n = p.ws.num_splits[b];
  const int first = p.ws.first_partial[b];
  if (first < 0 || n < 2 || int64_t(first + n) * p.hr_count > p.max_partials) return;
  const int kv_head = hr / p.row_groups;
  const int row0 = (hr % p.row_groups) * p.rows;
  const int rows_valid = min(p.rows, p.ratio * p.s_q - row0);
  auto slot = [&](int s) { return int64_t(first + s) * p.hr_count + hr; };

  const int tid = threadIdx.x;
  if (tid < rows_valid) {
    // One pass, online: running max m and sum l of exp(lse_s - m).
    float m = -INFINITY, l = 0.f;
#pragma unroll 4
    for (int s = 0; s < n; ++s) {
      const float x = p.ws.part_lse[slot(s) * p.rows + tid];
      if (x > m) {
        l = l * __expf(m - x) + 1.f;  // exp(-inf) = 0 on the first finite value
        m = x;
      } else if (x != -INFINITY) {
        l += __expf(x - m);
      }
    }
    const float lse = m == -INFINITY ? -INFINITY : m + __logf(l);
    s_lse[tid] = lse;
    if (p.lse != nullptr) {
      const int R = row0 + tid;
      const int hg = R / p.s_q, t = R - (R / p.s_q) * p.s_q;
      p.lse[(int64_t(b) * p.h_q + kv_head * p.ratio + hg) * p.s_q + t] = lse;
    }
  }
  __syncthreads();

  const int chunks_per_row = p.head_dim_v / 8;
  for (int c = tid; c < rows_valid * chunks_per_row; c += kCombineThreads) {
    const int r = c / chunks_per_row;
    const int col = (c - r * chunks_per_row) * 8;
    const float lse = s_lse[r];
    float acc[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] = 0.f;
    if (lse != -INFINITY) {
#pragma unroll 4
      for (int s = 0; s < n; ++s) {
        const float w = __expf(p.ws.part_lse[slot(s) * p.rows + r] - lse);
        const float* src = p.ws.part_o + (slot(s) * p.rows + r) * p.head_dim_v + col;
        const float4 a = *reinterpret_cast<const float4*>(src);
        const float4 c4 = *reinterpret_cast<const float4*>(src + 4);
        acc[0] += w * a.x, acc[1] += w * a.y, acc[2] += w * a.z, acc[3] += w * a.w;
        acc[4] += w * c4.x, acc[5] += w * c4.y, acc[6] += w * c4.z, acc[7] += w * c4.w;
      }
    }
    const int R = row0 + r;
    const int hg = R / p.s_q, t = R - (R / p.s_q) * p.s_q;
    T* dst = static_cast<T*>(p.o) + int64_t(b) * p.o_batch_stride + int64_t(t) * p.o_tok_stride +
             int64_t(kv_head * p.ratio + hg) * p.o_head_stride + col;
    uint4 packed;
    packed.x = prims::pack2<T>(acc[0], acc[1]);
    packed.y = prims::pack2<T>(acc[2], acc[3]);
    packed.z = prims::pack2<T>(acc[4], acc[5]);
    packed.w = prims::pack2<T>(acc[6], acc[7]);
    *reinterpret_cast<uint4*>(dst) = packed;
  }
}

}  // namespace flashkit::decode
