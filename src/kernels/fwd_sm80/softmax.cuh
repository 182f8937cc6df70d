// Online softmax over the S fragments of one warp (FlashAttention-2): running row max m
// and running row sum l, both in fp32, in base 2 with softmax_scale * log2(e) folded in.
// Each lane holds two rows per 16-row MMA tile (g and g + 8); a row's 4 owner lanes are
// one quad, so the max needs a quad reduction per tile while the sum stays lane-partial
// until the end (the partial sums are rescaled by the same factors as the row).
#pragma once

#include <cmath>

#include "prims/numeric.cuh"

namespace flashkit::fwd_sm80 {

template <int kMTiles>
struct OnlineSoftmax {
  float row_max[kMTiles][2];  // raw-score units (before scaling); -inf: nothing seen yet
  float row_sum[kMTiles][2];  // lane-partial sum of exp2 terms

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        row_max[mt][h] = -INFINITY;
        row_sum[mt][h] = 0.f;
      }
    }
  }

  // Turns scores S into probabilities P (in place, unnormalized) and rescales the output
  // accumulator O by exp2(m_old - m_new) wherever the row max grew.
  template <int kNTiles, int kDTiles>
  __device__ __forceinline__ void update(float (&s)[kMTiles][kNTiles][4],
                                         float (&o)[kMTiles][kDTiles][4], float scale_log2) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = row_max[mt][h];
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
          mx = fmaxf(mx, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
        }
        mx = prims::quad_max(mx);
        // A row with every key so far masked keeps max -inf; subtract 0 then so that
        // exp2(-inf - 0) = 0 instead of exp2(-inf + inf) = NaN.
        const float max_scaled = mx == -INFINITY ? 0.f : mx * scale_log2;
        const float correction = prims::exp2_approx(row_max[mt][h] * scale_log2 - max_scaled);
        row_max[mt][h] = mx;
        float sum = row_sum[mt][h] * correction;
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float p = prims::exp2_approx(fmaf(s[mt][nt][2 * h + e], scale_log2, -max_scaled));
            s[mt][nt][2 * h + e] = p;
            sum += p;
          }
        }
        row_sum[mt][h] = sum;
#pragma unroll
        for (int dt = 0; dt < kDTiles; ++dt) {
          o[mt][dt][2 * h] *= correction;
          o[mt][dt][2 * h + 1] *= correction;
        }
      }
    }
  }

  // Normalizes O by the row sums and returns the natural-log LSE of each owned row
  // (-inf and O = 0 for rows that saw no key).
  template <int kDTiles>
  __device__ __forceinline__ void finalize(float (&o)[kMTiles][kDTiles][4], float scale_log2,
                                           float (&lse)[kMTiles][2]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float sum = prims::quad_sum(row_sum[mt][h]);
        const bool empty = sum == 0.f || row_max[mt][h] == -INFINITY;
        const float inv = empty ? 0.f : 1.f / sum;
        lse[mt][h] = empty ? -INFINITY
                           : (row_max[mt][h] * scale_log2 + __log2f(sum)) * 0.69314718055994531f;
#pragma unroll
        for (int dt = 0; dt < kDTiles; ++dt) {
          o[mt][dt][2 * h] *= inv;
          o[mt][dt][2 * h + 1] *= inv;
        }
      }
    }
  }
};

}  // namespace flashkit::fwd_sm80
