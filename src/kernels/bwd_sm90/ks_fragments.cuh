// Per-thread fragment math shared by the D 256 key-split kernels (kernel_ks.cuh, kernel_ks_pair.cuh):
// a warpgroup's S and dP for its 32 keys are m64n32 accumulators, s[j][e] / dp[j][e] at row
// row0 + 8 (e / 2) and key key0 + 8 j + 2 t + (e % 2) of the tile.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/attention_common/mask.cuh"
#include "kernels/bwd_params.h"
#include "prims/atomic.cuh"
#include "prims/numeric.cuh"
#include "prims/opaque.cuh"
#include "prims/tma.cuh"

// 1 = tiles without a mask take a loop without the per-element test (kernel_pp.cuh's
// FLASHKIT_BWD_EXP_UNSWITCH), softcap calls excepted. Measured (H100, 2026-11-27, define A/B, two
// rounds, FA3 sweep bf16 D 256): fast +3.0% (+0..5.3%), deterministic +2.1% (-1.1..+3.4%); the
// prediction was +3..8%. 0 = the loop with the test inside.
#ifndef FLASHKIT_BWD_KS_EXP_UNSWITCH
#define FLASHKIT_BWD_KS_EXP_UNSWITCH 1
#endif
// kernel_pp.cuh's FLASHKIT_BWD_PP_MASK_THR (defined here too: this header comes first in the launch TU), also for
// these kernels (bwd.md, "MASK_THR in D 256's key-split kernels"): 1 = ks_probs' masked tiles (without a softcap,
// unswitched) test each element against per-row bounds on its key column c = 8 j + e % 2, made once a step from
// Mask's fields, instead of Mask::visible per element. 0 = Mask::visible (SASS identical to the build before).
#ifndef FLASHKIT_BWD_PP_MASK_THR
#define FLASHKIT_BWD_PP_MASK_THR 0
#endif

namespace flashkit::bwd_sm90 {

// S -> P in place: softcap (keeping tanh for dS, half precision, in tanh_h), exp2 against the
// row's lse (log2 units; +inf gives P = 0), and the mask where the tile needs one. `row` and
// `key` are the query row and key of fragment element (0, 0). kOpaqueKey: FLASHKIT_BWD_PP_MASK_THR's bounds made from
// an opaque key (below; false for the key-split kernel without dQ TMA, where that spilled at D 192).
template <bool kSoftcap, bool kOpaqueKey = true>
__device__ __forceinline__ void ks_probs(float (&s)[4][4], uint32_t (&tanh_h)[4][2], const BwdParams& p,
                                         float scale_log2, float lse0, float lse1, bool masked,
                                         const attn::Mask& mask, int row, int key) {
  if constexpr (FLASHKIT_BWD_KS_EXP_UNSWITCH != 0 && !kSoftcap) {
    if (!masked) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[j][e] = prims::exp2_approx(s[j][e] * scale_log2 - (e / 2 ? lse1 : lse0));
      return;
    }
#if FLASHKIT_BWD_PP_MASK_THR
    // The masked tile: Mask::visible(row + 8 h, key + c) (h = e / 2, c = 8 j + e % 2, 0 .. 25; rows per h, keys per
    // c, transposed against kernel_pp.cuh's kMaskThr) as bounds on c: key + c <= right_of(row) + 8 h (if has_right)
    // is c - 8 h <= c_r, key + c < seqlen_k is c <= c_end, key + c >= row + 8 h + seqlen_k - seqlen_q - left (if
    // left >= 0) is c - 8 h >= c_lo: one bound each for both rows (right_of is linear). kNever lies past every c; the
    // API keeps windows below the sequence lengths, so nothing overflows (scripts/dev/bwd_mask_bounds_check.py checks
    // the mapping on the host). (c_hi[h] = min(c_end, c_r + 8 h), as kernel_pp.cuh's, and a bit mask per row spilled
    // 8 bytes more in the key-split TMA kernel; these three, made from an opaque key, spill less than before; in
    // D 192's key-split kernel without dQ TMA the opaque key spilled 16 bytes, the plain one none: kOpaqueKey false.)
    {
      constexpr int kNever = 1 << 24;
      if constexpr (kOpaqueKey) {
        key = prims::opaque(key);  // (keeps the bounds' sums in this branch: hoisted out of the walk, they spilled)
      }
      const int c_end = mask.seqlen_k - 1 - key;
      const int c_lo = mask.left >= 0 ? row + mask.seqlen_k - mask.seqlen_q - mask.left - key : -kNever;
      const int c_r = mask.has_right() ? mask.right_of(row) - key : kNever;
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float v = prims::exp2_approx(s[j][e] * scale_log2 - (e / 2 ? lse1 : lse0));
          const int c = j * 8 + e % 2;  // (a constant once unrolled)
          if (c - 8 * (e / 2) < c_lo || c - 8 * (e / 2) > c_r || c > c_end) v = 0.f;
          s[j][e] = v;
        }
      return;
    }
#endif
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if constexpr (kSoftcap) {
      float th[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        th[e] = prims::tanh_approx(s[j][e] * p.softcap_scale);
        s[j][e] = p.softcap * th[e];
      }
      tanh_h[j][0] = prims::pack2<__half>(th[0], th[1]);
      tanh_h[j][1] = prims::pack2<__half>(th[2], th[3]);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = prims::exp2_approx(s[j][e] * scale_log2 - (e / 2 ? lse1 : lse0));
      if (masked && !mask.visible(row + (e / 2) * 8, key + j * 8 + (e % 2))) v = 0.f;
      s[j][e] = v;
    }
  }
}

// dP -> dS in place: P (dP - delta), times the softcap's derivative 1 - tanh^2.
template <bool kSoftcap>
__device__ __forceinline__ void ks_dscores(float (&dp)[4][4], const float (&s)[4][4], const uint32_t (&tanh_h)[4][2],
                                           float dl0, float dl1) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dp[j][e] = s[j][e] * (dp[j][e] - (e / 2 ? dl1 : dl0));
    if constexpr (kSoftcap) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float2 th = __half22float2(*reinterpret_cast<const __half2*>(&tanh_h[j][h]));
        dp[j][2 * h] *= 1.f - th.x * th.x;
        dp[j][2 * h + 1] *= 1.f - th.y * th.y;
      }
    }
  }
}

// Deterministic mode, after the walk: the last row block's dq turn (pend_sem; none: nullptr),
// released once every warp's reduce-adds of it are performed (each issuing lane waits for its bulk
// group, then the CTA's barrier and a gpu-scope release), as the walk releases the others.
__device__ __forceinline__ void release_last_dq_turn(int32_t* pend_sem, int lane, int tid) {
  if (pend_sem == nullptr) return;
  if (lane == 0) {
    prims::bulk_wait_group<0>();
    prims::fence_proxy_async_global();
  }
  __threadfence();
  __syncthreads();
  if (tid == 0) prims::red_add_release_gpu(pend_sem, 1);
}

}  // namespace flashkit::bwd_sm90
