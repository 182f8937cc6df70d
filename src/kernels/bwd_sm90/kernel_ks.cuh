// Hopper (sm_90a) dense attention backward at D = 256, split by keys (ks_traits.cuh).
//
// One CTA = 64 keys of one (batch, KV head); warpgroup w owns keys [32w, 32w + 32) for S and
// dP and columns [128w, 128w + 128) of dK, dV and dQ. Per query row block (64 rows of one
// query head of the GQA group):
//
//   wait Q, dO (stage i % 2) ─ fence.proxy.async ─ sync ─ issue Q, dO of block i+1
//   S_w  = Q K_w^T        wgmma SS m64n32 (both K-major)      ┐ two commit groups
//   dP_w = dO V_w^T       wgmma SS m64n32                     ┘
//   P = exp2(S * scale_log2 - lse) masked; dS = P (dP - delta) [* (1 - tanh^2)]
//   P, dS ─> shared, bf16 [row][key] ─ fence.proxy.async ─ sync (the one mid-step barrier)
//   dQ_w  = dS K[:, cols_w]    wgmma SS, A = dS K-major, B = K MN-major (2 x m64n64, 2 groups)
//   dV_w += P^T dO[:, cols_w]  wgmma SS m64n128, A = P^T and B = dO both MN-major
//   dK_w += dS^T Q[:, cols_w]  wgmma SS m64n128
//   dQ added into dq_accum (fp32) while dV/dK run: each warp stages its 16 rows in 2 KB
//   boxes for TMA reduce-adds (kDqTma), or per-thread red.global.add.v2.f32; deterministic
//   mode takes the row block's turn around the adds
//
// Against the role-split kernel (kernel.cuh, kExchange: warpgroup 0 S^T, warpgroup 1 dP^T)
// this drops the fp32 P hand-off and one CTA barrier per step, halves each warpgroup's
// exp2/dS work (16 + 16 elements per thread instead of 32 on one warpgroup, then 32 on the
// other), and keeps the tanh terms of softcapped calls local to the warpgroup.
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
#include "kernels/bwd_sm90/ks_fragments.cuh"
#include "kernels/bwd_sm90/ks_traits.cuh"
#include "kernels/device_errors.cuh"
#include "prims/atomic.cuh"
#include "prims/cp_async.cuh"
#include "prims/globaltimer.cuh"
#include "prims/mbarrier.cuh"
#include "prims/numeric.cuh"
#include "prims/tma.cuh"
#include "prims/wgmma.cuh"
#include "tiles/tile_copy.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FLASHKIT_BWD_SM90_KS_KERNEL_BODY 1
#else
#define FLASHKIT_BWD_SM90_KS_KERNEL_BODY 0
#endif

// With kDqTma, Q and dO come by TMA too (1; thread 0 issues them, two mbarrier stages) or by
// every thread's cp.async (0, for A/B runs).
#ifndef FLASHKIT_BWD_KS_TMA_LOADS
#define FLASHKIT_BWD_KS_TMA_LOADS 1
#endif
// A/B: lse and delta by 4-byte cp.async with the Q/dO copies (1) or by synchronous loads
// into shared memory (0, the first version).
#ifndef FLASHKIT_BWD_KS_STATS_ASYNC
#define FLASHKIT_BWD_KS_STATS_ASYNC 1
#endif

// The dQ staging's lane-to-column order (tuning switch): 1 = the lanes of odd g write column
// group jj ^ 2 in access jj (no bank conflicts), 0 = every lane group jj (2-way conflicts).
#ifndef FLASHKIT_BWD_KS_STAGE_SWAP
#define FLASHKIT_BWD_KS_STAGE_SWAP 1
#endif

namespace flashkit::bwd_sm90 {

// Deterministic mode's order (BwdCta): descending key blocks under a mask; without one the walk
// is rotated when the launcher sets p.dq_rotate (a (batch, KV head) group's key blocks can all be
// resident: CTA n starts at row block n M / N, and the turns of a row block are its visitors in
// step order, as in kernel_pp.cuh), else ascending (every CTA starts at row block 0 and key block
// n waits for n - 1 at each row block: the group's last CTA starts N - 1 steps late). Turns are
// counted (red.add.release, waited for with >=), so a CTA that gave up waiting (below) cannot
// stop the others.
//
// kDqTma: dQ goes to dq_accum by TMA reduce-adds (p.dq_tmap: 32-column x 16-row fp32 boxes,
// 128-byte swizzle) staged per warp, instead of per-thread reds. Deterministic mode takes the
// row block's turn around the adds either way; with kDqTma the turn is passed on at the next
// step's mid-step barrier, once every warp's adds are performed (not held while waiting for
// the next turn), so their completion overlaps the next S/dP.
//
// kFixed (with kDqTma; deterministic mode by fixed-point dQ, p.dq_fixed, bwd_params.h): no turns;
// the staged dQ rows are converted to int32, round(dQ_r * 2^k_r), and added by the integer
// reduce-adds of an int32 p.dq_tmap (kernel_pp.cuh's kFixed).
template <class Tr, bool kSoftcap = false, bool kDqTma = false, bool kFixed = false>
__global__ void __launch_bounds__(Tr::kThreads, Tr::kMinBlocks) bwd_ks_kernel(const __grid_constant__ BwdParams p) {
#if FLASHKIT_BWD_SM90_KS_KERNEL_BODY
  using T = typename Tr::T;
  constexpr int kBlockM = Tr::kBlockM;
  constexpr int kBlockN = Tr::kBlockN;
  constexpr int kD = Tr::kHeadDim;  // data columns (D 192: the tiles have 256)
  constexpr int kThreads = Tr::kThreads;
  using QTile = typename Tr::QTile;
  using KTile = typename Tr::KTile;
  using QTileIO = typename Tr::QTileIO;
  using KTileIO = typename Tr::KTileIO;
  using PTile = typename Tr::PTile;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_addr = prims::smem_addr(smem_raw);
  unsigned char* smem = smem_raw + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  T* sK = reinterpret_cast<T*>(smem + Tr::kSmemK);
  T* sV = reinterpret_cast<T*>(smem + Tr::kSmemV);
  T* sQ = reinterpret_cast<T*>(smem + Tr::kSmemQ);
  T* sdO = reinterpret_cast<T*>(smem + Tr::kSmemDo);
  T* sP = reinterpret_cast<T*>(smem + Tr::kSmemP);
  T* sdS = reinterpret_cast<T*>(smem + Tr::kSmemDs);
  float* sLse = reinterpret_cast<float*>(smem + Tr::kSmemLse);
  float* sDelta = reinterpret_cast<float*>(smem + Tr::kSmemDelta);
  constexpr int kQElems = QTile::kBytes / int(sizeof(T));

  const int tid = threadIdx.x;
  // Warp-uniform (shuffled from lane 0), so ptxas sees warpgroup branches as uniform.
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);
  const int warp = (tid % 128) / 32;  // warp within the warpgroup
  const int lane = tid % 32;
  const int g = lane / 4, t = lane % 4;

  const attn::BwdCta cta = attn::make_bwd_cta<kBlockM, kBlockN>(p);
  if (cta.n0 >= cta.seqlen_k) return;
  // The walk's row block at step it: rotated in deterministic mode without a mask where the
  // launcher allows it (p.dq_rotate; the shift recomputed where used: no register held for it
  // by the fast mode), else m_begin + it % per_head.
  auto m_block_at = [&](int it) {
    return p.dq_rotate ? cta.m_block_rot(it, cta.rot_shift<kBlockN>()) : cta.m_block_of(p, it);
  };
  // Deterministic mode: thread 0's flag, set once it gave up waiting for a turn (the rotated
  // walk's group not all resident; read and written by thread 0 only).
  volatile int* const det_free = reinterpret_cast<volatile int*>(smem + Tr::kSmemDetFree);
  if (tid == 0) *det_free = 0;

  // kTmaLoads: Q and dO of a row block by TMA (p.q_tmap / p.do_tmap, 64-row boxes), lse and
  // delta by warpgroup 0's 4-byte copies; full[stage] completes with the TMA bytes and 128
  // cp.async arrivals (+ thread 0's expect_tx arrival).
  constexpr bool kTmaLoads = kDqTma && FLASHKIT_BWD_KS_TMA_LOADS != 0;
  const uint32_t bar0 = prims::smem_addr(smem + Tr::kSmemBar);
  auto full = [&](int st) { return bar0 + 8 * st; };
  if constexpr (kTmaLoads) {
    if (tid == 0) {
      prims::mbarrier_init(full(0), 2 * kBlockM + 1);
      prims::mbarrier_init(full(1), 2 * kBlockM + 1);
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
      prims::tma_prefetch_desc(&p.q_tmap);
      prims::tma_prefetch_desc(&p.do_tmap);
    }
    __syncthreads();
  }

  attn::load_kv_tiles<KTileIO, kThreads>(p, cta, sK, sV, tid);

  // Q, dO, lse (prescaled by log2 e; +inf for rows past the sequence or with no visible
  // key, so their P is 0) and delta of walk step `it` into `stage`. Rows past the sequence
  // are zero-filled.
  auto load_rows = [&](int it, int stage) {
    const int head = cta.head_of(p, it);
    const int m0 = m_block_at(it) * kBlockM;
    const int rows = min(kBlockM, cta.seqlen_q - m0);
    if constexpr (kTmaLoads) {  // warpgroup 0 only (the callers)
      // A varlen row block that runs past its sequence: the next sequence's rows would come
      // along (an Inf or NaN there makes 0 * x NaN), so warpgroup 0 copies it zero-filled.
      const bool tail = cta.varlen && rows < kBlockM;
      if (tail) {  // one 64-column atom block at a time (a whole 256-column row needs 256 threads)
        using BlockTile = tiles::Swizzle128Tile<T, kBlockM, 64>;
        const T* q_src = static_cast<const T*>(p.q) + cta.q_side_offset(p.q_row_stride, p.q_batch_stride) +
                         head * p.q_head_stride + int64_t(m0) * p.q_row_stride;
        const T* do_src = static_cast<const T*>(p.dout) + cta.q_side_offset(p.do_row_stride, p.do_batch_stride) +
                          head * p.do_head_stride + int64_t(m0) * p.do_row_stride;
#pragma unroll
        for (int a = 0; a < kD / 64; ++a) {
          tiles::load_tile_async<BlockTile, 2 * kBlockM>(sQ + stage * kQElems + a * BlockTile::kElems, q_src + a * 64,
                                                         p.q_row_stride, rows, tid);
          tiles::load_tile_async<BlockTile, 2 * kBlockM>(sdO + stage * kQElems + a * BlockTile::kElems,
                                                         do_src + a * 64, p.do_row_stride, rows, tid);
        }
      }
      // (D 192: the data atoms only; the fourth stays as it was and feeds padding columns only)
      prims::mbarrier_arrive_expect_tx_if(tid == 0, full(stage), tail ? 0 : 2 * Tr::kDataAtoms * QTile::kBlockBytes);
      const bool issuer = tid == 0 && !tail;
      const uint32_t q_dst = prims::smem_addr(sQ + stage * kQElems), do_dst = prims::smem_addr(sdO + stage * kQElems);
      const int row = (cta.varlen ? cta.q_start : 0) + m0, batch = cta.varlen ? 0 : cta.batch;
#pragma unroll
      for (int a = 0; a < kD / 64; ++a) {
        prims::tma_load_4d_nohint_if(issuer, q_dst + a * QTile::kBlockBytes, &p.q_tmap, a * 64, row, head, batch,
                                     full(stage));
        prims::tma_load_4d_nohint_if(issuer, do_dst + a * QTile::kBlockBytes, &p.do_tmap, a * 64, row, head, batch,
                                     full(stage));
      }
      const bool is_lse = tid < kBlockM;
      const int r = tid % kBlockM;
      prims::cp_async_4((is_lse ? sLse : sDelta) + stage * kBlockM + r,
                        (is_lse ? p.lse : p.delta) + cta.stat_offset(p, head, m0) + r, r < rows);
      prims::cp_async_mbarrier_arrive(full(stage));  // (also covers the tail copies)
      return;
    }
    const int64_t q_off = cta.q_side_offset(p.q_row_stride, p.q_batch_stride);
    const int64_t do_off = cta.q_side_offset(p.do_row_stride, p.do_batch_stride);
    tiles::load_tile_async<QTileIO, kThreads>(
        sQ + stage * kQElems,
        static_cast<const T*>(p.q) + q_off + head * p.q_head_stride + int64_t(m0) * p.q_row_stride, p.q_row_stride,
        rows, tid);
    tiles::load_tile_async<QTileIO, kThreads>(
        sdO + stage * kQElems,
        static_cast<const T*>(p.dout) + do_off + head * p.do_head_stride + int64_t(m0) * p.do_row_stride,
        p.do_row_stride, rows, tid);
    const int64_t stat = cta.stat_offset(p, head, m0);
    if constexpr (FLASHKIT_BWD_KS_STATS_ASYNC != 0) {
      // Raw, zero-filled past the sequence (lse is fixed up where it is read): a synchronous
      // global load here held warpgroup 0's first two warps, and with them its S/dP issue,
      // for a memory latency every step.
      if (tid < 2 * kBlockM) {
        const bool is_lse = tid < kBlockM;
        const int r = tid % kBlockM;
        prims::cp_async_4((is_lse ? sLse : sDelta) + stage * kBlockM + r, (is_lse ? p.lse : p.delta) + stat + r,
                          r < rows);
      }
    } else {
      for (int r = tid; r < kBlockM; r += kThreads) {
        float lse = INFINITY, delta = 0.f;
        if (r < rows) {
          lse = p.lse[stat + r];
          delta = p.delta[stat + r];
          lse = lse == -INFINITY ? INFINITY : lse * attn::kLog2e;
        }
        sLse[stage * kBlockM + r] = lse;
        sDelta[stage * kBlockM + r] = delta;
      }
    }
  };
  static_assert(!kTmaLoads || FLASHKIT_BWD_KS_STATS_ASYNC != 0, "kTmaLoads: lse/delta raw, fixed up where read");
  if (cta.iters > 0 && (!kTmaLoads || wg == 0)) load_rows(0, 0);
  prims::cp_async_commit();
  if constexpr (kTmaLoads) {  // K and V: every thread's own copies, then visible to the wgmmas
    prims::cp_async_wait<0>();
    prims::fence_proxy_async_smem();
    __syncthreads();
  }

  // dK, dV: all 64 keys (M) x this warpgroup's 128 columns (N), fp32.
  float dk[16][4], dv[16][4];
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[j][e] = dv[j][e] = 0.f;

  // Descriptors (128-byte swizzle, 8-row groups 1024 bytes apart). K-major: Q and dO (A of
  // S, dP), this warpgroup's 32 K and V rows (B of S, dP), dS (A of dQ). MN-major: P and dS
  // read as P^T / dS^T (A of dV, dK: M = keys = one atom column), Q and dO (B of dK, dV:
  // two atom columns one block apart), K (B of dQ).
  const uint32_t k_addr = prims::smem_addr(sK), v_addr = prims::smem_addr(sV);
  const uint32_t q_addr = prims::smem_addr(sQ), do_addr = prims::smem_addr(sdO);
  const uint32_t p_addr = prims::smem_addr(sP), ds_addr = prims::smem_addr(sdS);
  const int key0 = wg * Tr::kWgKeys;  // this warpgroup's first key of S/dP
  const uint64_t desc_kw = prims::smem_desc_sw128(k_addr + key0 * 128, 16, 1024);
  const uint64_t desc_vw = prims::smem_desc_sw128(v_addr + key0 * 128, 16, 1024);
  const uint64_t desc_pt = prims::smem_desc_sw128(p_addr, PTile::kBlockBytes, 1024);
  const uint64_t desc_dst = prims::smem_desc_sw128(ds_addr, PTile::kBlockBytes, 1024);
  const uint64_t desc_ds = prims::smem_desc_sw128(ds_addr, 16, 1024);
  const uint64_t desc_k_mn = prims::smem_desc_sw128(k_addr, KTile::kBlockBytes, 1024);
  const int col_chunk0 = wg * (Tr::kWgCols / 64);  // this warpgroup's first 64-column chunk

  const float scale_log2 = p.softmax_scale_log2;
  const int row0 = warp * 16 + g;  // this thread's accumulator rows: row0, row0 + 8
  const int warp_all = tid / 32;  // this warp's dQ staging box (kDqTma)
  // kDqTma, deterministic: the turn taken last step, released at this step's mid-step barrier.
  int32_t* pend_sem = nullptr;

  for (int it = 0; it < cta.iters; ++it) {
    const int stage = it & 1;
    const int head = cta.head_of(p, it);
    const int m_block = m_block_at(it);
    const int m0 = m_block * kBlockM;
    if constexpr (kTmaLoads) {
      prims::mbarrier_wait(full(stage), (it >> 1) & 1);
      prims::fence_proxy_async_smem();  // (the zero-filled tail copies, for the wgmmas)
      __syncthreads();  // both warpgroups past step it - 1: the other stage, sP and sdS free
      if (wg == 0 && it + 1 < cta.iters) load_rows(it + 1, stage ^ 1);
    } else {
      prims::cp_async_wait<0>();
      prims::fence_proxy_async_smem();
      __syncthreads();  // this block's Q/dO/lse/delta visible; the other stage, sP and sdS free
      if (it + 1 < cta.iters) load_rows(it + 1, stage ^ 1);
      prims::cp_async_commit();
    }

    const uint32_t q_st = q_addr + stage * QTile::kBytes, do_st = do_addr + stage * QTile::kBytes;
    const uint64_t desc_q = prims::smem_desc_sw128(q_st, 16, 1024);
    const uint64_t desc_do = prims::smem_desc_sw128(do_st, 16, 1024);

    // S_w = Q K_w^T, dP_w = dO V_w^T: 64 rows x 32 keys, K = D.
    float s[4][4], dp[4][4];
    prims::wgmma_fence();
    prims::wgmma_m64n32k16_ss_first<T>(s, desc_q, desc_kw);
#pragma unroll
    for (int ks = 1; ks < Tr::kKSteps; ++ks) {
      const uint64_t a_off = ((ks / 4) * QTile::kBlockBytes + (ks % 4) * 32) >> 4;
      const uint64_t b_off = ((ks / 4) * KTile::kBlockBytes + (ks % 4) * 32) >> 4;
      prims::wgmma_m64n32k16_ss<T>(s, desc_q + a_off, desc_kw + b_off);
    }
    prims::wgmma_commit();
    prims::wgmma_m64n32k16_ss_first<T>(dp, desc_do, desc_vw);
#pragma unroll
    for (int ks = 1; ks < Tr::kKSteps; ++ks) {
      const uint64_t a_off = ((ks / 4) * QTile::kBlockBytes + (ks % 4) * 32) >> 4;
      const uint64_t b_off = ((ks / 4) * KTile::kBlockBytes + (ks % 4) * 32) >> 4;
      prims::wgmma_m64n32k16_ss<T>(dp, desc_do + a_off, desc_vw + b_off);
    }
    prims::wgmma_commit();
    const float* lse_s = sLse + stage * kBlockM;
    const float* delta_s = sDelta + stage * kBlockM;
    float lse0 = lse_s[row0], lse1 = lse_s[row0 + 8];  // read while the products run
    const float dl0 = delta_s[row0], dl1 = delta_s[row0 + 8];
    int fx[2] = {0, 0};  // kFixed: this thread's dQ rows' exponents (used at this step's staging)
    if constexpr (kFixed) {
      cta.dq_row_exps(p, head, m0, row0, fx);
    }
    if constexpr (FLASHKIT_BWD_KS_STATS_ASYNC != 0) {
      // log2 units; +inf (P = 0) for rows past the sequence and rows that see no key
      lse0 = m0 + row0 >= cta.seqlen_q || lse0 == -INFINITY ? INFINITY : lse0 * attn::kLog2e;
      lse1 = m0 + row0 + 8 >= cta.seqlen_q || lse1 == -INFINITY ? INFINITY : lse1 * attn::kLog2e;
    }
    prims::wgmma_wait<1>();
    prims::fence_operands(s);

    const bool masked = cta.mask.tile_needs_mask(cta.n0, kBlockN, m0) ||
                        cta.mask.tile_needs_left_mask(cta.n0, m0 + kBlockM - 1);
    uint32_t tanh_h[4][2];
    ks_probs<kSoftcap, kDqTma>(s, tanh_h, p, scale_log2, lse0, lse1, masked, cta.mask, m0 + row0,
                               cta.n0 + key0 + 2 * t);
    prims::wgmma_wait<0>();
    prims::fence_operands(dp);
    ks_dscores<kSoftcap>(dp, s, tanh_h, dl0, dl1);
    // P and dS (bf16) into their [row][key] tiles: 8 rows at one 16-byte column chunk land
    // on 8 distinct chunk positions (conflict-free 4-byte stores).
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int key = key0 + j * 8 + 2 * t;
      *reinterpret_cast<uint32_t*>(sP + PTile::offset(row0, key)) = prims::pack2<T>(s[j][0], s[j][1]);
      *reinterpret_cast<uint32_t*>(sP + PTile::offset(row0 + 8, key)) = prims::pack2<T>(s[j][2], s[j][3]);
      *reinterpret_cast<uint32_t*>(sdS + PTile::offset(row0, key)) = prims::pack2<T>(dp[j][0], dp[j][1]);
      *reinterpret_cast<uint32_t*>(sdS + PTile::offset(row0 + 8, key)) = prims::pack2<T>(dp[j][2], dp[j][3]);
    }
    const bool releases = kDqTma && pend_sem != nullptr;  // (deterministic mode only)
    if (releases && lane == 0) {
      prims::bulk_wait_group<0>();        // this warp's adds of the last row block performed
      prims::fence_proxy_async_global();  // and ordered before its generic accesses
    }
    prims::fence_proxy_async_smem();
    __syncthreads();  // both warpgroups' P and dS visible to the async proxy (and the adds done)
    if (releases) {
      if (tid == 0) {
        __threadfence();
        prims::red_add_release_gpu(pend_sem, 1);
      }
      pend_sem = nullptr;
    }

    // dQ (this warpgroup's two 64-column chunks, one commit group each), then dV and dK.
    float dq[2][8][4];
    prims::wgmma_fence();
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const uint64_t b0 = ((col_chunk0 + c) * KTile::kBlockBytes) >> 4;
      prims::wgmma_m64n64k16_ss_first<T, false, true>(dq[c], desc_ds, desc_k_mn + b0);
#pragma unroll
      for (int ks = 1; ks < Tr::kNSteps; ++ks) {
        const uint64_t a_off = (ks * 32) >> 4;
        const uint64_t b_off = ((col_chunk0 + c) * KTile::kBlockBytes + ks * 16 * 128) >> 4;
        prims::wgmma_m64n64k16_ss_tnspb<T>(dq[c], desc_ds + a_off, desc_k_mn + b_off);
      }
      prims::wgmma_commit();
    }
    const uint64_t desc_q_mn = prims::smem_desc_sw128(q_st, QTile::kBlockBytes, 1024);
    const uint64_t desc_do_mn = prims::smem_desc_sw128(do_st, QTile::kBlockBytes, 1024);
    prims::fence_operands(dv);
    prims::fence_operands(dk);
#pragma unroll
    for (int ms = 0; ms < Tr::kMSteps; ++ms) {
      const uint64_t a_off = (ms * 16 * 128) >> 4;
      const uint64_t b_off = (col_chunk0 * QTile::kBlockBytes + ms * 16 * 128) >> 4;
      prims::wgmma_m64n128k16_ss_tb<T, 1>(dv, desc_pt + a_off, desc_do_mn + b_off);
      prims::wgmma_m64n128k16_ss_tb<T, 1>(dk, desc_dst + a_off, desc_q_mn + b_off);
    }
    prims::wgmma_commit();

    // dQ's adds while dV and dK run.
    int32_t* sem = nullptr;
    if (p.deterministic && !kFixed) {  // this key block's turn for the row block's dq: `turn` releases done
      const int turn = p.dq_rotate ? cta.dq_turn_rot<kBlockN>(m_block) : cta.dq_turn<kBlockM, kBlockN>(m0);
      sem = cta.dq_counter(p, head, m_block);
      if (tid == 0 && *det_free == 0) {
        // The rotated walk's CTAs wait on each other in a cycle: a wait longer than
        // FLASHKIT_BWD_DET_GIVE_UP_NS (read every 1024 polls) means the group is not all
        // resident (another kernel or an SM limit holds SMs). Report it and stop waiting for the
        // rest of the walk: dq stays correct, its summation order is no longer fixed.
        uint32_t polls = 0;
        uint64_t t0 = 0;
        while (prims::ld_acquire_gpu(sem) < turn) {
          if (p.dq_rotate && (++polls & 1023u) == 0) {
            const uint64_t now = prims::globaltimer();
            if (t0 == 0) {
              t0 = now;
            } else if (now - t0 > FLASHKIT_BWD_DET_GIVE_UP_NS) {
              report_device_error(p.error_flag, kDeviceErrorDetOrder);
              *det_free = 1;
              break;
            }
          }
        }
      }
      __syncthreads();
    }
    float* acc_base = p.dq_accum + ((cta.q_row0() + m0) * p.h_q + head) * kD;
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      if (c == 0) {
        prims::wgmma_wait<2>();
      } else {
        prims::wgmma_wait<1>();
      }
      prims::fence_operands(dq[c]);
      if constexpr (kDqTma) {
        // This warp's 16 rows in two 32-column boxes. Rows past the sequence carry zeros (their
        // P and dS are 0), so the box may cover them: past the last row the map clips, and
        // in a varlen batch they add +0 to the next sequence's rows.
        unsigned char* box_ptr = smem + Tr::kSmemDqStage + warp_all * Tr::kDqBoxBytes;
        const uint32_t box = prims::smem_addr(box_ptr);
        const int row_g = int(cta.varlen ? cta.q_start + m0 : m0) + warp * 16;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (lane == 0) prims::bulk_wait_group_read<0>();  // the previous box has been read
          __syncwarp();
          // The 16-byte unit u of row r sits at u ^ (r % 8); this thread's units are 2 jj + t / 2.
          // A half-warp (rows g = 0..3 or 4..7) would meet each unit of one aligned group of 4
          // twice (ncu: 2x the ideal wavefronts, 2026-11-27); in access jj the lanes of odd g take
          // column group jj ^ 2 instead, so its 16 lanes meet 8 distinct units (kernel_pp.cuh's
          // staging does the same). Unit (2 (jj ^ 2) + t / 2) ^ g = (2 jj + t / 2) ^ (g ^ 4).
          const bool odd = FLASHKIT_BWD_KS_STAGE_SWAP && (g & 1) != 0;
          const int gx = odd ? g ^ 4 : g;
#pragma unroll
          for (int jj = 0; jj < 4; ++jj) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              // (selects of values: a selected array would go to local memory)
              float2 v = make_float2(odd ? dq[c][4 * h + (jj ^ 2)][2 * half] : dq[c][4 * h + jj][2 * half],
                                     odd ? dq[c][4 * h + (jj ^ 2)][2 * half + 1] : dq[c][4 * h + jj][2 * half + 1]);
              if constexpr (kFixed) v = prims::to_fixed2(v, fx[half]);
              *reinterpret_cast<float2*>(box_ptr + (g + 8 * half) * 128 + (((2 * jj + t / 2) ^ gx) * 16) + (t % 2) * 8) = v;
            }
          }
          prims::fence_proxy_async_smem();
          __syncwarp();
          if (lane == 0) {
            const int col = (col_chunk0 + c) * 64 + 32 * h;
            if (kD == Tr::kHeadDimPadded || col < kD) {  // (D 192: warpgroup 1's last chunk is padding)
              prims::tma_reduce_add_4d(&p.dq_tmap, box, col, head, row_g, cta.varlen ? 0 : cta.batch);
            }
            prims::bulk_commit_group();
          }
        }
      } else {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int r = row0 + half * 8;
          if (m0 + r < cta.seqlen_q) {
            float* row = acc_base + int64_t(r) * p.h_q * kD + (col_chunk0 + c) * 64 + 2 * t;
            if (kD == Tr::kHeadDimPadded || (col_chunk0 + c) * 64 < kD) {  // (D 192: not the padding chunk)
#pragma unroll
              for (int j = 0; j < 8; ++j) prims::red_add_v2_f32(row + j * 8, dq[c][j][half * 2], dq[c][j][half * 2 + 1]);
            }
          }
        }
      }
    }
    prims::wgmma_wait<0>();  // dV, dK done: sP, sdS and this stage's Q/dO are free
    prims::fence_operands(dv);
    prims::fence_operands(dk);
    if (p.deterministic && !kFixed) {
      if constexpr (kDqTma) {
        pend_sem = sem;
      } else {
        __threadfence();
        __syncthreads();
        if (tid == 0) prims::red_add_release_gpu(sem, 1);
      }
    }
  }
  if constexpr (kDqTma) release_last_dq_turn(pend_sem, lane, tid);  // the last row block's turn

  if constexpr (kDqTma) {
    if (lane == 0) prims::bulk_wait_group<0>();  // the reduce-adds done before exit
  }

  // Epilogue: dK *= softmax_scale; stage dK, dV through the K and V tiles (both
  // warpgroups are past their last dQ product, which reads K) for 16-byte stores.
  prims::cp_async_wait<0>();
  __syncthreads();
  const float scale = p.softmax_scale;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int col = wg * Tr::kWgCols + j * 8 + 2 * t;
    *reinterpret_cast<uint32_t*>(sK + KTile::offset(row0, col)) = prims::pack2<T>(dk[j][0] * scale, dk[j][1] * scale);
    *reinterpret_cast<uint32_t*>(sK + KTile::offset(row0 + 8, col)) =
        prims::pack2<T>(dk[j][2] * scale, dk[j][3] * scale);
    *reinterpret_cast<uint32_t*>(sV + KTile::offset(row0, col)) = prims::pack2<T>(dv[j][0], dv[j][1]);
    *reinterpret_cast<uint32_t*>(sV + KTile::offset(row0 + 8, col)) = prims::pack2<T>(dv[j][2], dv[j][3]);
  }
  __syncthreads();
  attn::store_dkdv_tiles<KTileIO, kThreads>(p, cta, sK, sV, tid);
#endif  // FLASHKIT_BWD_SM90_KS_KERNEL_BODY
}

}  // namespace flashkit::bwd_sm90
