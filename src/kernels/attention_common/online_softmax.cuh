// Online softmax over the S fragments of one warp (FlashAttention-2): running row max m
// and running row sum l, both in fp32, in base 2 with softmax_scale * log2(e) folded in.
// Each lane holds two rows per 16-row MMA tile (g and g + 8); a row's 4 owner lanes are
// one quad, so the max needs a quad reduction per tile while the sum stays lane-partial
// until the end (the partial sums are rescaled by the same factors as the row).
//
// Shared by the forward kernel families: the mma.sync C fragments (sm80) and the wgmma
// accumulators (sm90, see prims/wgmma.cuh) have the same per-warp layout.
#pragma once

#include <cmath>

#include "prims/numeric.cuh"

namespace flashkit::attn {

// Max / sum over the 2 * kNTiles scores a lane holds for one row, as a pairwise tree:
// a serial chain of dependent FMNMX/FADD stalls on their fixed latency (ncu measured
// 2.5 of 6.2 cycles per instruction spent there with serial chains).
template <int kNTiles, int kMTiles>
__device__ __forceinline__ float tree_max(const float (&s)[kMTiles][kNTiles][4], int mt, int h) {
  float v[kNTiles];
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) v[nt] = fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]);
#pragma unroll
  for (int stride = 1; stride < kNTiles; stride *= 2)
#pragma unroll
    for (int i = 0; i + stride < kNTiles; i += 2 * stride) v[i] = fmaxf(v[i], v[i + stride]);
  return v[0];
}

template <int kNTiles, int kMTiles>
__device__ __forceinline__ float tree_sum(const float (&s)[kMTiles][kNTiles][4], int mt, int h) {
  float v[kNTiles];
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) v[nt] = s[mt][nt][2 * h] + s[mt][nt][2 * h + 1];
#pragma unroll
  for (int stride = 1; stride < kNTiles; stride *= 2)
#pragma unroll
    for (int i = 0; i + stride < kNTiles; i += 2 * stride) v[i] += v[i + stride];
  return v[0];
}

template <int kMTiles, bool kConditionalRescale = true>
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
  // accumulator O where the row max used as reference had to move.
  //
  // Conditional rescaling (as in FlashAttention-4): the reference max only moves when a
  // row's new max exceeds it by more than 2^kRescaleThreshold in probability space, so P
  // stays <= 2^8 = 256 (exact enough in fp16/bf16, and the fp32 sums are unaffected) and
  // O needs rescaling only rarely: the warp skips the multiply over O entirely when none
  // of its rows moved, which after the first few key tiles is the common case. The result
  // is exact: the final normalization and LSE use the same reference max.
  static constexpr float kRescaleThreshold = 8.f;

  template <int kNTiles, int kDTiles>
  __device__ __forceinline__ void update(float (&s)[kMTiles][kNTiles][4],
                                         float (&o)[kMTiles][kDTiles][4], float scale_log2) {
    float correction[kMTiles][2];
    const bool any_moved = update_p(s, scale_log2, correction);
    rescale(o, correction, any_moved);
  }

  // update() in two halves, for a caller whose O is still being written by an MMA while it
  // turns S into P (the Hopper forward's intra-warpgroup overlap): update_p leaves O alone
  // and returns whether any row of the warp moved its reference (with the factors);
  // rescale applies them once O may be touched.
  template <int kNTiles>
  __device__ __forceinline__ bool update_p(float (&s)[kMTiles][kNTiles][4], float scale_log2,
                                           float (&correction)[kMTiles][2]) {
    bool any_moved = false;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float mx = prims::quad_max(tree_max(s, mt, h));
        const float old_max = row_max[mt][h];
        // Moves when the row had no reference yet (old -inf, new finite) or grew too much;
        // a row whose keys were all masked so far keeps -inf.
        const bool move = kConditionalRescale ? (mx - old_max) * scale_log2 > kRescaleThreshold
                                              : mx > old_max;
        const float new_max = move ? mx : old_max;
        correction[mt][h] = move ? prims::exp2_approx((old_max - new_max) * scale_log2) : 1.f;
        any_moved |= move;
        row_max[mt][h] = new_max;
        // exp2(-inf - 0) = 0 for rows with no reference, instead of exp2(-inf + inf) = NaN.
        const float max_scaled = new_max == -INFINITY ? 0.f : new_max * scale_log2;
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            s[mt][nt][2 * h + e] = prims::exp2_approx(fmaf(s[mt][nt][2 * h + e], scale_log2, -max_scaled));
          }
        }
        row_sum[mt][h] = fmaf(row_sum[mt][h], correction[mt][h], tree_sum(s, mt, h));
      }
    }
    return !kConditionalRescale || __any_sync(0xffffffffu, any_moved);
  }

  template <int kDTiles>
  __device__ __forceinline__ void rescale(float (&o)[kMTiles][kDTiles][4], const float (&correction)[kMTiles][2],
                                          bool any_moved) {
    if (any_moved) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int dt = 0; dt < kDTiles; ++dt) {
          o[mt][dt][0] *= correction[mt][0];
          o[mt][dt][1] *= correction[mt][0];
          o[mt][dt][2] *= correction[mt][1];
          o[mt][dt][3] *= correction[mt][1];
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

}  // namespace flashkit::attn
