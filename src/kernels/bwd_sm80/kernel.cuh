// Portable dense attention backward (FlashAttention-2 algorithm), sm_80 and newer.
//
// One CTA = kBlockN keys of one (batch, KV head); dK and dV of those keys stay in registers
// while the CTA walks every (query head of the group, query row block) that sees them:
//
//   wait Q(i), dO(i) ─ sync ─ S^T = K Q^T ─ P^T = exp2(S^T * scale_log2 - lse) (masked)
//     ─ dP^T = V dO^T ─ dS^T = P^T (dP^T - delta) ─ dV += P^T dO ─ dK += dS^T Q
//     ─ dS^T to shared ─ sync ─ issue Q(i+1), dO(i+1) ─ dQ(i) = dS K ─ fp32 adds into dq_accum
//
// P^T and dS^T never leave registers for the dV/dK products: their C fragments are the A
// fragments of the next MMA (prims/mma.cuh). delta = rowsum(dO * O) comes precomputed
// (prepost.cuh). dQ of a row block gets one contribution per key block; they are added
// with fp32 atomics, or, in deterministic mode, in a fixed key-block order: a counter per
// (batch, head, row block) admits the key blocks one at a time.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "kernels/attention_common/block_info.cuh"
#include "kernels/attention_common/bwd_cta.cuh"
#include "kernels/attention_common/mask.cuh"
#include "kernels/bwd_params.h"
#include "kernels/bwd_sm80/traits.cuh"
#include "prims/atomic.cuh"
#include "prims/cp_async.cuh"
#include "prims/ldmatrix.cuh"
#include "prims/mma.cuh"
#include "prims/numeric.cuh"
#include "prims/opaque.cuh"
#include "tiles/tile_copy.cuh"

// 1 = tiles without a mask or softcap compute P in a loop without the per-element tests (the
// Hopper ping-pong kernel's FLASHKIT_BWD_EXP_UNSWITCH). Measured (H100, 2026-11-27, define A/B,
// FLASHKIT_BWD_PORTABLE=1, one round, FA3 sweep bf16 fast; bwd.md "The P loop unswitched"):
// D 64 +4..16% (geomean +12.5%), D 128 level (+0..1%). 0 = the loop with the tests inside.
#ifndef FLASHKIT_BWD_SM80_EXP_UNSWITCH
#define FLASHKIT_BWD_SM80_EXP_UNSWITCH 1
#endif

namespace flashkit::bwd_sm80 {

using attn::kLog2e;

// acc[nt] (16 x 8 tiles) += A[a_row0 .. +16][0 .. 16 kKSteps) * B[b_row0 + 8 nt][same k]^T,
// A and B both row-major in shared memory with k contiguous ("n x k" storage of B).
template <int kKSteps, int kNTiles, class ATile, class BTile, typename T>
__device__ __forceinline__ void gemm_ss_nk(float (&acc)[kNTiles][4], const T* sA, int a_row0,
                                           const T* sB, int b_row0, int lane) {
  static_assert(kNTiles % 2 == 0, "pairs of n8 tiles");
  constexpr int kElt = sizeof(T);
  const uint32_t a_addr =
      prims::opaque(prims::smem_addr(sA + ATile::offset(a_row0 + (lane % 16), (lane / 16) * 8)));
  const uint32_t b_addr = prims::opaque(
      prims::smem_addr(sB + BTile::offset(b_row0 + (lane % 8) + (lane / 16) * 8, ((lane / 8) % 2) * 8)));
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
    uint32_t a[4];
    prims::ldmatrix_x4(a, a_addr + ATile::offset(0, ks * 16) * kElt);
#pragma unroll
    for (int np = 0; np < kNTiles / 2; ++np) {
      uint32_t b[4];
      prims::ldmatrix_x4(b, b_addr + BTile::offset(np * 16, ks * 16) * kElt);
      prims::mma_m16n8k16<T>(acc[2 * np], a, b[0], b[1]);
      prims::mma_m16n8k16<T>(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// acc[nt] += A (registers, kKSteps k16 fragments) * B[k][b_col0 + 8 nt], B stored k-major
// ("k x n": rows are k) in shared memory, read with transposing ldmatrix.
template <int kKSteps, int kNTiles, class BTile, typename T>
__device__ __forceinline__ void gemm_rs_kn(float (&acc)[kNTiles][4], const uint32_t (&a)[kKSteps][4],
                                           const T* sB, int b_col0, int lane) {
  static_assert(kNTiles % 2 == 0, "pairs of n8 tiles");
  constexpr int kElt = sizeof(T);
  const uint32_t b_addr = prims::opaque(prims::smem_addr(
      sB + BTile::offset((lane % 8) + ((lane / 8) % 2) * 8, b_col0 + (lane / 16) * 8)));
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
#pragma unroll
    for (int np = 0; np < kNTiles / 2; ++np) {
      uint32_t b[4];
      prims::ldmatrix_x4_trans(b, b_addr + BTile::offset(ks * 16, np * 16) * kElt);
      prims::mma_m16n8k16<T>(acc[2 * np], a[ks], b[0], b[1]);
      prims::mma_m16n8k16<T>(acc[2 * np + 1], a[ks], b[2], b[3]);
    }
  }
}

// Packs fp32 C fragments of 2 kSteps n8 tiles (16 rows) into the 16-bit A fragments of
// kSteps k16 steps (tiles 2s and 2s+1 form step s).
template <typename T, int kSteps>
__device__ __forceinline__ void pack_a(uint32_t (&a)[kSteps][4], const float (&c)[2 * kSteps][4]) {
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    a[s][0] = prims::pack2<T>(c[2 * s][0], c[2 * s][1]);
    a[s][1] = prims::pack2<T>(c[2 * s][2], c[2 * s][3]);
    a[s][2] = prims::pack2<T>(c[2 * s + 1][0], c[2 * s + 1][1]);
    a[s][3] = prims::pack2<T>(c[2 * s + 1][2], c[2 * s + 1][3]);
  }
}

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads, Tr::kMinBlocks) bwd_kernel(const BwdParams p) {
  using T = typename Tr::T;
  constexpr int kBlockM = Tr::kBlockM;
  constexpr int kBlockN = Tr::kBlockN;
  constexpr int kD = Tr::kHeadDim;
  constexpr int kThreads = Tr::kThreads;
  using QTile = typename Tr::QTile;
  using KTile = typename Tr::KTile;
  using DsTile = typename Tr::DsTile;

  extern __shared__ __align__(128) unsigned char smem[];
  T* sK = reinterpret_cast<T*>(smem + Tr::kSmemK);
  T* sV = reinterpret_cast<T*>(smem + Tr::kSmemV);
  T* sQ = reinterpret_cast<T*>(smem + Tr::kSmemQ);
  T* sdO = reinterpret_cast<T*>(smem + Tr::kSmemDo);
  T* sdS = reinterpret_cast<T*>(smem + Tr::kSmemDs);
  float* sLse = reinterpret_cast<float*>(smem + Tr::kSmemLse);
  float* sDelta = reinterpret_cast<float*>(smem + Tr::kSmemDelta);

  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int warp_n = warp % Tr::kWarpsN;
  const int warp_d = warp / Tr::kWarpsN;
  const int g = lane / 4, t = lane % 4;

  const attn::BwdCta cta = attn::make_bwd_cta<kBlockM, kBlockN>(p);
  if (cta.n0 >= cta.seqlen_k) return;

  const int64_t k_off = cta.k_side_offset(p.k_row_stride, p.k_batch_stride);
  const int64_t v_off = cta.k_side_offset(p.v_row_stride, p.v_batch_stride);
  const T* gK = static_cast<const T*>(p.k) + k_off + cta.head_kv * p.k_head_stride + int64_t(cta.n0) * p.k_row_stride;
  const T* gV = static_cast<const T*>(p.v) + v_off + cta.head_kv * p.v_head_stride + int64_t(cta.n0) * p.v_row_stride;
  tiles::load_tile_async<KTile, kThreads>(sK, gK, p.k_row_stride, cta.keys_here, tid);
  tiles::load_tile_async<KTile, kThreads>(sV, gV, p.v_row_stride, cta.keys_here, tid);

  auto load_rows = [&](int it) {
    const int head = cta.head_of(p, it);
    const int m0 = cta.m_block_of(p, it) * kBlockM;
    const int rows = min(kBlockM, cta.seqlen_q - m0);
    const int64_t q_off = cta.q_side_offset(p.q_row_stride, p.q_batch_stride);
    const int64_t do_off = cta.q_side_offset(p.do_row_stride, p.do_batch_stride);
    tiles::load_tile_async<QTile, kThreads>(
        sQ, static_cast<const T*>(p.q) + q_off + head * p.q_head_stride + int64_t(m0) * p.q_row_stride,
        p.q_row_stride, rows, tid);
    tiles::load_tile_async<QTile, kThreads>(
        sdO, static_cast<const T*>(p.dout) + do_off + head * p.do_head_stride + int64_t(m0) * p.do_row_stride,
        p.do_row_stride, rows, tid);
    const int64_t stat = cta.stat_offset(p, head, m0);
    for (int r = tid; r < kBlockM; r += kThreads) {
      float lse = INFINITY, delta = 0.f;  // rows past the end: P = 0
      if (r < rows) {
        lse = p.lse[stat + r];
        delta = p.delta[stat + r];
        // A row that saw no key has lse = -inf and gets no gradient: P = 0 there.
        lse = lse == -INFINITY ? INFINITY : lse * kLog2e;
      }
      sLse[r] = lse;
      sDelta[r] = delta;
    }
  };
  if (cta.iters > 0) load_rows(0);
  prims::cp_async_commit();

  float dk[Tr::kSliceTiles][4], dv[Tr::kSliceTiles][4];
#pragma unroll
  for (int j = 0; j < Tr::kSliceTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[j][e] = dv[j][e] = 0.f;

  const float scale_log2 = p.softmax_scale_log2;
  const int key_row0 = warp_n * 16;  // this warp's first key in the block
  const int dq_warp_m = warp % Tr::kDqWarpsM;
  const int dq_warp_d = warp / Tr::kDqWarpsM;

  for (int it = 0; it < cta.iters; ++it) {
    const int head = cta.head_of(p, it);
    const int m_block = cta.m_block_of(p, it);
    const int m0 = m_block * kBlockM;
    prims::cp_async_wait<0>();
    __syncthreads();  // Q, dO, lse, delta of this block visible; dS of the last one consumed

    // S^T = K Q^T and P^T (16 keys x kBlockM rows per warp).
    float s[Tr::kMTiles][4];
#pragma unroll
    for (int j = 0; j < Tr::kMTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] = 0.f;
    gemm_ss_nk<Tr::kDSteps, Tr::kMTiles, KTile, QTile>(s, sK, key_row0, sQ, 0, lane);
    const bool masked = cta.mask.tile_needs_mask(cta.n0, kBlockN, m0) || cta.mask.tile_needs_left_mask(cta.n0, m0 + kBlockM - 1);
    // Softcap: scores y = c tanh(x), x = s * scale; tanh kept (fp16 pairs) for dS's factor
    // 1 - tanh^2.
    const bool capped = p.softcap > 0.f;
    uint32_t tanh_h[Tr::kMTiles][2];
#if FLASHKIT_BWD_SM80_EXP_UNSWITCH
    // tiles without mask or softcap: a loop without the per-element tests (switch: top of file)
    if (!masked && !capped) {
#pragma unroll
      for (int j = 0; j < Tr::kMTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[j][e] = prims::exp2_approx(s[j][e] * scale_log2 - sLse[j * 8 + 2 * t + (e % 2)]);
    } else {
#endif
#pragma unroll
    for (int j = 0; j < Tr::kMTiles; ++j) {
      if (capped) {
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
        const int col = j * 8 + 2 * t + (e % 2);
        float v = prims::exp2_approx(s[j][e] * scale_log2 - sLse[col]);
        if (masked && !cta.mask.visible(m0 + col, cta.n0 + key_row0 + g + (e / 2) * 8)) v = 0.f;
        s[j][e] = v;
      }
    }
#if FLASHKIT_BWD_SM80_EXP_UNSWITCH
    }
#endif
    // dP^T = V dO^T, then dS^T = P^T (dP^T - delta) in place.
    float dp[Tr::kMTiles][4];
#pragma unroll
    for (int j = 0; j < Tr::kMTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) dp[j][e] = 0.f;
    gemm_ss_nk<Tr::kDSteps, Tr::kMTiles, KTile, QTile>(dp, sV, key_row0, sdO, 0, lane);
    uint32_t pa[Tr::kMSteps][4];
    pack_a<T>(pa, s);
#pragma unroll
    for (int j = 0; j < Tr::kMTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) dp[j][e] = s[j][e] * (dp[j][e] - sDelta[j * 8 + 2 * t + (e % 2)]);
    if (capped) {
#pragma unroll
      for (int j = 0; j < Tr::kMTiles; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float2 th = __half22float2(*reinterpret_cast<const __half2*>(&tanh_h[j][h]));
          dp[j][2 * h] *= 1.f - th.x * th.x;
          dp[j][2 * h + 1] *= 1.f - th.y * th.y;
        }
      }
    }
    uint32_t dsa[Tr::kMSteps][4];
    pack_a<T>(dsa, dp);

    gemm_rs_kn<Tr::kMSteps, Tr::kSliceTiles, QTile>(dv, pa, sdO, warp_d * Tr::kSliceD, lane);
    gemm_rs_kn<Tr::kMSteps, Tr::kSliceTiles, QTile>(dk, dsa, sQ, warp_d * Tr::kSliceD, lane);
    if (warp_d == 0) {  // dS^T (16-bit, as the MMAs use it) for dQ
#pragma unroll
      for (int st = 0; st < Tr::kMSteps; ++st) {
        const int c = st * 16 + 2 * t;
        *reinterpret_cast<uint32_t*>(sdS + DsTile::offset(key_row0 + g, c)) = dsa[st][0];
        *reinterpret_cast<uint32_t*>(sdS + DsTile::offset(key_row0 + g + 8, c)) = dsa[st][1];
        *reinterpret_cast<uint32_t*>(sdS + DsTile::offset(key_row0 + g, c + 8)) = dsa[st][2];
        *reinterpret_cast<uint32_t*>(sdS + DsTile::offset(key_row0 + g + 8, c + 8)) = dsa[st][3];
      }
    }
    __syncthreads();  // dS^T complete; every warp is done with sQ, sdO, sLse, sDelta
    if (it + 1 < cta.iters) load_rows(it + 1);
    prims::cp_async_commit();

    // dQ(rows of this block) = dS K: A = dS from the transposed dS^T tile, B = K (k x n).
    float dq[Tr::kDqRowTiles][Tr::kDqTiles][4];
#pragma unroll
    for (int rt = 0; rt < Tr::kDqRowTiles; ++rt)
#pragma unroll
      for (int j = 0; j < Tr::kDqTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) dq[rt][j][e] = 0.f;
    {
      constexpr int kElt = sizeof(T);
      const uint32_t a_addr = prims::opaque(prims::smem_addr(
          sdS + DsTile::offset((lane % 8) + (lane / 16) * 8, dq_warp_m * 16 + ((lane / 8) % 2) * 8)));
#pragma unroll
      for (int ks = 0; ks < Tr::kNSteps; ++ks) {
        uint32_t a[Tr::kDqRowTiles][1][4];
#pragma unroll
        for (int rt = 0; rt < Tr::kDqRowTiles; ++rt) {
          prims::ldmatrix_x4_trans(a[rt][0], a_addr + DsTile::offset(ks * 16, rt * Tr::kDqWarpsM * 16) * kElt);
        }
        const uint32_t b_addr = prims::opaque(prims::smem_addr(
            sK + KTile::offset(ks * 16 + (lane % 8) + ((lane / 8) % 2) * 8,
                               dq_warp_d * Tr::kDqCols + (lane / 16) * 8)));
#pragma unroll
        for (int np = 0; np < Tr::kDqTiles / 2; ++np) {
          uint32_t b[4];
          prims::ldmatrix_x4_trans(b, b_addr + KTile::offset(0, np * 16) * kElt);
#pragma unroll
          for (int rt = 0; rt < Tr::kDqRowTiles; ++rt) {
            prims::mma_m16n8k16<T>(dq[rt][2 * np], a[rt][0], b[0], b[1]);
            prims::mma_m16n8k16<T>(dq[rt][2 * np + 1], a[rt][0], b[2], b[3]);
          }
        }
      }
    }
    int32_t* sem = nullptr;
    int turn = 0;
    if (p.deterministic) {
      // Key blocks add into this row block's dq one at a time, in a fixed order: ascending
      // without a causal mask; with one, descending from the last key block that the row
      // block sees (n_last). Each CTA walks row blocks upwards and key block n starts at
      // row block ~n * kBlockN / kBlockM, so with a causal mask the higher key blocks
      // reach a row block first: descending order lets them add without waiting, where
      // ascending order made each wait for key block 0 to get there (measured 0.45x the
      // fast mode instead of ~0.9x).
      // (Rows above the diagonal see no key; key block 0 still visits them: n_last >= 0.)
      // With a left window the ascending order starts at the row block's first key block.
      turn = cta.dq_turn<kBlockM, kBlockN>(m0);
      sem = cta.dq_counter(p, head, m_block);
      if (tid == 0) {
        while (prims::ld_acquire_gpu(sem) != turn) {
        }
      }
      __syncthreads();
    }
    float* acc_base = p.dq_accum + ((cta.q_row0() + m0) * p.h_q + head) * kD;
#pragma unroll
    for (int rt = 0; rt < Tr::kDqRowTiles; ++rt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = (rt * Tr::kDqWarpsM + dq_warp_m) * 16 + g + half * 8;
        if (m0 + r < cta.seqlen_q) {
          float* row = acc_base + int64_t(r) * p.h_q * kD + dq_warp_d * Tr::kDqCols + 2 * t;
#pragma unroll
          for (int j = 0; j < Tr::kDqTiles; ++j) {
            prims::red_add_f32(row + j * 8, dq[rt][j][half * 2]);
            prims::red_add_f32(row + j * 8 + 1, dq[rt][j][half * 2 + 1]);
          }
        }
      }
    }
    if (p.deterministic) {
      __threadfence();
      __syncthreads();
      if (tid == 0) prims::st_release_gpu(sem, turn + 1);
    }
  }

  // Epilogue: dK *= softmax_scale; stage dK and dV through shared memory (the K and V
  // tiles, free once every warp is past its last dQ product) for 16-byte stores.
  prims::cp_async_wait<0>();
  __syncthreads();
  const float scale = p.softmax_scale;
#pragma unroll
  for (int j = 0; j < Tr::kSliceTiles; ++j) {
    const int c = warp_d * Tr::kSliceD + j * 8 + 2 * t;
    *reinterpret_cast<uint32_t*>(sK + KTile::offset(key_row0 + g, c)) = prims::pack2<T>(dk[j][0] * scale, dk[j][1] * scale);
    *reinterpret_cast<uint32_t*>(sK + KTile::offset(key_row0 + g + 8, c)) = prims::pack2<T>(dk[j][2] * scale, dk[j][3] * scale);
    *reinterpret_cast<uint32_t*>(sV + KTile::offset(key_row0 + g, c)) = prims::pack2<T>(dv[j][0], dv[j][1]);
    *reinterpret_cast<uint32_t*>(sV + KTile::offset(key_row0 + g + 8, c)) = prims::pack2<T>(dv[j][2], dv[j][3]);
  }
  __syncthreads();
  const int64_t dk_off = cta.k_side_offset(p.dk_row_stride, p.dk_batch_stride);
  const int64_t dv_off = cta.k_side_offset(p.dv_row_stride, p.dv_batch_stride);
  T* gdK = static_cast<T*>(p.dk) + dk_off + cta.head_kv * p.dk_head_stride + int64_t(cta.n0) * p.dk_row_stride;
  T* gdV = static_cast<T*>(p.dv) + dv_off + cta.head_kv * p.dv_head_stride + int64_t(cta.n0) * p.dv_row_stride;
  tiles::store_tile<KTile, kThreads>(gdK, p.dk_row_stride, sK, cta.keys_here, tid);
  tiles::store_tile<KTile, kThreads>(gdV, p.dv_row_stride, sV, cta.keys_here, tid);
}

}  // namespace flashkit::bwd_sm80
