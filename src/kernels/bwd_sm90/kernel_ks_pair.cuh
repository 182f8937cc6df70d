// Hopper (sm_90a) dense attention backward at D = 256 (and D 192 on its tiles), fast and fixed-point modes, on pairs
// of key-split CTAs (a cluster of two; docs/kernels/bwd.md, "Plan: a 2-CTA cluster on the key-split kernel").
// The launchers take it by the measured rules of src/launch/bwd_sm90_launch.cuh (D 256 and D 192 on D 256's tiles;
// FLASHKIT_BWD_KS_PAIR=1 / =0: wherever it can run / never); otherwise kernel_ks.cuh.
//
// CTA r of a pair owns key block 2c + r as in kernel_ks.cuh (S, dP, P, dS, dV and dK for its
// 64 keys; warpgroup w: keys [32w, 32w + 32) of S/dP, columns [128w, 128w + 128) of dV/dK). What
// changes is dQ: each CTA sends its dS tile (8 KB, a bulk copy into the partner's shared memory)
// and computes dQ's columns [128r, 128r + 128) over both key blocks, warpgroup w the 64 columns
// at 128r + 64w:
//   dQ_r = dS_own K_own[:, cols] + dS_partner K_partner[:, cols]
// (K_partner's column half is loaded once, 16 KB). Each CTA stages and adds 32 KB of dQ a step
// instead of 64 KB (two 2 KB boxes a warp instead of four), and holds 32 dQ accumulators a
// thread instead of 64. To fit the partner's dS and K half, dO has one stage instead of two: the
// step issues dV first (it reads only P and this warpgroup's dO columns), and each warpgroup
// loads its half of the next row block's dO as soon as its dV is done. Per step:
//
//   wait Q (stage i % 2), dO; sync; issue Q of block i + 1; arm in_full (8 KB)
//   S_w, dP_w; P, dS (as kernel_ks.cuh)
//   wait out_free(i - 1) (the partner is done with our dS of i - 1); store P, dS; sync
//   thread 0: bulk copy dS -> the partner's rdS, completing on its in_full
//   dV (group 0); dQ own keys, wait in_full(i), dQ partner keys (group 1); dK (group 2)
//   dV done: this warpgroup loads its half of dO(i + 1)
//   dQ done: arrive on the partner's out_free; stage and reduce-add our 64 columns
//   dK done
//
// The pair walks the union of its two key blocks' row blocks (causal, windows); a row block a
// key block cannot see gives it P = dS = 0 by the mask. With an odd number of key blocks the
// last pair's second CTA has no keys: it walks, sends zeros and adds its half of dQ's columns,
// and writes no dK / dV. Not for varlen calls (the launcher).
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
#include "prims/atomic.cuh"
#include "prims/cluster.cuh"
#include "prims/cp_async.cuh"
#include "prims/mbarrier.cuh"
#include "prims/numeric.cuh"
#include "prims/tma.cuh"
#include "prims/wgmma.cuh"
#include "tiles/smem_swizzle.cuh"
#include "tiles/tile_copy.cuh"

// FLASHKIT_BWD_PAIR_CTA_SCOPE (tuning switch, default 1 since 2026-11-29; bwd.md "The pair kernel's cluster-scope
// barriers"): 1 = the arrival on the partner's out_free with the default (CTA-scope) release and the wait for the
// partner's dS on in_full at CTA scope, as CUTLASS's multicast pipelines. At cluster scope ptxas puts a MEMBAR.ALL.GPU
// before the arrival and a CCTL.IVALL (L1 invalidation) after each wait, both inside the step's wgmma chain (SASS of
// the bf16 D 256 file: 3 MEMBAR.ALL.GPU and 7 CCTL.IVALL per fast-mode kernel). out_free's wait, before the generic
// stores into sdS that the last bulk copy read, stays at cluster scope at 0 and 1. Three interleaved rounds on an H200,
// bf16 D 256 S 2k-16k: +1.7..5.5 % on 7 of 8 rows (geomean +3.5 %), the 8th level; the pair tests pass on it.
// 2 (A/B, bwd.md): out_free's wait at CTA scope too. The partner arrives on it after its dQ read the copy of our dS
// of step it - 1, and that copy's reads of our sdS are done once it landed (the partner waited in_full first): the
// same hand-off as CUTLASS's multicast pipeline, whose producer waits at CTA scope for remote consumers' releases
// before its TMA overwrites their stage.
#ifndef FLASHKIT_BWD_PAIR_CTA_SCOPE
#define FLASHKIT_BWD_PAIR_CTA_SCOPE 1
#endif

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FLASHKIT_BWD_SM90_KS_PAIR_BODY 1
#else
#define FLASHKIT_BWD_SM90_KS_PAIR_BODY 0
#endif

namespace flashkit::bwd_sm90 {

// The key-split kernel's tile shapes (ks_traits.cuh), with its own shared-memory plan: one dO
// stage, the partner's dS and the partner's K column half.
template <typename T_, int kHeadDim_>
struct BwdKsPairTraits : BwdKsTraits<T_, kHeadDim_> {
  using Base = BwdKsTraits<T_, kHeadDim_>;
  using typename Base::KTile;
  using typename Base::PTile;
  using typename Base::QTile;
  using Base::kBlockM;
  using Base::kDqBoxBytes;  // a warp's 16 rows x 32 fp32 columns of dQ staging
  using Base::kHeadDim;
  using Base::kThreads;
  using Base::kHeadDimPadded;
  using KHalfTile = tiles::Swizzle128Tile<T_, Base::kBlockN, kHeadDimPadded / 2>;  // the partner's K, our columns
  // D 192 (on D 256's tiles, ks_traits.cuh): the second half holds 64 data columns.
  using KHalfTileIO1 = tiles::ColumnPrefix<KHalfTile, kHeadDim_ - kHeadDimPadded / 2>;

  static constexpr int kSmemK = 0;
  static constexpr int kSmemV = kSmemK + KTile::kBytes;
  static constexpr int kSmemQ = kSmemV + KTile::kBytes;        // 2 stages
  static constexpr int kSmemDo = kSmemQ + 2 * QTile::kBytes;   // 1 stage
  static constexpr int kSmemP = kSmemDo + QTile::kBytes;
  static constexpr int kSmemDs = kSmemP + PTile::kBytes;
  static constexpr int kSmemRds = kSmemDs + PTile::kBytes;     // the partner's dS (its bulk copy)
  static constexpr int kSmemKp = kSmemRds + PTile::kBytes;
  static constexpr int kSmemLse = kSmemKp + KHalfTile::kBytes;  // fp32 [2][kBlockM]
  static constexpr int kSmemDelta = kSmemLse + 2 * kBlockM * 4;
  static constexpr int kSmemDqStage = kSmemDelta + 2 * kBlockM * 4;
  // mbarriers: q_full[2], do_full, in_full, out_free
  static constexpr int kSmemBar = kSmemDqStage + (kThreads / 32) * kDqBoxBytes;
  static constexpr int kSmemBytes = kSmemBar + 5 * 8 + 1024;  // + alignment slack
  static_assert(kSmemBytes <= 227 * 1024, "fits an H100/H200 SM's shared memory");
  static_assert(kSmemDqStage % 1024 == 0 && kSmemKp % 1024 == 0 && kSmemRds % 1024 == 0, "swizzle atoms");
};

// kDet: deterministic mode (FLASHKIT_BWD_KS_PAIR_DET=1, the launcher): both CTAs of a pair take
// one turn per row block (BwdCta::dq_turn_pair; the key blocks descend under a right bound, as in
// the other kernels, so a pair only waits for pairs launched before it), waited for by thread 0
// before the dQ adds and released at the next step's mid-step barrier once the adds performed.
// kFixed (not with kDet): deterministic mode by fixed-point dQ (kernel_ks.cuh's kFixed).
template <class Tr, bool kSoftcap = false, bool kDet = false, bool kFixed = false>
__global__ void __launch_bounds__(Tr::kThreads, Tr::kMinBlocks) bwd_ks_pair_kernel(const __grid_constant__ BwdParams p) {
#if FLASHKIT_BWD_SM90_KS_PAIR_BODY
  using T = typename Tr::T;
  constexpr int kBlockM = Tr::kBlockM;
  constexpr int kBlockN = Tr::kBlockN;
  constexpr int kD = Tr::kHeadDim;            // data columns (D 192: the tiles have 256)
  constexpr int kDP = Tr::kHeadDimPadded;
  constexpr int kThreads = Tr::kThreads;
  using QTile = typename Tr::QTile;
  using KTile = typename Tr::KTile;
  using KTileIO = typename Tr::KTileIO;
  using KHalfTile = typename Tr::KHalfTile;
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
  T* sKp = reinterpret_cast<T*>(smem + Tr::kSmemKp);
  float* sLse = reinterpret_cast<float*>(smem + Tr::kSmemLse);
  float* sDelta = reinterpret_cast<float*>(smem + Tr::kSmemDelta);
  constexpr int kQElems = QTile::kBytes / int(sizeof(T));

  const int tid = threadIdx.x;
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);  // warp-uniform
  const int wtid = tid % 128;
  const int warp = wtid / 32;
  const int lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const uint32_t rank = prims::cluster_ctarank(), peer = rank ^ 1u;

  // This CTA's key block and its partner's; the pair walks the union of their row blocks.
  attn::BwdCta cta = attn::make_bwd_cta<kBlockM, kBlockN>(p);
  // (kDet with a right bound: make_bwd_cta numbers the key blocks from the grid's end; the grid
  // has an even size, so the pairs stay {2c, 2c + 1})
  const attn::BwdCta par = attn::make_bwd_cta_at<kBlockM, kBlockN>(p, kDet ? cta.n_block ^ 1 : int(blockIdx.x ^ 1u));
  const bool own_keys = cta.n0 < cta.seqlen_k, par_keys = par.n0 < par.seqlen_k;
  if (!own_keys && !par_keys) return;  // (both CTAs of the pair: no cluster operation yet)
  {
    int lo = own_keys ? cta.m_begin : par.m_begin;
    int hi = own_keys ? cta.m_begin + cta.per_head : par.m_begin + par.per_head;
    if (own_keys && par_keys) {
      lo = min(lo, par.m_begin);
      hi = max(hi, par.m_begin + par.per_head);
    }
    cta.m_begin = lo;
    cta.per_head = max(0, hi - lo);
    cta.iters = cta.per_head * p.h_ratio;
  }

  const uint32_t bar0 = prims::smem_addr(smem + Tr::kSmemBar);
  auto q_full = [&](int st) { return bar0 + 8 * st; };
  const uint32_t do_full = bar0 + 16, in_full = bar0 + 24, out_free = bar0 + 32;
  if (tid == 0) {
    prims::mbarrier_init(q_full(0), 2 * kBlockM + 1);  // warpgroup 0's lse/delta copies + the TMA bytes
    prims::mbarrier_init(q_full(1), 2 * kBlockM + 1);
    prims::mbarrier_init(do_full, 2);                  // one per warpgroup (its half of dO)
    prims::mbarrier_init(in_full, 1);                  // thread 0 arms it, the partner's copy fills it
    prims::mbarrier_init(out_free, 2);                 // the partner's warpgroups, done with our dS
    prims::fence_mbarrier_init_cluster();
    prims::tma_prefetch_desc(&p.q_tmap);
    prims::tma_prefetch_desc(&p.do_tmap);
  }
  prims::cluster_sync();  // both CTAs' barriers initialized before any remote use
  const uint32_t peer_rds = prims::mapa_shared(prims::smem_addr(smem + Tr::kSmemRds), peer);
  const uint32_t peer_in_full = prims::mapa_shared(in_full, peer);
  const uint32_t peer_out_free = prims::mapa_shared(out_free, peer);

  // K, V of this key block (zero-filled past the sequence; none for a CTA without keys), and the
  // partner's K rows, our column half.
  const int64_t k_off = cta.k_side_offset(p.k_row_stride, p.k_batch_stride);
  const int64_t v_off = cta.k_side_offset(p.v_row_stride, p.v_batch_stride);
  const T* k_head = static_cast<const T*>(p.k) + k_off + cta.head_kv * p.k_head_stride;
  tiles::load_tile_async<KTileIO, kThreads>(sK, k_head + int64_t(cta.n0) * p.k_row_stride, p.k_row_stride,
                                            cta.keys_here, tid);
  tiles::load_tile_async<KTileIO, kThreads>(
      sV, static_cast<const T*>(p.v) + v_off + cta.head_kv * p.v_head_stride + int64_t(cta.n0) * p.v_row_stride,
      p.v_row_stride, cta.keys_here, tid);
  if (kD == kDP || rank == 0) {
    tiles::load_tile_async<KHalfTile, kThreads>(sKp, k_head + int64_t(par.n0) * p.k_row_stride + rank * (kDP / 2),
                                                p.k_row_stride, par.keys_here, tid);
  } else {  // (D 192, rank 1: the data columns 128 .. 191 of the half)
    tiles::load_tile_async<typename Tr::KHalfTileIO1, kThreads>(sKp, k_head + int64_t(par.n0) * p.k_row_stride + kDP / 2,
                                                                p.k_row_stride, par.keys_here, tid);
  }

  // Q, lse, delta of walk step `it` into Q stage `stage` (warpgroup 0: thread 0 the TMA, its 128
  // threads lse / delta raw, fixed up where read); dO half `half` of step `it` (its warpgroup's
  // thread 0). Rows past the sequence come zero-filled from the maps (no varlen here).
  auto load_q = [&](int it, int stage) {
    const int head = cta.head_of(p, it);
    const int m0 = cta.m_block_of(p, it) * kBlockM;
    const int rows = min(kBlockM, cta.seqlen_q - m0);
    prims::mbarrier_arrive_expect_tx_if(tid == 0, q_full(stage), Tr::kDataAtoms * QTile::kBlockBytes);
    const uint32_t q_dst = prims::smem_addr(sQ + stage * kQElems);
#pragma unroll
    for (int a = 0; a < kD / 64; ++a) {
      prims::tma_load_4d_nohint_if(tid == 0, q_dst + a * QTile::kBlockBytes, &p.q_tmap, a * 64, m0, head, cta.batch,
                                   q_full(stage));
    }
    const bool is_lse = tid < kBlockM;
    const int r = tid % kBlockM;
    prims::cp_async_4((is_lse ? sLse : sDelta) + stage * kBlockM + r,
                      (is_lse ? p.lse : p.delta) + cta.stat_offset(p, head, m0) + r, r < rows);
    prims::cp_async_mbarrier_arrive(q_full(stage));
  };
  auto load_do_half = [&](int it) {  // this warpgroup's thread 0
    const int head = cta.head_of(p, it);
    const int m0 = cta.m_block_of(p, it) * kBlockM;
    // (D 192: warpgroup 1's half has one data atom; the other feeds padding columns only)
    const int a_end = kD == kDP ? 2 * wg + 2 : min(2 * wg + 2, kD / 64);
    prims::mbarrier_arrive_expect_tx(do_full, kD == kDP ? 2 * QTile::kBlockBytes : (a_end - 2 * wg) * QTile::kBlockBytes);
    const uint32_t do_dst = prims::smem_addr(sdO);
#pragma unroll
    for (int a = 2 * wg; a < a_end; ++a) {
      prims::tma_load_4d_nohint_if(true, do_dst + a * QTile::kBlockBytes, &p.do_tmap, a * 64, m0, head, cta.batch,
                                   do_full);
    }
  };
  if (cta.iters > 0) {
    if (wg == 0) load_q(0, 0);
    if (wtid == 0) load_do_half(0);
  }
  prims::cp_async_commit();
  prims::cp_async_wait<0>();  // K, V, K_partner (this thread's copies; the lse/delta ones arrive on q_full)
  prims::fence_proxy_async_smem();
  __syncthreads();

  float dk[16][4], dv[16][4];
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[j][e] = dv[j][e] = 0.f;

  const uint32_t k_addr = prims::smem_addr(sK), v_addr = prims::smem_addr(sV);
  const uint32_t q_addr = prims::smem_addr(sQ), do_addr = prims::smem_addr(sdO);
  const uint32_t p_addr = prims::smem_addr(sP), ds_addr = prims::smem_addr(sdS);
  const uint32_t rds_addr = prims::smem_addr(smem + Tr::kSmemRds), kp_addr = prims::smem_addr(sKp);
  const int key0 = wg * Tr::kWgKeys;
  const uint64_t desc_kw = prims::smem_desc_sw128(k_addr + key0 * 128, 16, 1024);
  const uint64_t desc_vw = prims::smem_desc_sw128(v_addr + key0 * 128, 16, 1024);
  const uint64_t desc_pt = prims::smem_desc_sw128(p_addr, PTile::kBlockBytes, 1024);
  const uint64_t desc_dst = prims::smem_desc_sw128(ds_addr, PTile::kBlockBytes, 1024);
  const uint64_t desc_ds = prims::smem_desc_sw128(ds_addr, 16, 1024);
  const uint64_t desc_rds = prims::smem_desc_sw128(rds_addr, 16, 1024);
  const uint64_t desc_k_mn = prims::smem_desc_sw128(k_addr, KTile::kBlockBytes, 1024);
  const uint64_t desc_kp_mn = prims::smem_desc_sw128(kp_addr, KHalfTile::kBlockBytes, 1024);
  const int dq_chunk = 2 * int(rank) + wg;  // this warpgroup's 64-column chunk of dQ (of D's four)
  const uint64_t desc_do_mn = prims::smem_desc_sw128(do_addr, QTile::kBlockBytes, 1024);
  const int col_chunk0 = wg * (Tr::kWgCols / 64);  // this warpgroup's first 64-column chunk of dV/dK

  const float scale_log2 = p.softmax_scale_log2;
  const int row0 = warp * 16 + g;
  const int warp_all = tid / 32;

  int32_t* pend_sem = nullptr;  // kDet: the turn taken last step, released at this step's mid-step barrier
  for (int it = 0; it < cta.iters; ++it) {
    const int stage = it & 1;
    const int head = cta.head_of(p, it);
    const int m_block = cta.m_block_of(p, it);
    const int m0 = m_block * kBlockM;
    prims::mbarrier_wait(q_full(stage), (it >> 1) & 1);
    prims::mbarrier_wait(do_full, it & 1);
    __syncthreads();  // both warpgroups past step it - 1: the other Q stage, sP free
    if (wg == 0 && it + 1 < cta.iters) load_q(it + 1, stage ^ 1);
    if (tid == 0) prims::mbarrier_arrive_expect_tx(in_full, PTile::kBytes);  // the partner's dS of step it

    const uint32_t q_st = q_addr + stage * QTile::kBytes;
    const uint64_t desc_q = prims::smem_desc_sw128(q_st, 16, 1024);
    const uint64_t desc_do = prims::smem_desc_sw128(do_addr, 16, 1024);

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
    float lse0 = lse_s[row0], lse1 = lse_s[row0 + 8];
    const float dl0 = delta_s[row0], dl1 = delta_s[row0 + 8];
    int fx[2] = {0, 0};  // kFixed: this thread's dQ rows' exponents (used at this step's staging)
    if constexpr (kFixed) {
      static_assert(!kDet, "fixed-point dQ needs no turns");
      cta.dq_row_exps(p, head, m0, row0, fx);
    }
    lse0 = m0 + row0 >= cta.seqlen_q || lse0 == -INFINITY ? INFINITY : lse0 * attn::kLog2e;
    lse1 = m0 + row0 + 8 >= cta.seqlen_q || lse1 == -INFINITY ? INFINITY : lse1 * attn::kLog2e;
    prims::wgmma_wait<1>();
    prims::fence_operands(s);

    // (also true on the row blocks of the partner's range this key block cannot see: above its
    // diagonal the right bound, below a left window the left one)
    const bool masked = cta.mask.tile_needs_mask(cta.n0, kBlockN, m0) ||
                        cta.mask.tile_needs_left_mask(cta.n0, m0 + kBlockM - 1);
    uint32_t tanh_h[4][2];
    ks_probs<kSoftcap>(s, tanh_h, p, scale_log2, lse0, lse1, masked, cta.mask, m0 + row0, cta.n0 + key0 + 2 * t);
    prims::wgmma_wait<0>();
    prims::fence_operands(dp);
    ks_dscores<kSoftcap>(dp, s, tanh_h, dl0, dl1);
    // Our dS of step it - 1 may still be read by the partner (its dQ) and by our bulk copy:
    // wait for the partner's two warpgroups to have finished their dQ of it - 1.
    if (it > 0) {
      if constexpr (FLASHKIT_BWD_PAIR_CTA_SCOPE >= 2) {
        prims::mbarrier_wait(out_free, (it - 1) & 1);
      } else {
        prims::mbarrier_wait_cluster(out_free, (it - 1) & 1);
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int key = key0 + j * 8 + 2 * t;
      *reinterpret_cast<uint32_t*>(sP + PTile::offset(row0, key)) = prims::pack2<T>(s[j][0], s[j][1]);
      *reinterpret_cast<uint32_t*>(sP + PTile::offset(row0 + 8, key)) = prims::pack2<T>(s[j][2], s[j][3]);
      *reinterpret_cast<uint32_t*>(sdS + PTile::offset(row0, key)) = prims::pack2<T>(dp[j][0], dp[j][1]);
      *reinterpret_cast<uint32_t*>(sdS + PTile::offset(row0 + 8, key)) = prims::pack2<T>(dp[j][2], dp[j][3]);
    }
    const bool releases = kDet && pend_sem != nullptr;
    if (releases && lane == 0) {
      prims::bulk_wait_group<0>();        // this warp's adds of the last row block performed
      prims::fence_proxy_async_global();  // and ordered before its generic accesses
    }
    prims::fence_proxy_async_smem();
    __syncthreads();  // P and dS of both warpgroups visible to the async proxy (wgmmas, the copy)
    if (tid == 0) prims::bulk_copy_to_cluster(peer_rds, ds_addr, PTile::kBytes, peer_in_full);
    if (releases) {
      if (tid == 0) {
        __threadfence();
        prims::red_add_release_gpu(pend_sem, 1);
      }
      pend_sem = nullptr;
    }

    // dV (group 0), dQ over both key blocks (group 1), dK (group 2).
    float dq[8][4];
    prims::wgmma_fence();
    prims::fence_operands(dv);
    prims::fence_operands(dk);
    const uint64_t desc_q_mn = prims::smem_desc_sw128(q_st, QTile::kBlockBytes, 1024);
#pragma unroll
    for (int ms = 0; ms < Tr::kMSteps; ++ms) {
      const uint64_t a_off = (ms * 16 * 128) >> 4;
      const uint64_t b_off = (col_chunk0 * QTile::kBlockBytes + ms * 16 * 128) >> 4;
      prims::wgmma_m64n128k16_ss_tb<T, 1>(dv, desc_pt + a_off, desc_do_mn + b_off);
    }
    prims::wgmma_commit();
    {
      const uint64_t b0 = (dq_chunk * KTile::kBlockBytes) >> 4;
      prims::wgmma_m64n64k16_ss_first<T, false, true>(dq, desc_ds, desc_k_mn + b0);
#pragma unroll
      for (int ks = 1; ks < Tr::kNSteps; ++ks) {
        const uint64_t a_off = (ks * 32) >> 4;
        const uint64_t b_off = (dq_chunk * KTile::kBlockBytes + ks * 16 * 128) >> 4;
        prims::wgmma_m64n64k16_ss_tnspb<T>(dq, desc_ds + a_off, desc_k_mn + b_off);
      }
      if constexpr (FLASHKIT_BWD_PAIR_CTA_SCOPE != 0) {  // the partner's dS of step it landed
        prims::mbarrier_wait(in_full, it & 1);
      } else {
        prims::mbarrier_wait_cluster(in_full, it & 1);
      }
      prims::wgmma_fence();                            // (the accumulator chain resumes after a wait)
#pragma unroll
      for (int ks = 0; ks < Tr::kNSteps; ++ks) {
        const uint64_t a_off = (ks * 32) >> 4;
        const uint64_t b_off = (wg * KHalfTile::kBlockBytes + ks * 16 * 128) >> 4;
        prims::wgmma_m64n64k16_ss_tnspb<T>(dq, desc_rds + a_off, desc_kp_mn + b_off);
      }
      prims::wgmma_commit();
    }
#pragma unroll
    for (int ms = 0; ms < Tr::kMSteps; ++ms) {
      const uint64_t a_off = (ms * 16 * 128) >> 4;
      const uint64_t b_off = (col_chunk0 * QTile::kBlockBytes + ms * 16 * 128) >> 4;
      prims::wgmma_m64n128k16_ss_tb<T, 1>(dk, desc_dst + a_off, desc_q_mn + b_off);
    }
    prims::wgmma_commit();

    // dV done: this warpgroup's columns of dO are free (dP of both warpgroups finished before the
    // mid-step barrier): load its half of the next row block's dO.
    prims::wgmma_wait<2>();
    prims::fence_operands(dv);
    if (wtid == 0 && it + 1 < cta.iters) load_do_half(it + 1);

    // dQ done: the partner's dS is read; stage and add our columns.
    prims::wgmma_wait<1>();
    prims::fence_operands(dq);
    if constexpr (FLASHKIT_BWD_PAIR_CTA_SCOPE != 0) {
      if (wtid == 0) prims::mbarrier_arrive_remote(peer_out_free);
    } else {
      if (wtid == 0) prims::mbarrier_arrive_cluster(peer_out_free);
    }
    int32_t* sem = nullptr;
    if constexpr (kDet) {  // this pair's turn for the row block's dq: `turn` releases done
      const int turn = cta.dq_turn_pair<kBlockM, kBlockN>(m0);
      sem = cta.dq_counter(p, head, m_block);
      if (tid == 0) {
        while (prims::ld_acquire_gpu(sem) < turn) {
        }
      }
      __syncthreads();
    }
    {
      unsigned char* box_ptr = smem + Tr::kSmemDqStage + warp_all * Tr::kDqBoxBytes;
      const uint32_t box = prims::smem_addr(box_ptr);
      const int row_g = m0 + warp * 16;
      // (the conflict-free order of kernel_ks.cuh: the lanes of odd g take column group jj ^ 2)
      const bool odd = (g & 1) != 0;
      const int gx = odd ? g ^ 4 : g;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (lane == 0) prims::bulk_wait_group_read<0>();  // the previous box has been read
        __syncwarp();
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            float2 v = make_float2(odd ? dq[4 * h + (jj ^ 2)][2 * half] : dq[4 * h + jj][2 * half],
                                   odd ? dq[4 * h + (jj ^ 2)][2 * half + 1] : dq[4 * h + jj][2 * half + 1]);
            if constexpr (kFixed) v = prims::to_fixed2(v, fx[half]);
            *reinterpret_cast<float2*>(box_ptr + (g + 8 * half) * 128 + (((2 * jj + t / 2) ^ gx) * 16) + (t % 2) * 8) = v;
          }
        }
        prims::fence_proxy_async_smem();
        __syncwarp();
        if (lane == 0) {
          // (D 192: rank 1's warpgroup 1 holds the padding chunk, columns 192 .. 255)
          if (kD == kDP || dq_chunk * 64 < kD) {
            prims::tma_reduce_add_4d(&p.dq_tmap, box, dq_chunk * 64 + 32 * h, head, row_g, cta.batch);
          }
          prims::bulk_commit_group();
        }
      }
    }
    prims::wgmma_wait<0>();  // dK done: this stage's Q, sP and sdS are free (sdS also needs out_free)
    prims::fence_operands(dk);
    if constexpr (kDet) pend_sem = sem;
  }
  if constexpr (kDet) release_last_dq_turn(pend_sem, lane, tid);  // the last row block's turn
  if (lane == 0) prims::bulk_wait_group<0>();  // the reduce-adds done before exit

  // Epilogue: dK *= softmax_scale; stage dK, dV through the K and V tiles (the partner never
  // reads them) for 16-byte stores.
  __syncthreads();
  if (own_keys) {
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
  }
  // The partner's last remote arrival on our out_free and its last copy into our rdS (waited for)
  // land before either CTA leaves.
  prims::cluster_sync();
#endif  // FLASHKIT_BWD_SM90_KS_PAIR_BODY
}

}  // namespace flashkit::bwd_sm90
