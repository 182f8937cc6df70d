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
#include "prims/tma.cuh"

// 1 = tiles without a mask take a loop without the per-element test (kernel_pp.cuh's
// FLASHKIT_BWD_EXP_UNSWITCH), softcap calls excepted. Measured (H100, 2026-11-27, define A/B, two
// rounds, FA3 sweep bf16 D 256): fast +3.0% (+0..5.3%), deterministic +2.1% (-1.1..+3.4%); the
// prediction was +3..8%. 0 = the loop with the test inside.
#ifndef FLASHKIT_BWD_KS_EXP_UNSWITCH
#define FLASHKIT_BWD_KS_EXP_UNSWITCH 1
#endif

namespace flashkit::bwd_sm90 {

// S -> P in place: softcap (keeping tanh for dS, half precision, in tanh_h), exp2 against the
// row's lse (log2 units; +inf gives P = 0), and the mask where the tile needs one. `row` and
// `key` are the query row and key of fragment element (0, 0).
template <bool kSoftcap>
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
