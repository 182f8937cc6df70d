// Hopper (sm_90a) dense attention backward: the portable kernel's algorithm
// (src/kernels/bwd_sm80/kernel.cuh) on warpgroup MMAs.
//
// One CTA = 128 keys of one (batch, KV head), two warpgroups of 64 keys each (D = 256: 64
// keys, both warpgroups on them, dK/dV split by columns). Per query row block (64 rows of
// one query head of the GQA group):
//
//   wait Q, dO (stage i % 2) ─ fence.proxy.async ─ sync ─ issue Q, dO of block i+1
//   S^T  = K_w Q^T      wgmma SS (both K-major)          ┐ one batch, two commit groups
//   dP^T = V_w dO^T     wgmma SS                         ┘
//   P^T  = exp2(S^T * scale_log2 - lse) masked; dS^T = P^T (dP^T - delta) [* (1 - tanh^2)]
//   dV_w += P^T dO      wgmma RS (P^T from registers, dO MN-major)
//   dK_w += dS^T Q      wgmma RS
//   dS^T ─> shared (swizzled [key][row]) ─ fence.proxy.async ─ sync
//   dQ   = dS K         wgmma SS, A = dS^T and B = K both MN-major (transposed by the MMA)
//   fp32 adds into dq_accum (red.global.add.v2.f32), ordered in deterministic mode
//
// D = 256 (kExchange): warpgroup 0 issues S^T only and warpgroup 1 dP^T only; warpgroup 0
// hands its fp32 P to warpgroup 1 through shared memory (sync), warpgroup 1 forms dS^T and
// stores it before dV/dK (fence, sync), and warpgroup 0 reads its dS^T fragments back.
//
// The wgmma accumulator layout is the mma.sync C layout per warp (prims/wgmma.cuh), so the
// masking, the recomputed softmax and the packing of P^T/dS^T into A operands are those of
// the portable kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "kernels/attention_common/block_info.cuh"
#include "kernels/attention_common/bwd_cta.cuh"
#include "kernels/attention_common/bwd_kv_tiles.cuh"
#include "kernels/attention_common/mask.cuh"
#include "kernels/bwd_params.h"
#include "kernels/bwd_sm90/traits.cuh"
#include "prims/atomic.cuh"
#include "prims/cp_async.cuh"
#include "prims/numeric.cuh"
#include "prims/wgmma.cuh"
#include "tiles/tile_copy.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FLASHKIT_BWD_SM90_KERNEL_BODY 1
#else
#define FLASHKIT_BWD_SM90_KERNEL_BODY 0
#endif

namespace flashkit::bwd_sm90 {

using attn::kLog2e;

template <typename T>
__device__ __forceinline__ void pack_a4(uint32_t (&a)[4][4], const float (&c)[8][4]) {
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    a[s][0] = prims::pack2<T>(c[2 * s][0], c[2 * s][1]);
    a[s][1] = prims::pack2<T>(c[2 * s][2], c[2 * s][3]);
    a[s][2] = prims::pack2<T>(c[2 * s + 1][0], c[2 * s + 1][1]);
    a[s][3] = prims::pack2<T>(c[2 * s + 1][2], c[2 * s + 1][3]);
  }
}

// kSoftcap: the instantiation for softcapped calls (the fp16 tanh pairs it keeps from P to
// dS cost 148/156 bytes of spills at D = 128; the plain kernel has none).
// kDupSdp (D = 256 only): both warpgroups compute S^T and dP^T themselves, as the first
// version did; otherwise (kExchange) warpgroup 0 computes S^T and warpgroup 1 dP^T and they
// hand P and dS^T over through shared memory (2/7 fewer MMAs). Softcapped calls keep the
// duplicated path (the tanh terms would need another buffer that does not fit).
template <class Tr, bool kSoftcap = false, bool kDupSdp = false>
__global__ void __launch_bounds__(Tr::kThreads, Tr::kMinBlocks) bwd_kernel(const BwdParams p) {
#if FLASHKIT_BWD_SM90_KERNEL_BODY
  using T = typename Tr::T;
  constexpr int kBlockM = Tr::kBlockM;
  constexpr int kBlockN = Tr::kBlockN;
  constexpr int kD = Tr::kHeadDim;
  constexpr int kThreads = Tr::kThreads;
  using QTile = typename Tr::QTile;
  using KTile = typename Tr::KTile;
  using DsTile = typename Tr::DsTile;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_addr = prims::smem_addr(smem_raw);
  unsigned char* smem = smem_raw + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  T* sK = reinterpret_cast<T*>(smem + Tr::kSmemK);
  T* sV = reinterpret_cast<T*>(smem + Tr::kSmemV);
  T* sQ = reinterpret_cast<T*>(smem + Tr::kSmemQ);
  T* sdO = reinterpret_cast<T*>(smem + Tr::kSmemDo);
  T* sdS = reinterpret_cast<T*>(smem + Tr::kSmemDs);
  float* sLse = reinterpret_cast<float*>(smem + Tr::kSmemLse);
  float* sDelta = reinterpret_cast<float*>(smem + Tr::kSmemDelta);
  constexpr int kQElems = QTile::kBytes / int(sizeof(T));

  const int tid = threadIdx.x;
  // Warp-uniform (shuffled from lane 0), so ptxas sees warpgroup branches as uniform and
  // keeps the wgmmas around them unserialized.
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);
  const int warp = (tid % 128) / 32;  // warp within the warpgroup
  const int lane = tid % 32;
  const int g = lane / 4, t = lane % 4;

  const attn::BwdCta cta = attn::make_bwd_cta<kBlockM, kBlockN>(p);
  if (cta.n0 >= cta.seqlen_k) return;

  attn::load_kv_tiles<KTile, kThreads>(p, cta, sK, sV, tid);

  auto load_rows = [&](int it, int stage) {
    const int head = cta.head_of(p, it);
    const int m0 = cta.m_block_of(p, it) * kBlockM;
    const int rows = min(kBlockM, cta.seqlen_q - m0);
    const int64_t q_off = cta.q_side_offset(p.q_row_stride, p.q_batch_stride);
    const int64_t do_off = cta.q_side_offset(p.do_row_stride, p.do_batch_stride);
    tiles::load_tile_async<QTile, kThreads>(
        sQ + stage * kQElems,
        static_cast<const T*>(p.q) + q_off + head * p.q_head_stride + int64_t(m0) * p.q_row_stride, p.q_row_stride,
        rows, tid);
    tiles::load_tile_async<QTile, kThreads>(
        sdO + stage * kQElems,
        static_cast<const T*>(p.dout) + do_off + head * p.do_head_stride + int64_t(m0) * p.do_row_stride,
        p.do_row_stride, rows, tid);
    const int64_t stat = cta.stat_offset(p, head, m0);
    for (int r = tid; r < kBlockM; r += kThreads) {
      float lse = INFINITY, delta = 0.f;
      if (r < rows) {
        lse = p.lse[stat + r];
        delta = p.delta[stat + r];
        lse = lse == -INFINITY ? INFINITY : lse * kLog2e;
      }
      sLse[stage * kBlockM + r] = lse;
      sDelta[stage * kBlockM + r] = delta;
    }
  };
  if (cta.iters > 0) load_rows(0, 0);
  prims::cp_async_commit();

  // dK, dV of this warpgroup's 64 keys: kWgChunks n64 column blocks each (all of D, or
  // with kSplitD this warpgroup's half, starting at column block chunk0).
  constexpr int kWgChunks = Tr::kWgChunks;
  const int chunk0 = Tr::kSplitD ? wg * kWgChunks : 0;
  float dk[kWgChunks][8][4], dv[kWgChunks][8][4];
#pragma unroll
  for (int c = 0; c < kWgChunks; ++c)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[c][j][e] = dv[c][j][e] = 0.f;

  // Descriptors (128-byte swizzle, 8-row groups 1024 bytes apart). K-major: this
  // warpgroup's K and V rows, Q and dO (B of S^T, dP^T). MN-major: Q and dO (B of dK, dV),
  // dS^T and K (A and B of dQ); their leading offset is one atom column.
  const uint32_t k_addr = prims::smem_addr(sK), v_addr = prims::smem_addr(sV);
  const uint32_t q_addr = prims::smem_addr(sQ), do_addr = prims::smem_addr(sdO);
  const int wg_key0 = Tr::kSplitD ? 0 : wg * 64;  // this warpgroup's first key
  const uint64_t desc_kw = prims::smem_desc_sw128(k_addr + wg_key0 * 128, 16, 1024);
  const uint64_t desc_vw = prims::smem_desc_sw128(v_addr + wg_key0 * 128, 16, 1024);
  const uint64_t desc_ds = prims::smem_desc_sw128(prims::smem_addr(sdS), DsTile::kBlockBytes, 1024);
  const uint64_t desc_k_mn = prims::smem_desc_sw128(k_addr, KTile::kBlockBytes, 1024);

  const float scale_log2 = p.softmax_scale_log2;
  const int key_row0 = wg_key0 + warp * 16;  // this warp's first key in the block
  constexpr bool capped = kSoftcap;
  float s[8][4], dp[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[j][e] = dp[j][e] = 0.f;

  for (int it = 0; it < cta.iters; ++it) {
    const int stage = it & 1;
    const int head = cta.head_of(p, it);
    const int m_block = cta.m_block_of(p, it);
    const int m0 = m_block * kBlockM;
    prims::cp_async_wait<0>();
    prims::fence_proxy_async_smem();
    __syncthreads();  // this block's Q/dO/lse/delta visible; the other stage and sdS are free
    if (it + 1 < cta.iters) load_rows(it + 1, stage ^ 1);
    prims::cp_async_commit();

    const uint64_t desc_q = prims::smem_desc_sw128(q_addr + stage * QTile::kBytes, 16, 1024);
    const uint64_t desc_do = prims::smem_desc_sw128(do_addr + stage * QTile::kBytes, 16, 1024);
    const uint64_t desc_q_mn = prims::smem_desc_sw128(q_addr + stage * QTile::kBytes, QTile::kBlockBytes, 1024);
    const uint64_t desc_do_mn = prims::smem_desc_sw128(do_addr + stage * QTile::kBytes, QTile::kBlockBytes, 1024);

    constexpr bool kExchange = Tr::kSplitD && !kSoftcap && !kDupSdp;
    uint32_t pa[4][4], dsa[4][4];
    if constexpr (kExchange) {
      // D = 256: warpgroup 0 computes S^T = K Q^T, warpgroup 1 dP^T = V dO^T (same keys,
      // same fragment layout), into `s` for both: one issue sequence, no branch around it.
      const uint64_t desc_a = wg == 0 ? desc_kw : desc_vw;
      const uint64_t desc_b = wg == 0 ? desc_q : desc_do;
      prims::wgmma_fence();
      prims::wgmma_m64n64k16_ss_first<T, false, false>(s, desc_a, desc_b);  // "=f": s not live before
#pragma unroll
      for (int ks = 1; ks < Tr::kKSteps; ++ks) {
        const uint64_t a_off = ((ks / 4) * KTile::kBlockBytes + (ks % 4) * 32) >> 4;
        const uint64_t b_off = ((ks / 4) * QTile::kBlockBytes + (ks % 4) * 32) >> 4;
        prims::wgmma_m64n64k16_ss<T>(s, desc_a + a_off, desc_b + b_off, 1);
      }
      prims::wgmma_commit();
      const float* lse_s = sLse + stage * kBlockM;
      const float* delta_s = sDelta + stage * kBlockM;
      // lse into registers while the products run (read after the wait, its shared-memory
      // latency sat in front of every exp2: the ping-pong kernel's profile, +5% there)
      float2 lse_v[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) lse_v[j] = *reinterpret_cast<const float2*>(lse_s + j * 8 + 2 * t);
      prims::wgmma_wait<0>();
      prims::fence_operands(s);
      float4* xp = reinterpret_cast<float4*>(smem + Tr::kSmemX);  // [8][128]: P by fragment
      const int wtid = tid % 128;
      if (wg == 0) {  // P (fp32) for warpgroup 1; P^T packed for this warpgroup's dV
        const bool masked =
            cta.mask.tile_needs_mask(cta.n0, kBlockN, m0) || cta.mask.tile_needs_left_mask(cta.n0, m0 + kBlockM - 1);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = j * 8 + 2 * t + (e % 2);
            float v = prims::exp2_approx(s[j][e] * scale_log2 - (e % 2 ? lse_v[j].y : lse_v[j].x));
            if (masked && !cta.mask.visible(m0 + col, cta.n0 + key_row0 + g + (e / 2) * 8)) v = 0.f;
            s[j][e] = v;
          }
          xp[j * 128 + wtid] = make_float4(s[j][0], s[j][1], s[j][2], s[j][3]);
        }
        pack_a4<T>(pa, s);
      }
      __syncthreads();  // P visible to warpgroup 1
      if (wg == 1) {  // dS = P (dP - delta) from the handed-over P; dS^T to shared memory
        // Two column tiles of P at a time (pack_a4's pairing), so P is never held whole.
#pragma unroll
        for (int st = 0; st < 4; ++st) {
          const float4 p0 = xp[(2 * st) * 128 + wtid], p1 = xp[(2 * st + 1) * 128 + wtid];
          pa[st][0] = prims::pack2<T>(p0.x, p0.y);
          pa[st][1] = prims::pack2<T>(p0.z, p0.w);
          pa[st][2] = prims::pack2<T>(p1.x, p1.y);
          pa[st][3] = prims::pack2<T>(p1.z, p1.w);
          const float pv[2][4] = {{p0.x, p0.y, p0.z, p0.w}, {p1.x, p1.y, p1.z, p1.w}};
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int j = 2 * st + h;
#pragma unroll
            for (int e = 0; e < 4; ++e) s[j][e] = pv[h][e] * (s[j][e] - delta_s[j * 8 + 2 * t + (e % 2)]);
          }
        }
        pack_a4<T>(dsa, s);
#pragma unroll
        for (int st = 0; st < 4; ++st) {
          const int c = st * 16 + 2 * t;
          *reinterpret_cast<uint32_t*>(sdS + DsTile::offset(key_row0 + g, c)) = dsa[st][0];
          *reinterpret_cast<uint32_t*>(sdS + DsTile::offset(key_row0 + g + 8, c)) = dsa[st][1];
          *reinterpret_cast<uint32_t*>(sdS + DsTile::offset(key_row0 + g, c + 8)) = dsa[st][2];
          *reinterpret_cast<uint32_t*>(sdS + DsTile::offset(key_row0 + g + 8, c + 8)) = dsa[st][3];
        }
      }
      prims::fence_proxy_async_smem();
      __syncthreads();  // dS^T visible to warpgroup 0 and to both warpgroups' dQ wgmmas
      if (wg == 0) {  // this warpgroup's dS^T fragments, read back bit-exact
#pragma unroll
        for (int st = 0; st < 4; ++st) {
          const int c = st * 16 + 2 * t;
          dsa[st][0] = *reinterpret_cast<const uint32_t*>(sdS + DsTile::offset(key_row0 + g, c));
          dsa[st][1] = *reinterpret_cast<const uint32_t*>(sdS + DsTile::offset(key_row0 + g + 8, c));
          dsa[st][2] = *reinterpret_cast<const uint32_t*>(sdS + DsTile::offset(key_row0 + g, c + 8));
          dsa[st][3] = *reinterpret_cast<const uint32_t*>(sdS + DsTile::offset(key_row0 + g + 8, c + 8));
        }
      }
    } else {
      // S^T and dP^T (64 keys x 64 rows per warpgroup; the first k-step overwrites).
      prims::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < Tr::kKSteps; ++ks) {
        const uint64_t a_off = ((ks / 4) * KTile::kBlockBytes + (ks % 4) * 32) >> 4;
        const uint64_t b_off = ((ks / 4) * QTile::kBlockBytes + (ks % 4) * 32) >> 4;
        prims::wgmma_m64n64k16_ss<T>(s, desc_kw + a_off, desc_q + b_off, ks > 0 ? 1 : 0);
      }
      prims::wgmma_commit();
#pragma unroll
      for (int ks = 0; ks < Tr::kKSteps; ++ks) {
        const uint64_t a_off = ((ks / 4) * KTile::kBlockBytes + (ks % 4) * 32) >> 4;
        const uint64_t b_off = ((ks / 4) * QTile::kBlockBytes + (ks % 4) * 32) >> 4;
        prims::wgmma_m64n64k16_ss<T>(dp, desc_vw + a_off, desc_do + b_off, ks > 0 ? 1 : 0);
      }
      prims::wgmma_commit();
      const float* lse_s = sLse + stage * kBlockM;
      const float* delta_s = sDelta + stage * kBlockM;
      float2 lse_v[8];  // read while S^T runs (as above)
#pragma unroll
      for (int j = 0; j < 8; ++j) lse_v[j] = *reinterpret_cast<const float2*>(lse_s + j * 8 + 2 * t);
      prims::wgmma_wait<1>();
      prims::fence_operands(s);

      const bool masked = cta.mask.tile_needs_mask(cta.n0, kBlockN, m0) || cta.mask.tile_needs_left_mask(cta.n0, m0 + kBlockM - 1);
      uint32_t tanh_h[8][2];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if constexpr (capped) {
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
          float v = prims::exp2_approx(s[j][e] * scale_log2 - (e % 2 ? lse_v[j].y : lse_v[j].x));
          if (masked && !cta.mask.visible(m0 + col, cta.n0 + key_row0 + g + (e / 2) * 8)) v = 0.f;
          s[j][e] = v;
        }
      }
      pack_a4<T>(pa, s);
      prims::wgmma_wait<0>();
      prims::fence_operands(dp);
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) dp[j][e] = s[j][e] * (dp[j][e] - delta_s[j * 8 + 2 * t + (e % 2)]);
      if constexpr (capped) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const float2 th = __half22float2(*reinterpret_cast<const __half2*>(&tanh_h[j][h]));
            dp[j][2 * h] *= 1.f - th.x * th.x;
            dp[j][2 * h + 1] *= 1.f - th.y * th.y;
          }
        }
      }
      pack_a4<T>(dsa, dp);
    }

    // dV += P^T dO, dK += dS^T Q (k = the 64 query rows, 16 per step: 2048 bytes of an
    // MN-major atom column).
#pragma unroll
    for (int c = 0; c < kWgChunks; ++c) {
      prims::fence_operands(dv[c]);
      prims::fence_operands(dk[c]);
    }
    prims::wgmma_fence();
#pragma unroll
    for (int ms = 0; ms < Tr::kMSteps; ++ms) {
#pragma unroll
      for (int c = 0; c < kWgChunks; ++c) {
        const uint64_t off = ((chunk0 + c) * QTile::kBlockBytes + ms * 16 * 128) >> 4;
        prims::wgmma_m64n64k16_rs_tnspb<T>(dv[c], pa[ms], desc_do_mn + off);
        prims::wgmma_m64n64k16_rs_tnspb<T>(dk[c], dsa[ms], desc_q_mn + off);
      }
    }
    prims::wgmma_commit();

    // dS^T to shared memory: row = key (this warp's 16), column = query row (with kSplitD
    // both warpgroups hold the same dS^T: warpgroup 0 writes it; with kExchange warpgroup 1
    // wrote it above).
    if (!kExchange && (!Tr::kSplitD || wg == 0)) {
#pragma unroll
      for (int st = 0; st < 4; ++st) {
        const int c = st * 16 + 2 * t;
        *reinterpret_cast<uint32_t*>(sdS + DsTile::offset(key_row0 + g, c)) = dsa[st][0];
        *reinterpret_cast<uint32_t*>(sdS + DsTile::offset(key_row0 + g + 8, c)) = dsa[st][1];
        *reinterpret_cast<uint32_t*>(sdS + DsTile::offset(key_row0 + g, c + 8)) = dsa[st][2];
        *reinterpret_cast<uint32_t*>(sdS + DsTile::offset(key_row0 + g + 8, c + 8)) = dsa[st][3];
      }
    }
    if constexpr (!kExchange) {
      prims::fence_proxy_async_smem();
      __syncthreads();  // dS^T of both warpgroups visible to the async proxy
    }

    // dQ = dS K for this warpgroup's column chunks (or, at D = 64, its own 64 keys), one
    // chunk at a time (32 live accumulators: at D = 256 two chunks at once spilled).
    int32_t* sem = nullptr;
    int turn = 0;
    float* acc_base = p.dq_accum + ((cta.q_row0() + m0) * p.h_q + head) * kD;
#pragma unroll
    for (int c = 0; c < Tr::kDqChunks; ++c) {
      const int chunk = Tr::kDqSplitKeys ? 0 : wg + 2 * c;
      const int key0 = Tr::kDqSplitKeys ? wg * 64 : 0;
      float dq[8][4];
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) dq[j][e] = 0.f;
      prims::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < Tr::kDqKSteps; ++ks) {
        const uint64_t a_off = ((key0 + ks * 16) * 128) >> 4;
        const uint64_t b_off = (chunk * KTile::kBlockBytes + (key0 + ks * 16) * 128) >> 4;
        prims::wgmma_m64n64k16_ss_tnspab<T>(dq, desc_ds + a_off, desc_k_mn + b_off);
      }
      prims::wgmma_commit();
      prims::wgmma_wait<0>();  // (the first also completes dV, dK)
      prims::fence_operands(dq);
      if (c == 0) {
#pragma unroll
        for (int i = 0; i < kWgChunks; ++i) {
          prims::fence_operands(dv[i]);
          prims::fence_operands(dk[i]);
        }
      }

      if constexpr (Tr::kDqSplitKeys) {
        // D = 64: each warpgroup multiplied its own 64 keys. Warpgroup 1 hands its partial
        // dQ to warpgroup 0 through shared memory (the dS^T tile is free once both products
        // are done), so each dq element gets one add per CTA (fewer reds, a fixed order).
        float4* xfer = reinterpret_cast<float4*>(sdS);  // [8][128] float4 = the 16 KB tile
        __syncthreads();  // both warpgroups' dQ products have read dS^T
        if (wg == 1) {
#pragma unroll
          for (int j = 0; j < 8; ++j) xfer[j * 128 + (tid % 128)] = make_float4(dq[j][0], dq[j][1], dq[j][2], dq[j][3]);
        }
        __syncthreads();
        if (wg == 0) {
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const float4 o = xfer[j * 128 + tid];
            dq[j][0] += o.x;
            dq[j][1] += o.y;
            dq[j][2] += o.z;
            dq[j][3] += o.w;
          }
        }
      }
      if (c == 0 && p.deterministic) {  // this key block's turn for the row block's dq
        turn = cta.dq_turn<kBlockM, kBlockN>(m0);
        sem = cta.dq_counter(p, head, m_block);
        if (tid == 0) {
          while (prims::ld_acquire_gpu(sem) != turn) {
          }
        }
        __syncthreads();
      }
      const bool adds = !Tr::kDqSplitKeys || wg == 0;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = warp * 16 + g + half * 8;
        if (adds && m0 + r < cta.seqlen_q) {
          float* row = acc_base + int64_t(r) * p.h_q * kD + chunk * 64 + 2 * t;
#pragma unroll
          for (int j = 0; j < 8; ++j) prims::red_add_v2_f32(row + j * 8, dq[j][half * 2], dq[j][half * 2 + 1]);
        }
      }
    }
    if (p.deterministic) {
      __threadfence();
      __syncthreads();
      if (tid == 0) prims::st_release_gpu(sem, turn + 1);
    }
  }

  // Epilogue: dK *= softmax_scale; stage dK, dV through the K and V tiles (both
  // warpgroups are past their last dQ product, which reads K) for 16-byte stores.
  prims::cp_async_wait<0>();
  __syncthreads();
  const float scale = p.softmax_scale;
#pragma unroll
  for (int c = 0; c < kWgChunks; ++c) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int col = (chunk0 + c) * 64 + j * 8 + 2 * t;
      *reinterpret_cast<uint32_t*>(sK + KTile::offset(key_row0 + g, col)) =
          prims::pack2<T>(dk[c][j][0] * scale, dk[c][j][1] * scale);
      *reinterpret_cast<uint32_t*>(sK + KTile::offset(key_row0 + g + 8, col)) =
          prims::pack2<T>(dk[c][j][2] * scale, dk[c][j][3] * scale);
      *reinterpret_cast<uint32_t*>(sV + KTile::offset(key_row0 + g, col)) = prims::pack2<T>(dv[c][j][0], dv[c][j][1]);
      *reinterpret_cast<uint32_t*>(sV + KTile::offset(key_row0 + g + 8, col)) = prims::pack2<T>(dv[c][j][2], dv[c][j][3]);
    }
  }
  __syncthreads();
  attn::store_dkdv_tiles<KTile, kThreads>(p, cta, sK, sV, tid);
#endif  // FLASHKIT_BWD_SM90_KERNEL_BODY
}

}  // namespace flashkit::bwd_sm90
