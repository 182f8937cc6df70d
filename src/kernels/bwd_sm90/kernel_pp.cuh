// Hopper (sm_90a) attention backward, ping-pong variant for D 64, 96 and 128 (roles and shared
// memory: pp_traits.cuh; D 96 on D 128's tiles). The same math as kernel.cuh (v1); what
// changes is the schedule.
//
// v1 runs both warpgroups in lockstep with two CTA barriers per row block, so the tensor
// pipe idles through every softmax, wait and barrier (ncu at D128: tensor pipe 36% busy,
// 0.35 eligible warps per scheduler). Here each warpgroup owns its 64 keys end to end and
// the two take turns at the tensor pipe (FlashAttention-3's ping-pong, as the forward's
// mainloop_pingpong does). Per row block j, warpgroup w:
//
//   wait full[j % 3]                              Q, dO, lse, delta of j landed (mbarrier)
//   gate A (named barrier 1 + w):  S^T = K_w Q^T, dP^T = V_w dO^T        (SS wgmmas)
//   P^T, dS^T in registers; dS^T -> this warpgroup's tile; WG barrier (3 + w)
//   gate B:  dV_w += P^T dO, dK_w += dS^T Q (RS), dQ_w chunk 0 = dS_w K_w (SS, both MN-major)
//   wait dV/dK -> arrive empty[j % 3]; copy row block j + 2 into stage (j + 2) % 3 (its
//   last reader was row block j - 1); further dQ chunks one at a time
//   per 64-column dQ chunk: warpgroup 0 parks its partial in shared memory (x_full);
//   warpgroup 1 adds it to its own and does the fp32 reds into dq_accum (x_empty), so each
//   element gets one add per CTA, in a fixed order (deterministic mode: warpgroup 1 takes
//   and releases the row block's turn).
//
// While one warpgroup runs its softmax and reds, the other's wgmmas keep the tensor pipe
// busy. No CTA-wide barrier inside the loop.
//
// D 64 runs 128-row blocks (Tr::kRowSplit, pp_traits.cuh): the same schedule with S^T / dP^T
// as m64n128, two Q / dO stages, and dQ split by rows (warpgroup w sends rows 64w ..).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/attention_common/block_info.cuh"
#include "kernels/attention_common/bwd_cta.cuh"
#include "kernels/attention_common/bwd_kv_tiles.cuh"
#include "kernels/attention_common/mask.cuh"
#include "kernels/bwd_params.h"
#include "kernels/device_errors.cuh"
#include "kernels/bwd_sm90/kernel.cuh"
#include "kernels/bwd_sm90/pp_traits.cuh"
#include "prims/atomic.cuh"
#include "prims/cluster.cuh"
#include "prims/cp_async.cuh"
#include "prims/fastdiv.h"
#include "prims/globaltimer.cuh"
#include "prims/mbarrier.cuh"
#include "prims/numeric.cuh"
#include "prims/opaque.cuh"
#include "prims/tma.cuh"
#include "prims/wgmma.cuh"
#include "tiles/tile_copy.cuh"

// Wide wgmmas in the dK/dV step (tuning switch, bwd.md): 1 = one m64n128 per k-step at D 128.
#ifndef FLASHKIT_BWD_WIDE_WGMMA
#define FLASHKIT_BWD_WIDE_WGMMA 1
#endif
// D 64 with kDqTma: 1 = warpgroup 1 computes the row block's whole dQ (64 columns, both
// warpgroups' keys) and sends it; warpgroup 0 computes none (kDqOne below). 0 = the hand-off
// (warpgroup 0 parks its partial, warpgroup 1 adds it in place and sends the sum).
#ifndef FLASHKIT_BWD_D64_DQ_ONE
#define FLASHKIT_BWD_D64_DQ_ONE 1
#endif
// Deterministic-mode trace (diagnostic builds only, scripts/dev/bwd_det_variants.sh; off, every
// kernel compiles to the same SASS): the issuing lanes sum the %globaltimer time spent getting
// their turns (poll + wait) and releasing them; at exit every CTA adds its sums and its lifetime
// to a per-instantiation record, and the last CTA of the grid prints the totals and resets it
// (only for grids whose CTAs all reach the end: no empty varlen key blocks).
#ifndef FLASHKIT_BWD_DET_TRACE
#define FLASHKIT_BWD_DET_TRACE 0
#endif
// A/B switch (bwd.md, "Deterministic mode on the TMA kernel"): 1 puts back the fence.sc that the
// first version had in front of each turn's release, to measure it apart from the release's position.
#ifndef FLASHKIT_BWD_DET_FENCE_SC
#define FLASHKIT_BWD_DET_FENCE_SC 0
#endif
// The P = exp2(S - lse) loop unswitched on the tile's `masked` flag (one loop without the
// per-element mask test, one with it). With the test inside, every element ended its basic block
// at a uniform branch, so a thread's 64 exp2 chains ran one after the other (ncu of the 128-row
// D 64 kernel; the S^T-to-dP^T phase took ~3000 cycles a step). Measured (H100, 2026-11-27, one
// round, FA3 sweep bf16; bwd.md "The P loop unswitched"): fast +13.5% (D 64 +9..27%, D 128
// +3..9%), deterministic +17.4%. 0 = the loop with the test inside (the SASS before, md5, except
// D 64's 128-row kernels and D 128's softcap kernel: same instructions, scheduled otherwise).
// Softcap kernels: always inside.
#ifndef FLASHKIT_BWD_EXP_UNSWITCH
#define FLASHKIT_BWD_EXP_UNSWITCH 1
#endif
// 1 = the walk's divisions by per_head (head_at / m_block_at, the rotated turns) as multiply-highs
// with a FastDiv made once per CTA (bwd.md, "The P loop unswitched", smaller leads). Measured
// (H100, 2026-11-27, define A/B, two rounds, FA3 sweep bf16 D 64 / 128): deterministic +1.0%
// (D 128 +0.2..2.7%, every row up; D 64 -2.6..+3.0%), fast -0.5% (-2.8..+2.5%: MHA's fast walk
// takes no division; noise). 0 = the divisions.
#ifndef FLASHKIT_BWD_PP_FASTDIV
#define FLASHKIT_BWD_PP_FASTDIV 1
#endif
// 1 = the default build (two MMA warpgroups, no producer) stores dS^T as the producer build does: 4
// stmatrix.x4 a step from one opaque lane address (step_addr) instead of 16 4-byte stores (bwd.md, "The
// stmatrix dS^T store in the default build"; the lane indices stay the held registers). 0 = the 4-byte stores
// (SASS identical to the build before the switch). Every ping-pong kernel (D 64 / 96 / 128); default 1 since 2026-11-29
// (H200: D 64 +2..5 % fast, +1..3 % fixed point; D 128 0..+1.6 %; no row below the spread).
#ifndef FLASHKIT_BWD_PP_STSM_DS
#define FLASHKIT_BWD_PP_STSM_DS 1
#endif
// Three switches for fewer instructions in D 64's 128-row step (kRowSplit; bwd.md, "D 64's step loop: fewer
// instructions"); each 0 = the SASS of the build before it; LSE2 reaches only the 128-row kernels, MASK_THR those
// and D 96 / 128's 64-row ones (bwd.md, "MASK_THR in D 96 / 128's 64-row kernels"), DP_DELTA every ping-pong kernel
// without a softcap (D 64 / 96 / 128); default 0 until measured.
// 1 = the P loops read lse already as the exp2 offset, lse * log2(e) (+inf for lse = -inf): warpgroup 0 rewrites a
// stage's 128 values in place once per row block (one thread a row, after the stage's full wait: row block it + 1
// in step it while its dQ product runs; the gate A barriers order the stores before both warpgroups' P loops), so
// that neither P loop multiplies its 32 values a step, nor (masked copy) tests them for -inf. 0 = the multiply (and
// test) at each use.
#ifndef FLASHKIT_BWD_PP_LSE2
#define FLASHKIT_BWD_PP_LSE2 0
#endif
// 1 = the masked tiles' P loop (causal diagonal, window edges, the key block across seqlen_k) tests each element
// against per-key bounds on the tile's columns, made once a step from Mask's fields: key k is visible to row
// m0 + 2t + c iff lo(k) <= c <= hi(k), c = 8 j + e % 2 a constant of the unrolled loop, so that an element costs two
// compares and a select (ptxas shares some compares), no branch: the masked copy ~980 -> ~430 instructions (D 96 /
// 128's 64-row kernels, c = 8 j + e % 2 < 64: ~495 -> ~220; not D 64's 64-row kernels, whose SASS at 1 stays that of
// the 128-row-only build). 0 = Mask::visible per element (its sums, compares and a branch). The same macro switches
// D 192 / 256's key-split and pair kernels (ks_fragments.cuh's ks_probs; bwd.md, "MASK_THR in D 256's key-split
// kernels").
#ifndef FLASHKIT_BWD_PP_MASK_THR
#define FLASHKIT_BWD_PP_MASK_THR 0
#endif
// 1 = dP^T's accumulator starts at delta (each thread its values, read after the stage's full wait, before gate A)
// and the dP^T wgmmas run with A = V negated (imm-scale-a -1), so that it lands as delta - dP and dS = -(P * that):
// the dS loop (between dP^T and the dS^T store, the phase that decides when gate B opens) loses its delta LDS.64 and
// FADDs (128 rows: 16 + 64, for 16 LDS.64 + 32 MOV in front of gate A; D 128: dS phase 154 -> 110). Not the same bits
// as 0 (delta enters the tensor core's sum instead of one FADD after it), so every kernel that can run the same call
// has it (dK must match bitwise between the TMA and cp.async kernels; the D 128 cp.async one spills 80 / 100 bytes
// with it); not the softcap kernels. 0 = the FADD.
#ifndef FLASHKIT_BWD_PP_DP_DELTA
#define FLASHKIT_BWD_PP_DP_DELTA 0
#endif
namespace flashkit::bwd_sm90 {

#if FLASHKIT_BWD_PP_TRACE
// [traced CTA][warpgroup][step][field] (uint32 clock64 values; pp_traits.cuh's sizes, which are
// the same for every instantiation).
static __device__ uint32_t g_pp_trace[2][2 * 32 * 10];
#endif

#if FLASHKIT_BWD_DET_TRACE
struct DetTrace {
  unsigned long long wait_ns, release_ns, sends, cta_ns, t_first, t_last, done;
};
static __device__ DetTrace g_det_trace = {0, 0, 0, 0, ~0ull, 0, 0};
#endif

// A/B switch (prepared 2026-11-27, sixteenth session; measured and on since the seventeenth): 1 = rows
// past the sequence get lse = +inf (P = exp2(s - inf) = 0 without a test), so that the P loop's
// unmasked copy reads lse * log2(e) without the -inf -> +inf select: a row whose forward lse is -inf
// sees no key, so it never lies in a tile without a mask (where every row sees every key). 3
// instructions per lse value, 96 per thread and 128-row step. Predicted +1..2%; measured (H100,
// 2026-11-27, define A/B, two rounds, FA3 sweep D 64 / 128): fast +1.2% (22 of 24 rows up),
// deterministic +0.3% (level). 0 = lse = -inf for those rows and the select in both copies.
#ifndef FLASHKIT_BWD_LSE_FILL_INF
#define FLASHKIT_BWD_LSE_FILL_INF 1
#endif

// What the kTma variant copies for the lse / delta of rows past the sequence: lse = -inf
// (read as "no visible key": P = 0; FLASHKIT_BWD_LSE_FILL_INF: +inf) and delta = 0.
#if FLASHKIT_BWD_LSE_FILL_INF
static __device__ const float kStatFill[2] = {INFINITY, 0.f};
#else
static __device__ const float kStatFill[2] = {-INFINITY, 0.f};
#endif

// kDqTma without kDqSplit (D 64 with FLASHKIT_BWD_D64_DQ_ONE=0; the launcher sets p.dq_tmap): warpgroup 0 parks its partial
// dQ chunk in the accumulator map's box layout (fp32, 32-column boxes, 128-byte swizzle),
// warpgroup 1 adds its own in place (each thread the elements it holds) and lane 0 of each
// of its warps sends the warp's 16 rows to dq_accum with TMA reduce-adds: no per-thread
// reds, no row tests (the map clips rows past the tensor; rows past a varlen sequence hold
// exact zeros: their Q, dO are zero-filled and P = 0). The buffer goes back to warpgroup 0
// (x_empty, one arrival per warp) once the adds have read it, which each lane 0 waits for
// only after its softmax of the next row block (no stall right after the issue).
//
// kDqSplit (kDqTma at D 128): FlashAttention-3's split of dQ by columns instead of the
// hand-off. Warpgroup w computes dQ[:, 64w .. 64w + 63] over all 128 keys from both
// warpgroups' dS^T tiles, for row block j - 1 at its gate B of j (warpgroup 1's tile of j is
// not written yet when warpgroup 0 passes gate B of j), stages it in its own buffer and sends
// it with TMA reduce-adds: one fp32 store per element instead of three shared-memory passes
// (park, read + add, store back). dS^T tiles are double-buffered (j and j - 1); a tile is
// rewritten at j + 2 after both warpgroups' dQ(j) products are done (ds_empty). At j = 0 the
// product runs on the unused buffer and its result is dropped (a branch among the gate's
// wgmmas costs registers); after the loop both warpgroups meet at a named barrier and compute
// the last row block's dQ.
//
// kDet (with kDqTma; the deterministic mode's instantiation, so the fast kernel's code is
// untouched): each issuing lane waits for the row block's turn before its adds (8 warps per
// turn at D 128, warpgroup 1's 4 at D 64) and releases it after its softmax of the next row
// block, once the adds have been performed (they had the next step's gate A to complete), with
// red.release and no fence.sc. A row block's previous visitor is about two steps ahead (64-row
// blocks, 128-key blocks: the rotated walk without a mask, p.dq_rotate; the descending order
// with one). The first version released at the next send, after a fence.sc: 7-14% slower
// (bwd.md: the two changes were measured together).
// kFixed (with kDqTma and the column / row split of dQ, not kDet; the deterministic mode's
// default instantiation since 2026-11-28, p.dq_fixed): the fast kernel's schedule with the staged
// dQ converted to int32 fixed point, round(dQ_ir * 2^k_r) with row r's exponent k_r from the pre
// kernel (p.dq_exp, bwd_params.h), and added by integer TMA reduce-adds (p.dq_tmap over int32):
// integer sums have the same bits in any order, so there are no turns to wait for.
template <class Tr, bool kSoftcap = false, bool kTma = false, bool kDqTma = false, bool kDet = false,
          bool kSplit = false, bool kFixed = false>
__global__ void __launch_bounds__(Tr::kThreads, Tr::kMinBlocks) bwd_pp_kernel(const __grid_constant__ BwdParams p) {
#if FLASHKIT_BWD_SM90_KERNEL_BODY
  using T = typename Tr::T;
  constexpr int kBlockM = Tr::kBlockM;
  constexpr int kBlockN = Tr::kBlockN;
  constexpr int kD = Tr::kHeadDim;         // data columns (global memory: Q, dO, K, V, dq_accum)
  constexpr int kDP = Tr::kHeadDimPadded;  // the tiles' columns (D 96: 128)
  constexpr int kThreads = Tr::kThreads;
  constexpr int QS = Tr::kStages;
  constexpr int kChunks = Tr::kDChunks;
  constexpr int kWarpsPerWg = 4;  // deterministic mode: the dq counter advances once per warp
  using QTile = typename Tr::QTile;
  using KTile = typename Tr::KTile;
  using QTileIO = typename Tr::QTileIO;
  using KTileIO = typename Tr::KTileIO;
  using DsTile = typename Tr::DsTile;
  // kDqOne (D 64): the column split's schedule with one writer: warpgroup 1's dQ covers all 64
  // columns (N = 64 is one swizzle atom; a 32-column half of K could not be a 128-byte-swizzled
  // MN-major operand), so warpgroup 0 has no dQ product and no staging at all.
  // kRowSplit (Tr::kBlockM = 128, D 64; pp_traits.cuh): both warpgroups write dQ, each its own
  // 64 rows over all 128 keys (kDqSplit's schedule, the split by rows instead of by columns).
  constexpr bool kRowSplit = Tr::kRowSplit;
  constexpr int kRowTiles = Tr::kRowTiles;  // n8 tiles of S^T / dP^T: 8 at 64 rows, 16 at 128
  constexpr int kRowSteps = kBlockM / 16;   // k16 steps over the rows (A fragments of P^T / dS^T)
  static_assert(!kRowSplit || (kTma && kDqTma && !kSoftcap), "128-row blocks: the TMA reduce-add kernels only");
  constexpr bool kDqOne = kDqTma && kChunks == 1 && FLASHKIT_BWD_D64_DQ_ONE != 0 && !kRowSplit;
  constexpr bool kDqSplit = kDqTma && (kChunks == 2 || kDqOne || kRowSplit);
  constexpr int kDqWriters = kDqOne ? 1 : 2;  // warpgroups that compute and send one row block's dQ (kDqSplit)
  static_assert(!kDet || kDqTma, "the deterministic instantiation is the TMA reduce-add kernel's");
  static_assert(!kFixed || (kDqSplit && !kDet), "fixed-point dQ: the split-dQ TMA kernels, without turns");
  static_assert(!kDqSplit || Tr::kDsBufs == 2, "the column-split dQ needs two dS^T buffers per warpgroup");
  // Tr::kProducer (pp_traits.cuh; FLASHKIT_BWD_PP_PRODUCER builds): warpgroup 0 of the CTA is a producer that
  // issues every row block's loads (load_rows, as the loading warpgroup does otherwise) once its stage is free;
  // the MMA warpgroups are 1 and 2 (wg 0 and 1 below) and never load. The producer leaves after its last
  // loads; the epilogue (dK / dV staged and stored by the MMA warpgroups) syncs on a named barrier (epi_sync).
  constexpr bool kProducer = Tr::kProducer;
  // dS^T by stmatrix.x4 (the dS^T store below): the producer build's, and the default build's under
  // FLASHKIT_BWD_PP_STSM_DS.
  constexpr bool kStsmDs = kProducer || FLASHKIT_BWD_PP_STSM_DS != 0;
  // lse * log2(e) made once per row block in shared memory (FLASHKIT_BWD_PP_LSE2; the 128-row kernels only: in D 96 /
  // 128's 64-row ones it saved 48 of the masked copy's ~220 but cost the path without a mask +5, and the D 128 cp.async
  // fallback 8 more bytes of spills; not kept, bwd.md "MASK_THR in D 96 / 128's 64-row kernels")
  constexpr bool kLse2 = kRowSplit && FLASHKIT_BWD_PP_LSE2 != 0;
  // the masked P loop's per-key column bounds (FLASHKIT_BWD_PP_MASK_THR; the 128-row kernels and D 96 / 128's 64-row
  // ones, the cp.async fallback, GQA-split and turns kernels included; not D 64's 64-row ones, whose SASS at 1 stays
  // the 128-row-only build's)
  constexpr bool kMaskThr = (kRowSplit || kD > 64) && FLASHKIT_BWD_PP_MASK_THR != 0;
  // dP^T accumulated from delta with V negated (FLASHKIT_BWD_PP_DP_DELTA; every kernel without a softcap)
  constexpr bool kDpDelta = FLASHKIT_BWD_PP_DP_DELTA != 0 && !kSoftcap;
  constexpr int kCThreads = Tr::kConsumerThreads;  // the MMA warpgroups' threads (barrier counts)
  static_assert(!kProducer || (kTma && kDqTma && !kSoftcap && !kSplit && !kDet),
                "the producer warpgroup: the TMA reduce-add kernels (fast and fixed point)");

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_addr = prims::smem_addr(smem_raw);
  unsigned char* smem = smem_raw + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  T* sK = reinterpret_cast<T*>(smem + Tr::kSmemK);
  T* sV = reinterpret_cast<T*>(smem + Tr::kSmemV);
  T* sQ = reinterpret_cast<T*>(smem + Tr::kSmemQ);
  T* sdO = reinterpret_cast<T*>(smem + Tr::kSmemDo);
  float* sLse = reinterpret_cast<float*>(smem + Tr::kSmemLse);
  float* sDelta = reinterpret_cast<float*>(smem + Tr::kSmemDelta);
  float4* sX = reinterpret_cast<float4*>(smem + Tr::kSmemX);  // [kChunks][8][128] float4
  const uint32_t bars = prims::smem_addr(smem + Tr::kSmemBars);
  constexpr int kQElems = QTile::kBytes / int(sizeof(T));

  const int tid = threadIdx.x;
  // Warp-uniform (a shuffle from lane 0), so ptxas sees the warpgroup branches as uniform:
  // with tid / 128 it treated them as divergent and serialized every wgmma (C7520).
  const int wg_raw = __shfl_sync(0xffffffffu, tid / 128, 0);
  const int wg = kProducer ? wg_raw - 1 : wg_raw;  // the MMA warpgroup (kProducer: -1 in the producer)
  const int wtid = tid % 128;  // thread within the warpgroup
  const int warp = wtid / 32;  // warp within the warpgroup
  const int lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  // kProducer (240 registers): the lane's indices where the step loop uses them, from a fresh read of %tid.x (an
  // S2R and one or two ALU instructions a use) rather than registers held over the loop: ptxas spilled warp, g
  // and t at setup and reloaded them every step. Otherwise the values above.
  // (The producer's row-block loads likewise read their thread index again, tid_now.)
  auto tid_now = [&]() -> int {
    if constexpr (Tr::kProducer) {
      return prims::tid_x_fresh();
    } else {
      return tid;
    }
  };
  struct LaneIx {
    int lane, warp, g, t;
  };
  auto lane_ix = [&]() -> LaneIx {
    if constexpr (Tr::kProducer) {
      const uint32_t x = uint32_t(tid_now());
      const int l = int(x % 32u);
      return {l, int(x % 128u) / 32, l / 4, l % 4};
    } else {
      return {lane, warp, g, t};
    }
  };
  const bool dq_writer = !kDqOne || wg == 1;  // kDqSplit: this warpgroup computes and sends dQ
  // dS^T tile (buffer b, warpgroup w) at kSmemDs + (2 b + w) * DsTile::kBytes; without kDqSplit
  // only buffer 0 is used.
  auto ds_tile = [&](int b, int w) { return reinterpret_cast<T*>(smem + Tr::kSmemDs + (2 * b + w) * DsTile::kBytes); };
  T* sdS = ds_tile(0, wg);  // this warpgroup's dS^T (kDqSplit: of even row blocks)

  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (QS + s); };
  const uint32_t x_full = bars + 8 * (2 * QS), x_empty = bars + 8 * (2 * QS + 1);
  auto ds_empty = [&](int b) { return bars + 8 * (2 * QS + 2 + b); };  // kDqSplit: both warpgroups' dQ read buffer b

  static_assert(!kSplit || kDqTma, "the GQA split: the TMA reduce-add kernels only");
  const attn::BwdCta cta = attn::make_bwd_cta<kBlockM, kBlockN, kSplit>(p);
  // kSplit: the CTA walks heads h_ratio >> log2 of its group, from head0 (its part `sub`).
  auto split_sub = [&] { return int(blockIdx.x & ((1u << p.gqa_split_log2) - 1u)); };
  auto split_heads = [&] { return p.h_ratio >> p.gqa_split_log2; };
  auto split_head0 = [&] { return cta.head_kv * p.h_ratio + split_sub() * split_heads(); };
  if (cta.n0 >= cta.seqlen_k) return;
#if FLASHKIT_BWD_PP_TRACE
  // Fields per warpgroup and step: 0 step begin, 1 Q/dO landed, 2 gate A open, 3 S^T ready,
  // 4 dP^T ready, 5 dS^T stored (warpgroup barrier passed), 6 gate B open, 7 dV/dK done,
  // 8 the stage released and the next copy issued, 9 step end (dQ sent).
  const bool tr_cta = blockIdx.y == 0 && blockIdx.z == 0 &&
                      (blockIdx.x == gridDim.x / 2 || blockIdx.x == gridDim.x / 2 + 1);
  uint32_t* const tr_buf = g_pp_trace[blockIdx.x == gridDim.x / 2 ? 0 : 1];
  auto tr = [&](int it, int f) {
    const int st = it - Tr::kTraceFirst;
    if (tr_cta && wtid == 0 && st >= 0 && st < Tr::kTraceSteps)
      tr_buf[(wg * Tr::kTraceSteps + st) * Tr::kTraceFields + f] = uint32_t(clock64());
  };
#else
  auto tr = [](int, int) {};
#endif
  // kDet with p.dq_rotate: the rotated walk (BwdCta::m_block_rot); otherwise BwdCta::m_block_of.
  const int rot = kDet && p.dq_rotate ? cta.rot_shift<kBlockN>() : 0;
#if FLASHKIT_BWD_PP_FASTDIV
  // it / per_head as a multiply-high (the FastDiv made once here): without it every call below
  // is a ~25-instruction emulated division (several per step; in kDet also without GQA).
  const prims::FastDiv per_head_div = prims::FastDiv::make_on_device(cta.per_head);
  // (r is computed before the branch: inside it, D 128's fast kernel spilled 13 bytes, 11 loads in
  // its loop; here 0)
  auto m_block_at = [&](int it) {
    const int r = it - per_head_div.div(it) * cta.per_head;
    if constexpr (kDet) {
      const int m = r + rot;
      return cta.m_begin + (m >= cta.per_head ? m - cta.per_head : m);
    } else {
      return cta.m_begin + ((kSplit ? split_heads() == 1 : p.h_ratio == 1) ? it : r);
    }
  };
  auto head_at = [&](int it) {
    if constexpr (kDet) {
      return (kSplit ? split_head0() : cta.head_kv * p.h_ratio) + per_head_div.div(it);
    } else {
      if constexpr (kSplit) {
        return split_heads() == 1 ? split_head0() : split_head0() + per_head_div.div(it);
      } else {
        return p.h_ratio == 1 ? cta.head_kv : cta.head_kv * p.h_ratio + per_head_div.div(it);
      }
    }
  };
#else
  auto m_block_at = [&](int it) {
    if constexpr (kSplit && !kDet) return cta.m_begin + (split_heads() == 1 ? it : it % cta.per_head);
    return kDet ? cta.m_block_rot(it, rot) : cta.m_block_of(p, it);
  };
  // (kDet divides as before: the h_ratio == 1 branch of BwdCta::head_of cost its D 128
  // instantiation 8/12 more bytes of spills)
  auto head_at = [&](int it) {
    if constexpr (kSplit) {
      return kDet || split_heads() > 1 ? split_head0() + it / cta.per_head : split_head0();
    } else {
      return kDet ? cta.head_kv * p.h_ratio + it / cta.per_head : cta.head_of(p, it);
    }
  };
#endif

  if (tid == 0) {
    for (int s = 0; s < QS; ++s) {
      // kTma: the loading warpgroup's 128 arrivals (each after its lse / delta copies) + its
      // thread 0's expect_tx arrival for Q and dO
      prims::mbarrier_init(full(s), kTma ? 128 + 1 : kThreads);
      prims::mbarrier_init(empty(s), kCThreads);
    }
    prims::mbarrier_init(x_full, 128);
    prims::mbarrier_init(x_empty, kDqTma ? 4 : 128);  // kDqTma: each warp's issuing lane, once the adds read
    prims::mbarrier_init(ds_empty(0), kCThreads);
    prims::mbarrier_init(ds_empty(1), kCThreads);
    if (kTma) {
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
      prims::tma_prefetch_desc(&p.q_tmap);
      prims::tma_prefetch_desc(&p.do_tmap);
    }
  }
  __syncthreads();

  // (kProducer: the MMA warpgroups copy K and V, the producer starts the row blocks meanwhile)
  const int ctid = kProducer ? tid - 128 : tid;  // thread among the MMA warpgroups' (the producer's: < 0)
  if (!kProducer || ctid >= 0) attn::load_kv_tiles<KTileIO, kCThreads>(p, cta, sK, sV, ctid);

  // Row block `it` into stage `stage`; each thread's copies arrive on full[stage] when they
  // land. Without TMA every thread copies part of it, lse and delta raw (rows past the end
  // zero-filled: their Q and dO rows are zero too, so they add nothing, and their dQ is
  // never stored). kTma (Tr::kLoaderWg only, see the callers): its thread 0 brings Q and dO with
  // TMA (rows past a dense tensor's end arrive as zeros), except for a varlen row block
  // that runs past its sequence: there the next sequence's rows would come along (an Inf
  // or NaN in them would turn 0 * x into NaN), so that warpgroup copies it with the tail rows
  // zero-filled; lse / delta come by 4-byte copies, for rows past the end from kStatFill;
  // each of the 128 threads arrives once after its copies, thread 0 once more (with the
  // TMA bytes or none): 129 arrivals.
  const int wtid_ = wtid;
  auto load_rows = [&](int it, int stage) {
    const int head = head_at(it);
    const int m0 = m_block_at(it) * kBlockM;
    const int rows = min(kBlockM, cta.seqlen_q - m0);
    if constexpr (kTma) {
      const int wtid = kProducer ? tid_now() % 128 : wtid_;  // (kProducer: read again, at 24 registers)
      const bool tail = cta.varlen && rows < kBlockM;
      if (tail) {
        tiles::load_tile_async<QTileIO, 128>(
            sQ + stage * kQElems,
            static_cast<const T*>(p.q) + cta.q_side_offset(p.q_row_stride, p.q_batch_stride) +
                head * p.q_head_stride + int64_t(m0) * p.q_row_stride,
            p.q_row_stride, rows, wtid);
        tiles::load_tile_async<QTileIO, 128>(
            sdO + stage * kQElems,
            static_cast<const T*>(p.dout) + cta.q_side_offset(p.do_row_stride, p.do_batch_stride) +
                head * p.do_head_stride + int64_t(m0) * p.do_row_stride,
            p.do_row_stride, rows, wtid);
      }
      const bool issuer = wtid == 0 && !tail;
      prims::mbarrier_arrive_expect_tx_if(wtid == 0, full(stage), tail ? 0 : 2 * QTile::kBytes);
      const uint32_t q_dst = prims::smem_addr(sQ + stage * kQElems), do_dst = prims::smem_addr(sdO + stage * kQElems);
      const int row = (cta.varlen ? cta.q_start : 0) + m0, batch = cta.varlen ? 0 : cta.batch;
#pragma unroll
      for (int a = 0; a < kDP / 64; ++a) {  // (D 96: the second box's last 32 columns arrive as zeros)
#pragma unroll
        for (int h = 0; h < kBlockM / 64; ++h) {  // the maps' boxes are 64 rows (kRowSplit: two per block)
          prims::tma_load_4d_nohint_if(issuer, q_dst + a * QTile::kBlockBytes + h * 64 * 128, &p.q_tmap, a * 64,
                                       row + 64 * h, head, batch, full(stage));
          prims::tma_load_4d_nohint_if(issuer, do_dst + a * QTile::kBlockBytes + h * 64 * 128, &p.do_tmap, a * 64,
                                       row + 64 * h, head, batch, full(stage));
        }
      }
      if constexpr (kRowSplit) {  // 128 rows: each thread its row's lse and delta
        const int r = wtid;
        const int64_t stat = cta.stat_offset(p, head, m0) + r;
        prims::cp_async_4(sLse + stage * kBlockM + r, r < rows ? p.lse + stat : &kStatFill[0], true);
        prims::cp_async_4(sDelta + stage * kBlockM + r, r < rows ? p.delta + stat : &kStatFill[1], true);
      } else {
        const int r = wtid % kBlockM;
        const bool is_lse = wtid < kBlockM;
        const float* src = r < rows ? (is_lse ? p.lse : p.delta) + cta.stat_offset(p, head, m0) + r
                                    : &kStatFill[is_lse ? 0 : 1];
        prims::cp_async_4((is_lse ? sLse : sDelta) + stage * kBlockM + r, src, true);
      }
      prims::cp_async_mbarrier_arrive(full(stage));  // (also covers the tail copies above)
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
    if (tid < 2 * kBlockM) {
      const int r = tid % kBlockM;
      const bool in = r < rows;
      const int64_t i = stat + (in ? r : 0);
      if (tid < kBlockM) {
        prims::cp_async_4(sLse + stage * kBlockM + r, p.lse + i, in);
      } else {
        prims::cp_async_4(sDelta + stage * kBlockM + r, p.delta + i, in);
      }
    }
    prims::cp_async_mbarrier_arrive(full(stage));
  };
  static_assert(kRowSplit || 2 * kBlockM == 128, "kTma: the loading warpgroup's 128 threads load lse and delta");
  // kTma: one warpgroup loads the row blocks (pp_traits.cuh; kProducer: the producer, which loads them all)
  const bool loader = kProducer ? wg_raw == 0 : !kTma || wg == Tr::kLoaderWg;
  if (cta.iters > 0 && loader) load_rows(0, 0);  // (without TMA its arrival covers K and V too)
  if (cta.iters > 1 && loader) load_rows(1, 1);
  if constexpr (kTma) {  // K and V: every thread's own copies, then visible to the wgmmas
    prims::cp_async_commit();
    prims::cp_async_wait<0>();
    prims::fence_proxy_async_smem();
    __syncthreads();
  }
  if constexpr (kProducer) {
    if (wg_raw == 0) {
      prims::setmaxnreg_dec<Tr::kProducerRegs>();
      // Row block jn into stage jn % QS once both MMA warpgroups released row block jn - QS there (QS row
      // blocks ahead of the MMAs, where the loading warpgroup issues at gate B of jn - 2).
      for (int jn = 2; jn < cta.iters; ++jn) {
        const int sn = jn % QS;
        if (jn >= QS) prims::mbarrier_wait(empty(sn), ((jn - QS) / QS) & 1);
        load_rows(jn, sn);
      }
      prims::cp_async_wait<0>();  // (its Q / dO TMA loads complete on full[], which the MMA warpgroups wait for)
      return;  // (the MMA warpgroups' epilogue barriers are named ones over their 256 threads: epi_sync)
    }
    prims::setmaxnreg_inc<Tr::kConsumerRegs>();
  }

  float dk[kChunks][8][4], dv[kChunks][8][4];
#pragma unroll
  for (int c = 0; c < kChunks; ++c)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[c][j][e] = dv[c][j][e] = 0.f;

  // Descriptors: as v1, with this warpgroup's own dS^T tile (64 keys x 64 rows).
  const uint32_t k_addr = prims::smem_addr(sK), v_addr = prims::smem_addr(sV);
  const uint32_t q_addr = prims::smem_addr(sQ), do_addr = prims::smem_addr(sdO);
  const int key0 = wg * 64;  // this warpgroup's first key in the block
  const uint64_t desc_kw = prims::smem_desc_sw128(k_addr + key0 * 128, 16, 1024);
  const uint64_t desc_vw = prims::smem_desc_sw128(v_addr + key0 * 128, 16, 1024);
  const uint64_t desc_ds = prims::smem_desc_sw128(prims::smem_addr(sdS), DsTile::kBlockBytes, 1024);
  const uint64_t desc_k_mn = prims::smem_desc_sw128(k_addr, KTile::kBlockBytes, 1024);

  const float scale_log2 = p.softmax_scale_log2;
  const int key_row = warp * 16 + g;  // this thread's first key within the warpgroup's 64
  constexpr bool capped = kSoftcap;
  float s[kRowTiles][4], dp[kRowTiles][4], dq[8][4];

  // Gates: the warpgroups alternate at named barriers 1 (warpgroup 0's turn) and 2.
  const int turn = 1 + wg, other_turn = 2 - wg;
  auto gate_open = [&] {
    prims::fence_proxy_async_smem();
    prims::bar_sync(turn, 2 * 128);
    prims::wgmma_fence();
  };
  auto gate_pass = [&](bool give) {  // let the other warpgroup's next gate open
    if (give) prims::bar_arrive(other_turn, 2 * 128);
  };
  if (wg == 1 && cta.iters > 0) prims::bar_arrive(1, 2 * 128);  // warpgroup 0 goes first

  // kDqSplit: this warpgroup's 64 dQ columns of row block i (in dq) to its staging buffer (two
  // boxes of 64 rows x 32 fp32 columns, 128-byte swizzle: the 16-byte unit u of row r at
  // u ^ (r % 8); the lanes of odd g take column group k ^ 2 in access k, so a half-warp's 8-byte
  // stores meet 8 distinct units), then each warp's lane 0 adds its 16 rows into dq_accum by TMA.
  // kDet: the turn of row block i's adds (8 warps per turn) and its release.
  // det_sent: the counter of the row block this lane sends next or last sent (kept, not
  // recomputed where it is released: the release sits among the softmax's live registers).
  // det_poll reads it (an acquire: the adds issued after it are ordered after it); at D 64
  // while gate B's wgmmas run, so a turn already passed costs no round trip at the send
  // (+3.4%; at D 128 the same lost 1%, its poll stays at the send).
  auto det_counter = [&](int i) { return cta.dq_counter(p, head_at(i), m_block_at(i)); };
  int32_t* det_sent = nullptr;
  int det_need = 0, det_seen = 0;
  // FLASHKIT_BWD_DET_TRACE: this lane's sums (unused, and compiled away, otherwise).
  auto tr_now = [] { return FLASHKIT_BWD_DET_TRACE && kDet ? prims::globaltimer() : uint64_t(0); };
  uint64_t tr_wait = 0, tr_release = 0, tr_sends = 0;
  const uint64_t tr_start = tr_now();
  auto det_poll = [&](int i) {  // lane 0: the turn of row block i (sent next)
    det_sent = det_counter(i);
#if FLASHKIT_BWD_PP_FASTDIV
    const int turn_i = p.dq_rotate ? cta.dq_turn_rot<kBlockN>(m_block_at(i), per_head_div)
                                   : cta.dq_turn<kBlockM, kBlockN>(m_block_at(i) * kBlockM);
#else
    const int turn_i = p.dq_rotate ? cta.dq_turn_rot<kBlockN>(m_block_at(i))
                                   : cta.dq_turn<kBlockM, kBlockN>(m_block_at(i) * kBlockM);
#endif
    det_need = (kDqSplit ? kDqWriters : 1) * kWarpsPerWg * turn_i;
    det_seen = prims::ld_acquire_gpu(det_sent);
  };
  // The rotated walk's CTAs wait on each other in a cycle, so they must all be resident: a
  // lane that has waited kDetGiveUpNs on one turn (the longest wait of a resident group is
  // about a CTA's lifetime, ~2 ms at 16k) takes the group as not resident (another kernel
  // holds SMs, or an SM limit), reports it (kDeviceErrorDetOrder) and stops waiting for the
  // rest of its walk, so the call ends with a correct dq, out of turn, instead of hanging. Its
  // releases go on, so no one else waits for them. The bound is a time, read every 1024 polls:
  // a count was not one (2^20 polls per turn outlasted a 12 s hold of all but 48 SMs).
  constexpr uint64_t kDetGiveUpNs = FLASHKIT_BWD_DET_GIVE_UP_NS;
  bool det_free = false;
  auto det_wait = [&] {  // lane 0: until that turn (every earlier turn's warps released)
    uint32_t polls = 0;
    uint64_t t0 = 0;
    while (det_seen < det_need && !det_free) {
      det_seen = prims::ld_acquire_gpu(det_sent);
      if (p.dq_rotate && (++polls & 1023u) == 0) {
        const uint64_t now = prims::globaltimer();
        if (t0 == 0) {
          t0 = now;
        } else if (now - t0 > kDetGiveUpNs) {
          report_device_error(p.error_flag, kDeviceErrorDetOrder);
          det_free = true;
        }
      }
    }
  };
  auto det_turn = [&](int i, bool poll) {  // lane 0, before sending row block i (polled already unless poll)
    const uint64_t tr0 = tr_now();
    if (poll) det_poll(i);
    det_wait();
    tr_wait += tr_now() - tr0;
    ++tr_sends;
  };
  // lane 0: this warp's 16 rows of the staged dQ (two 32-column boxes from src) added into
  // dq_accum's columns col0 .. col0 + 63 of (head_i, row block at m0_i).
  auto send_rows = [&](uint32_t src, int col0, int head_i, int m0_i) {
    const int row = int(cta.varlen ? cta.q_start + m0_i : m0_i) + lane_ix().warp * 16, batch = cta.varlen ? 0 : cta.batch;
    prims::tma_reduce_add_4d(&p.dq_tmap, src, col0, head_i, row, batch);
    // (D 96: warpgroup 1's second box holds padding columns only)
    if (kD == kDP || col0 + 32 < kD) prims::tma_reduce_add_4d(&p.dq_tmap, src + 64 * 128, col0 + 32, head_i, row, batch);
    prims::bulk_commit_group();
  };
  // lane 0: the adds of the row block sent last (det_sent) performed, then its turn passed on.
  auto det_release = [&] {
    const uint64_t tr0 = tr_now();
    prims::bulk_wait_group<0>();        // the adds performed
    prims::fence_proxy_async_global();  // ... and ordered before this thread's generic accesses,
    if constexpr (FLASHKIT_BWD_DET_FENCE_SC != 0) __threadfence();
    prims::red_add_release_gpu(det_sent, 1);  // which the release makes visible first (no fence.sc)
    tr_release += tr_now() - tr0;
  };
  // kFixed: this lane's two dQ rows' exponents (rows warp * 16 + g and + 8 of its 64), of the row
  // block sent next: loaded at the end of the step that computed it, used at the next step's send.
  int fx[2] = {0, 0};
  auto load_fx = [&](int i) {
    const int m0_i = m_block_at(i) * kBlockM, rows = cta.seqlen_q - m0_i;
    const int32_t* src = p.dq_exp + cta.stat_offset(p, head_at(i), m0_i);
    const LaneIx ix = lane_ix();
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = (kRowSplit ? 64 * wg : 0) + ix.warp * 16 + ix.g + half * 8;
      fx[half] = r < rows ? src[r] : 0;
    }
  };
  auto send_dq_split = [&](int i, bool polled) {
    unsigned char* xc = reinterpret_cast<unsigned char*>(sX) + (kDqOne ? 0 : wg) * (2 * 64 * 128);
    const LaneIx ix = lane_ix();
    if (ix.lane == 0) {
      // this warp's previous adds have read its rows (kDet: performed and released after the softmax)
      if constexpr (!kDet) prims::bulk_wait_group_read<0>();
    }
    __syncwarp();
    const int jx = 2 * (ix.g & 1);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int j = k ^ jx;
        const int r = ix.warp * 16 + ix.g + half * 8;
        const int unit = (j % 4) * 2 + ix.t / 2;
        const bool odd = jx != 0;
        float2 v = make_float2(odd ? dq[k ^ 2][2 * half] : dq[k][2 * half], odd ? dq[k ^ 2][2 * half + 1] : dq[k][2 * half + 1]);
        if constexpr (kFixed) v = prims::to_fixed2(v, fx[half]);
        *reinterpret_cast<float2*>(xc + (j / 4) * (64 * 128) + r * 128 + ((unit ^ ix.g) * 16) + (ix.t % 2) * 8) = v;
      }
    }
    prims::fence_proxy_async_smem();
    __syncwarp();
    if (ix.lane == 0) {
      const int head_i = head_at(i), m0_i = m_block_at(i) * kBlockM;
      // kDet: this key block's turn (read here: at gate B, D 128 lost 1%)
      if constexpr (kDet) det_turn(i, !polled);
      send_rows(prims::smem_addr(xc) + ix.warp * 16 * 128, kDqOne || kRowSplit ? 0 : wg * 64, head_i,
                m0_i + (kRowSplit ? 64 * wg : 0));
    }
  };

  // kDqSplit: dQ[:, 64 wg ..] (kDqOne: warpgroup 1's dQ[:, 0 .. 63]) of the row block whose
  // dS^T tiles are buffer b, over both warpgroups' keys (issued at gate B of the next row block;
  // at it = 0 a dropped product). kDqOne's warpgroup 0 commits an empty group, so that the
  // wgmma_wait<1> after gate B still means "dV and dK done" for both warpgroups.
  auto issue_dq_split = [&](int b, bool mine) {
    if (!mine) {
      prims::wgmma_commit();
      return;
    }
#pragma unroll
    for (int kw = 0; kw < 2; ++kw) {  // keys of warpgroup kw: its dS^T tile, K rows 64 kw ..
      // kRowSplit: this warpgroup's rows are the tile's atom column wg (rows 64 wg .. 64 wg + 63)
      const uint32_t a_base = prims::smem_addr(ds_tile(b, kw)) + (kRowSplit ? wg * DsTile::kBlockBytes : 0);
      const uint64_t desc_a = prims::smem_desc_sw128(a_base, DsTile::kBlockBytes, 1024);
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        const uint64_t a_off = (ks * 16 * 128) >> 4;
        const uint64_t b_off = ((kDqOne || kRowSplit ? 0 : wg) * KTile::kBlockBytes + (kw * 64 + ks * 16) * 128) >> 4;
        if (kw == 0 && ks == 0) {
          prims::wgmma_m64n64k16_ss_first<T, true, true>(dq, desc_a, desc_k_mn + b_off);
        } else {
          prims::wgmma_m64n64k16_ss_tnspab<T>(dq, desc_a + a_off, desc_k_mn + b_off);
        }
      }
    }
    prims::wgmma_commit();
  };

  // kLse2: warpgroup 0 turns a stage's 128 lse values into the P loops' exp2 offsets, one thread a row, once the
  // stage's full barrier passed: row block 0 here, row block it + 1 in step it while its dQ product runs (off the
  // path to its gate A). Its gate A's bar.sync orders the stores before its own warps' reads, its arrival at the
  // other warpgroup's gate A (gate_pass) before warpgroup 1's; the stage's next writer is the loader's copy of row
  // block it + 1 + QS, after both warpgroups' empty arrivals of step it + 1.
  auto lse2_make = [&](int st) {
    float* const l = sLse + st * kBlockM + (kProducer ? tid_now() % 128 : wtid);
    const float v = *l;
    *l = v == -INFINITY ? INFINITY : v * kLog2e;
  };
  if constexpr (kLse2) {
    if (wg == 0 && cta.iters > 0) {
      prims::mbarrier_wait(full(0), 0);
      lse2_make(0);
    }
  }

  int32_t* sem = nullptr;
  int my_turn = 0;

  for (int it = 0; it < cta.iters; ++it) {
    const int stage = it % QS;
    const int head = head_at(it);
    const int m_block = m_block_at(it);
    const int m0 = m_block * kBlockM;
    tr(it, 0);
    prims::mbarrier_wait(full(stage), (it / QS) & 1);
    tr(it, 1);

    const uint64_t desc_q = prims::smem_desc_sw128(q_addr + stage * QTile::kBytes, 16, 1024);
    const uint64_t desc_do = prims::smem_desc_sw128(do_addr + stage * QTile::kBytes, 16, 1024);
    const uint64_t desc_q_mn = prims::smem_desc_sw128(q_addr + stage * QTile::kBytes, QTile::kBlockBytes, 1024);
    const uint64_t desc_do_mn = prims::smem_desc_sw128(do_addr + stage * QTile::kBytes, QTile::kBlockBytes, 1024);

    if constexpr (kDpDelta) {  // dP^T's accumulator = delta of its column (query row), both key rows (e / 2)
      const float* delta_a = sDelta + stage * kBlockM + 2 * lane_ix().t;
#pragma unroll
      for (int j = 0; j < kRowTiles; ++j) {
        const float2 dl = *reinterpret_cast<const float2*>(delta_a + j * 8);
        dp[j][0] = dp[j][2] = dl.x;
        dp[j][1] = dp[j][3] = dl.y;
      }
      prims::fence_operands(dp);  // (in place before gate A's wgmma.fence)
    }
    // Gate A: S^T and dP^T (64 keys x 64 rows; the first k-steps overwrite).
    gate_open();
    tr(it, 2);
    if constexpr (kRowSplit) {  // m64n128: the 128 rows are the B operand's N (K-major, 16 8-row groups)
#pragma unroll
      for (int ks = 0; ks < Tr::kKSteps; ++ks)
        prims::wgmma_m64n128k16_ss<T>(s, desc_kw + ((ks * 32) >> 4), desc_q + ((ks * 32) >> 4), ks > 0);
      prims::wgmma_commit();
#pragma unroll
      for (int ks = 0; ks < Tr::kKSteps; ++ks) {
        if constexpr (kDpDelta) {  // delta - dP^T
          prims::wgmma_m64n128k16_ss_nega<T>(dp, desc_vw + ((ks * 32) >> 4), desc_do + ((ks * 32) >> 4));
        } else {
          prims::wgmma_m64n128k16_ss<T>(dp, desc_vw + ((ks * 32) >> 4), desc_do + ((ks * 32) >> 4), ks > 0);
        }
      }
      prims::wgmma_commit();
    } else {
      prims::wgmma_m64n64k16_ss_first<T, false, false>(s, desc_kw, desc_q);
#pragma unroll
      for (int ks = 1; ks < Tr::kKSteps; ++ks) {
        const uint64_t a_off = ((ks / 4) * KTile::kBlockBytes + (ks % 4) * 32) >> 4;
        const uint64_t b_off = ((ks / 4) * QTile::kBlockBytes + (ks % 4) * 32) >> 4;
        prims::wgmma_m64n64k16_ss<T>(s, desc_kw + a_off, desc_q + b_off, 1);
      }
      prims::wgmma_commit();
      if constexpr (kDpDelta) {  // delta - dP^T
#pragma unroll
        for (int ks = 0; ks < Tr::kKSteps; ++ks) {
          const uint64_t a_off = ((ks / 4) * KTile::kBlockBytes + (ks % 4) * 32) >> 4;
          const uint64_t b_off = ((ks / 4) * QTile::kBlockBytes + (ks % 4) * 32) >> 4;
          prims::wgmma_m64n64k16_ss_nega<T>(dp, desc_vw + a_off, desc_do + b_off);
        }
      } else {
        prims::wgmma_m64n64k16_ss_first<T, false, false>(dp, desc_vw, desc_do);
#pragma unroll
        for (int ks = 1; ks < Tr::kKSteps; ++ks) {
          const uint64_t a_off = ((ks / 4) * KTile::kBlockBytes + (ks % 4) * 32) >> 4;
          const uint64_t b_off = ((ks / 4) * QTile::kBlockBytes + (ks % 4) * 32) >> 4;
          prims::wgmma_m64n64k16_ss<T>(dp, desc_vw + a_off, desc_do + b_off, 1);
        }
      }
      prims::wgmma_commit();
    }
    gate_pass(true);

    // This thread's lse values (columns j * 8 + 2t, +1) read while S^T is computed: read
    // after the wait (as before), their shared-memory latency sat in front of every exp2
    // (ncu, D128: ~19% of the warp samples stalled on them).
    const float* lse_s = sLse + stage * kBlockM;
    const float* delta_s = sDelta + stage * kBlockM;
    const LaneIx ix_s = lane_ix();  // (kProducer: t and key_row read again here)
    const int t_s = ix_s.t, key_row_s = kProducer ? ix_s.warp * 16 + ix_s.g : key_row;
    // (kRowSplit: 32 more registers than the 64-row kernel's 16 would spill; read at their use)
    constexpr int kLseRegs = kRowSplit ? 1 : kRowTiles;
    float2 lse_v[kLseRegs];
    if constexpr (!kRowSplit) {
#pragma unroll
      for (int j = 0; j < kRowTiles; ++j) lse_v[j] = *reinterpret_cast<const float2*>(lse_s + j * 8 + 2 * t_s);
    }
    prims::wgmma_wait<1>();
    prims::fence_operands(s);
    tr(it, 3);
    const bool masked = cta.mask.tile_needs_mask(cta.n0, kBlockN, m0) || cta.mask.tile_needs_left_mask(cta.n0, m0 + kBlockM - 1);
    uint32_t tanh_h[kRowTiles][2];
    // kUnswitch: the P loop unswitched on `masked` (FLASHKIT_BWD_EXP_UNSWITCH above). The softcap
    // kernels keep the loop with the test inside: unswitched, D 128's spilled 32 bytes (not timed);
    // through this lambda their SASS has the old instructions (D 128: a few zeroings reordered).
    constexpr bool kUnswitch = FLASHKIT_BWD_EXP_UNSWITCH != 0 && !capped;
    // P = exp2(S * scale - lse) (after the softcap), the mask tested per element: kTest 0 never,
    // 1 always, 2 where the tile is masked (the runtime flag read inside the loop: the old form,
    // the softcap kernels' and FLASHKIT_BWD_EXP_UNSWITCH=0's).
    auto exp_p = [&](auto test_c) {
      constexpr int kTest = decltype(test_c)::value;
      // kMaskThr (the masked copy): Mask::visible(b + c, key) for this thread's two keys key_t + 8 h (h = e / 2) as
      // bounds on c = 8 j + e % 2, the column past b = m0 + 2t: key <= right_of(b + c) = right_of(b) + c (if
      // has_right) is c - 8 h >= c_lo, one c_lo for both keys (right_of is linear); key >= b + c + seqlen_k -
      // seqlen_q - left (if left >= 0) and key < seqlen_k are c <= c_hi[h]. kNever lies past every c (0 .. kBlockM -
      // 1); the API keeps windows below the sequence lengths, so nothing overflows. (Three registers: with a bound
      // pair per key, four, the fast and fixed-point kernels spilled 8 / 28 bytes outside the loop.)
      constexpr int kNever = 1 << 24;
      int c_lo = 0, c_hi[2] = {0, 0};
      if constexpr (kTest == 1 && kMaskThr) {
        const attn::Mask& mk = cta.mask;
        const int b = m0 + 2 * t_s, key_t = cta.n0 + key0 + key_row_s;
        c_lo = mk.has_right() ? key_t - mk.right_of(b) : -kNever;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int key = key_t + 8 * h;
          c_hi[h] = key >= mk.seqlen_k ? -kNever
                    : mk.left >= 0     ? key - (b + mk.seqlen_k - mk.seqlen_q - mk.left)
                                       : kNever;
        }
      }
#pragma unroll
      for (int j = 0; j < kRowTiles; ++j) {
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
          const int col = j * 8 + 2 * t_s + (e % 2);
          const float2 lse_j = kRowSplit ? *reinterpret_cast<const float2*>(lse_s + j * 8 + 2 * t_s) : lse_v[j % kLseRegs];
          const float lse_raw = e % 2 ? lse_j.y : lse_j.x;  // -inf: a row with no visible key (P = 0); kLse2: lse2
#if FLASHKIT_BWD_LSE_FILL_INF
          const float lse2 = kLse2        ? lse_raw
                             : kTest == 0 ? lse_raw * kLog2e
                                          : (lse_raw == -INFINITY ? INFINITY : lse_raw * kLog2e);
#else
          const float lse2 = kLse2 ? lse_raw : lse_raw == -INFINITY ? INFINITY : lse_raw * kLog2e;
#endif
          float v = prims::exp2_approx(s[j][e] * scale_log2 - lse2);
          if constexpr (kTest == 1 && kMaskThr) {
            const int c = j * 8 + e % 2;  // (col - 2t; a constant once unrolled)
            if (c - 8 * (e / 2) < c_lo || c > c_hi[e / 2]) v = 0.f;
          } else if constexpr (kTest == 1) {
            if (!cta.mask.visible(m0 + col, cta.n0 + key0 + key_row_s + (e / 2) * 8)) v = 0.f;
          } else if constexpr (kTest == 2) {
            if (masked && !cta.mask.visible(m0 + col, cta.n0 + key0 + key_row_s + (e / 2) * 8)) v = 0.f;
          }
          s[j][e] = v;
        }
      }
    };
    if constexpr (kUnswitch) {
      if (masked) {
        exp_p(std::integral_constant<int, 1>{});
      } else {
        exp_p(std::integral_constant<int, 0>{});
      }
    } else {
      exp_p(std::integral_constant<int, 2>{});
    }
    // P^T as the A fragments of dV (kRowSplit: packed after dS, so that P's 64 fp32 registers
    // are not live beside their 32 packed ones while dP^T lands)
    uint32_t pa[kRowSteps][4];
    auto pack_p = [&] {
      if constexpr (kRowSplit) {  // (pack_a4 for each 64-row half)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          pack_a4<T>(*reinterpret_cast<uint32_t(*)[4][4]>(&pa[4 * h][0]), *reinterpret_cast<const float(*)[8][4]>(&s[8 * h][0]));
      } else {
        pack_a4<T>(pa, s);
      }
    };
    if constexpr (!kRowSplit) pack_p();
    prims::wgmma_wait<0>();
    prims::fence_operands(dp);
    tr(it, 4);
    if constexpr (kDpDelta) {  // dp holds delta - dP: dS = P (dP - delta) = -(P dp)
#pragma unroll
      for (int j = 0; j < kRowTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) dp[j][e] = -(s[j][e] * dp[j][e]);
    } else if constexpr (kRowSplit) {
#pragma unroll
      for (int j = 0; j < kRowTiles; ++j) {
        const float2 dl = *reinterpret_cast<const float2*>(delta_s + j * 8 + 2 * t_s);
#pragma unroll
        for (int e = 0; e < 4; ++e) dp[j][e] = s[j][e] * (dp[j][e] - (e % 2 ? dl.y : dl.x));
      }
    } else {
      float2 delta_v[kRowTiles];
#pragma unroll
      for (int j = 0; j < kRowTiles; ++j) delta_v[j] = *reinterpret_cast<const float2*>(delta_s + j * 8 + 2 * t_s);
#pragma unroll
      for (int j = 0; j < kRowTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) dp[j][e] = s[j][e] * (dp[j][e] - (e % 2 ? delta_v[j].y : delta_v[j].x));
    }
    if constexpr (capped) {
#pragma unroll
      for (int j = 0; j < kRowTiles; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float2 th = __half22float2(*reinterpret_cast<const __half2*>(&tanh_h[j][h]));
          dp[j][2 * h] *= 1.f - th.x * th.x;
          dp[j][2 * h + 1] *= 1.f - th.y * th.y;
        }
      }
    }
    uint32_t dsa[kRowSteps][4];
    if constexpr (kRowSplit) {
      pack_p();
#pragma unroll
      for (int h = 0; h < 2; ++h)
        pack_a4<T>(*reinterpret_cast<uint32_t(*)[4][4]>(&dsa[4 * h][0]), *reinterpret_cast<const float(*)[8][4]>(&dp[8 * h][0]));
    } else {
      pack_a4<T>(dsa, dp);
    }
    if constexpr (kDqTma && !kDqSplit) {  // the previous row block's reduce-adds have read the buffer: release it
      if (wg == 1 && it > 0 && lane == 0) {
        if constexpr (kDet) det_release();  // row block it - 1 (its adds performed: the turn passes on)
        prims::bulk_wait_group_read<0>();
        prims::mbarrier_arrive(x_empty);
      }
    }
    if constexpr (kDet && kDqSplit) {  // row block it - 2, sent at the end of step it - 1
      if (lane == 0 && dq_writer && it > 1) det_release();
    }

    // dS^T to this warpgroup's tile (row = key, column = query row). The previous row
    // block's dQ products, its last readers, completed before their partials were used.
    // kDqSplit: buffer it % 2, last read by both warpgroups' dQ(it - 2).
    if constexpr (kDqSplit) {
      sdS = ds_tile(it & 1, wg);
      if (it >= 2) prims::mbarrier_wait(ds_empty(it & 1), ((it - 2) / 2) & 1);
    }
    if constexpr (kStsmDs) {
      // kProducer (240 registers): dsa[st] is exactly the four 8 x 8 matrices (keys 0-7 | 8-15 of the warp) x
      // (columns 16 st + 0-7 | 8-15) of one stmatrix.x4, lane l addressing row l % 8 of matrix l / 8; the lane's
      // chunk is 0 or 1 and the steps 16 columns, so each step's address is one XOR of the lane's (step_addr).
      // The 16 4-byte stores needed 16 addresses, which ptxas hoisted out of the loop and spilled (5 spill
      // reloads a step); the tile's base is opaque so that the 4 addresses of each buffer are not hoisted too.
      // FLASHKIT_BWD_PP_STSM_DS: the same store in the default build (lane_ix: the held indices there).
      // What the addressing assumes, for every tile it reaches (D 64's 128-row blocks: kRowSteps 8, the steps
      // 4..7 in the tile's second atom column, step_addr's + kBlockBytes; D 96: D 128's tiles):
      static_assert(sizeof(T) == 2 && DsTile::kChunkElems == 8 && DsTile::kAtomCols == 64,
                    "stmatrix.b16: 16-bit elements, 8 to a 16-byte chunk, 64 to a 128-byte atom row");
      static_assert(DsTile::kRows == 4 * 16 && DsTile::kCols == 16 * kRowSteps,
                    "dS^T tile: the warpgroup's 64 keys (16 a warp) x the row block's rows, 16 a step");
      static_assert(DsTile::kAtomCols % 16 == 0,
                    "step_addr: the lane's chunk (0 or 1) and the step's (16 columns: 0, 2, 4, 6) share no bit");
      static_assert(Tr::kSmemDs % 1024 == 0 && DsTile::kBytes % 1024 == 0,
                    "step_addr: the tiles start on whole 8-row swizzle atoms (1024 bytes)");
      const LaneIx ix = lane_ix();
      const int mat = ix.lane / 8;
      const uint32_t a0 = prims::opaque(prims::smem_addr(sdS)) +
                          uint32_t(sizeof(T)) * uint32_t(DsTile::offset(ix.warp * 16 + ix.lane % 8 + 8 * (mat % 2), 8 * (mat / 2)));
#pragma unroll
      for (int st = 0; st < kRowSteps; ++st) {
        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                         DsTile::step_addr(a0, 0, 16 * st)),
                     "r"(dsa[st][0]), "r"(dsa[st][1]), "r"(dsa[st][2]), "r"(dsa[st][3])
                     : "memory");
      }
    } else {
#pragma unroll
      for (int st = 0; st < kRowSteps; ++st) {
        const int c = st * 16 + 2 * t;
        *reinterpret_cast<uint32_t*>(sdS + DsTile::offset(key_row, c)) = dsa[st][0];
        *reinterpret_cast<uint32_t*>(sdS + DsTile::offset(key_row + 8, c)) = dsa[st][1];
        *reinterpret_cast<uint32_t*>(sdS + DsTile::offset(key_row, c + 8)) = dsa[st][2];
        *reinterpret_cast<uint32_t*>(sdS + DsTile::offset(key_row + 8, c + 8)) = dsa[st][3];
      }
    }
    prims::fence_proxy_async_smem();
    prims::bar_sync(3 + wg, 128);  // the whole warpgroup's dS^T visible to its wgmmas
    tr(it, 5);

    // Gate B: dV += P^T dO, dK += dS^T Q (RS), then dQ chunk 0 = dS K (SS).
    gate_open();
    tr(it, 6);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      prims::fence_operands(dv[c]);
      prims::fence_operands(dk[c]);
    }
#pragma unroll
    for (int ms = 0; ms < Tr::kMSteps; ++ms) {
      if constexpr (FLASHKIT_BWD_WIDE_WGMMA && kChunks == 2) {
        // One m64n128 per k-step (both 64-column chunks; dv/dk[2][8][4] are [16][4] in memory,
        // the descriptors' lbo steps to the second atom column): half the wgmma instructions.
        const uint64_t off = (ms * 16 * 128) >> 4;
        prims::wgmma_m64n128k16_rs_tnspb<T>(*reinterpret_cast<float(*)[16][4]>(&dv[0][0][0]), pa[ms], desc_do_mn + off);
        prims::wgmma_m64n128k16_rs_tnspb<T>(*reinterpret_cast<float(*)[16][4]>(&dk[0][0][0]), dsa[ms], desc_q_mn + off);
      } else {
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          const uint64_t off = (c * QTile::kBlockBytes + ms * 16 * 128) >> 4;
          prims::wgmma_m64n64k16_rs_tnspb<T>(dv[c], pa[ms], desc_do_mn + off);
          prims::wgmma_m64n64k16_rs_tnspb<T>(dk[c], dsa[ms], desc_q_mn + off);
        }
      }
    }
    prims::wgmma_commit();
    auto issue_dq = [&](int c) {  // dQ chunk c (64 columns) over this warpgroup's 64 keys
      prims::wgmma_m64n64k16_ss_first<T, true, true>(dq, desc_ds, desc_k_mn + ((c * KTile::kBlockBytes + key0 * 128) >> 4));
#pragma unroll
      for (int ks = 1; ks < Tr::kDqKSteps; ++ks) {
        const uint64_t a_off = (ks * 16 * 128) >> 4;
        const uint64_t b_off = (c * KTile::kBlockBytes + (key0 + ks * 16) * 128) >> 4;
        prims::wgmma_m64n64k16_ss_tnspab<T>(dq, desc_ds + a_off, desc_k_mn + b_off);
      }
      prims::wgmma_commit();
    };
    if constexpr (kDqSplit) {
      issue_dq_split((it + 1) & 1, dq_writer);
    } else {
      issue_dq(0);
    }
    // Warpgroup 1 skips its arrival after the last gate: it gave warpgroup 0 one at the start.
    gate_pass(wg == 0 || it + 1 < cta.iters);
    if constexpr (kDet && !kDqSplit) {  // the turn of the row block this step sends (the previous one's released)
      if (lane == 0 && wg == 1) det_poll(it);
    }

    prims::wgmma_wait<1>();  // dV, dK: this warpgroup is done with the stage (dQ chunk 0 may run on)
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      prims::fence_operands(dv[c]);
      prims::fence_operands(dk[c]);
    }
    tr(it, 7);
    prims::mbarrier_arrive(empty(stage));
    // Row block it + 2 into stage (it + 2) % 3, last read by row block it - 1: both
    // warpgroups arrived on its empty barrier before gate B of `it` could open. (Before the
    // dQ adds, so a deterministic-mode wait for the turn does not delay the copy.) kRowSplit's
    // two stages: into this row block's stage, once the other warpgroup is done with it too
    // (its loader, warpgroup 1, passes gate B after warpgroup 0, so it rarely waits).
    if (it + 2 < cta.iters && loader) {
      const int jn = it + 2, sn = jn % QS;
      if (jn >= QS) prims::mbarrier_wait(empty(sn), ((jn - QS) / QS) & 1);
      load_rows(jn, sn);
    }
    if constexpr (kLse2) {  // the next row block's lse (lse2_make above)
      if (wg == 0 && it + 1 < cta.iters) {
        prims::mbarrier_wait(full((it + 1) % QS), ((it + 1) / QS) & 1);
        lse2_make((it + 1) % QS);
      }
    }
    tr(it, 8);

    if constexpr (kDqSplit) {
      prims::wgmma_wait<0>();
      prims::fence_operands(dq);
      if (it > 0) {
        prims::mbarrier_arrive(ds_empty((it - 1) & 1));
        if (dq_writer) send_dq_split(it - 1, false);
      }
      if constexpr (kFixed) {
        if (dq_writer) load_fx(it);  // (row block it is sent at the next step or after the loop)
      }
    } else {
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        if (c > 0) {  // chunk 0 went out with gate B
          prims::wgmma_fence();
          issue_dq(c);
        }
        prims::wgmma_wait<0>();
        prims::fence_operands(dq);
        if constexpr (kDqTma) {
          static_assert(kTma && !kSoftcap, "dQ by TMA reduce-adds: the fast TMA kernel only");
          // Chunk c = two boxes of 64 rows x 32 fp32 columns (8 KB each, 128-byte rows, the
          // 16-byte unit u of row r stored at u ^ (r % 8)). This thread's elements: rows
          // warp * 16 + g (+ 8), columns j * 8 + 2t (+ 1); r % 8 = g. A half-warp's 8-byte
          // accesses (rows g = 0..3 or 4..7, units 2 (j % 4) + t / 2) would meet each unit twice
          // (ncu: 2x the ideal wavefronts); so in access k the lanes of odd g take j = k ^ 2,
          // which makes the 8 units of a half-warp distinct (2 wavefronts per access).
          unsigned char* xc = reinterpret_cast<unsigned char*>(sX) + c * (2 * 64 * 128);
          const int jx = 2 * (g & 1);
          auto elem = [&](int j, int half) -> float2* {
            const int r = warp * 16 + g + half * 8;
            const int unit = (j % 4) * 2 + t / 2;
            return reinterpret_cast<float2*>(xc + (j / 4) * (64 * 128) + r * 128 + ((unit ^ g) * 16) + (t % 2) * 8);
          };
          auto mine = [&](int k, int half) {  // dq of access k: j = k ^ jx
            const bool odd = jx != 0;
            return make_float2(odd ? dq[k ^ 2][2 * half] : dq[k][2 * half],
                               odd ? dq[k ^ 2][2 * half + 1] : dq[k][2 * half + 1]);
          };
          if (wg == 0) {
            if (c == 0 && it > 0) prims::mbarrier_wait(x_empty, (it - 1) & 1);
#pragma unroll
            for (int k = 0; k < 8; ++k)
#pragma unroll
              for (int half = 0; half < 2; ++half) *elem(k ^ jx, half) = mine(k, half);
            if (c == kChunks - 1) prims::mbarrier_arrive(x_full);
          } else {
            if (c == 0) prims::mbarrier_wait(x_full, it & 1);
#pragma unroll
            for (int k = 0; k < 8; ++k) {
#pragma unroll
              for (int half = 0; half < 2; ++half) {
                float2* e = elem(k ^ jx, half);
                const float2 o = *e, m = mine(k, half);
                *e = make_float2(o.x + m.x, o.y + m.y);
              }
            }
            prims::fence_proxy_async_smem();
            __syncwarp();  // this warp's 16 rows summed in place (a 16-row box: 2 KB, whole swizzle periods)
            if (lane == 0) {
              if constexpr (kDet) det_turn(it, false);  // D 64: warpgroup 1's 4 warps per turn (read at gate B)
              send_rows(prims::smem_addr(xc) + warp * 16 * 128, c * 64, head, m0);
            }
          }
          continue;
        }
        float4* x = sX + c * 8 * 128;
        if (wg == 0) {  // park the partial for warpgroup 1
          if (c == 0 && it > 0) prims::mbarrier_wait(x_empty, (it - 1) & 1);
#pragma unroll
          for (int j = 0; j < 8; ++j) x[j * 128 + wtid] = make_float4(dq[j][0], dq[j][1], dq[j][2], dq[j][3]);
          if (c == kChunks - 1) prims::mbarrier_arrive(x_full);
        } else {  // add warpgroup 0's partial, then one fp32 add per element into dq_accum
          if (c == 0) prims::mbarrier_wait(x_full, it & 1);
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const float4 o = x[j * 128 + wtid];
            dq[j][0] += o.x;
            dq[j][1] += o.y;
            dq[j][2] += o.z;
            dq[j][3] += o.w;
          }
          if (c == kChunks - 1) prims::mbarrier_arrive(x_empty);
          if (c == 0 && p.deterministic) {  // this key block's turn for the row block's dq
            // Per warp, no named barrier: each of warpgroup 1's four warps waits until the
            // four warps of every earlier turn have released (the counter advances by one
            // per warp), adds its own rows, and releases. The warps own disjoint rows, so
            // every element still gets its adds in turn order.
            my_turn = cta.dq_turn<kBlockM, kBlockN>(m0);
            sem = cta.dq_counter(p, head, m_block);
            if (lane == 0) {  // relaxed polls (an acquire empties L1 each time), one acquire after
              while (prims::ld_relaxed_gpu(sem) < kWarpsPerWg * my_turn) {
              }
              (void)prims::ld_acquire_gpu(sem);
            }
            __syncwarp();
          }
          float* acc_base = p.dq_accum + ((cta.q_row0() + m0) * p.h_q + head) * kD;
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int r = warp * 16 + g + half * 8;
            if (m0 + r < cta.seqlen_q) {
              float* row = acc_base + int64_t(r) * p.h_q * kD + c * 64 + 2 * t;
#pragma unroll
              for (int j = 0; j < 8; ++j) {
                if (c * 64 + j * 8 < kD) prims::red_add_v2_f32(row + j * 8, dq[j][half * 2], dq[j][half * 2 + 1]);
              }
            }
          }
          if (c == kChunks - 1 && p.deterministic) {
            __threadfence();
            __syncwarp();  // every lane's reds before lane 0's release
            if (lane == 0) prims::red_add_release_gpu(sem, 1);
          }
        }
      }
    }  // (kDqSplit)
    tr(it, 9);
  }

  if constexpr (kDqSplit) {  // the last row block's dQ: both warpgroups' last dS^T tiles
    if (cta.iters > 0) {
      prims::bar_sync(5, 2 * 128);  // (each warpgroup fenced its stores before its barrier 3 + wg)
    }
    if (cta.iters > 0 && dq_writer) {
      prims::wgmma_fence();
      issue_dq_split((cta.iters - 1) & 1, true);  // (this warpgroup writes it: the branch above)
      prims::wgmma_wait<0>();
      prims::fence_operands(dq);
      if constexpr (kDet) {  // row block iters - 2, sent at the end of the last step
        if (lane == 0 && cta.iters > 1) det_release();
      }
      send_dq_split(cta.iters - 1, false);
      if constexpr (kDet) {
        if (lane == 0) det_release();
      }
    }
  } else if constexpr (kDet) {  // D 64: the last row block's turn
    if (wg == 1 && lane == 0 && cta.iters > 0) det_release();
  }

  // Epilogue: dK *= softmax_scale; stage dK, dV through the K and V tiles (every wgmma,
  // including the other warpgroup's dQ products that read K, is done) for 16-byte stores.
  // The commit matters when iters == 0 (a key block no row sees: window, empty varlen q):
  // without TMA the K and V copies were then never covered by a full[] arrival, and
  // wait_group waits for committed groups only, so without it they could land on top of
  // the zero dK/dV (kTma waited for them before the loop).
  // kProducer: the producer warpgroup has left, so the epilogue's barriers are over the MMA warpgroups only (a
  // __syncthreads there and one in the producer's branch: synccheck's divergent-barrier error, 2026-11-29).
  auto epi_sync = [] {
    if constexpr (kProducer) {
      prims::bar_sync(6, kCThreads);
    } else {
      __syncthreads();
    }
  };
  prims::wgmma_wait<0>();
  prims::cp_async_commit();
  prims::cp_async_wait<0>();
  if constexpr (kDqTma) {
    if ((kDqSplit ? dq_writer : wg == 1) && lane_ix().lane == 0) prims::bulk_wait_group<0>();  // the dq reduce-adds done before exit
  }
  epi_sync();
  const float scale = p.softmax_scale;
  // The epilogue's walk over this thread's dK / dV fragments: f(c, j, key row, column) for the
  // elements [c][j][0..1] at that key row and [c][j][2..3] eight rows below, columns col, col + 1.
  const LaneIx ix_e = lane_ix();  // (kProducer: read again, not held over the loop)
  auto for_each_kv_frag = [&](auto&& f) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
#pragma unroll
      for (int j = 0; j < 8; ++j) f(c, j, key0 + ix_e.warp * 16 + ix_e.g, c * 64 + j * 8 + 2 * ix_e.t);
    }
  };
  if constexpr (kSplit) {
    // GQA split (BwdParams::gqa_split_log2): the cluster's CTAs hold partial dK / dV of the
    // same keys (each over its share of the query heads). dK, then dV: every CTA stages its fp32
    // partial in its own shared memory (pitch kD + 8 floats: two wavefronts a warp store), a
    // cluster barrier, then CTA `sub` sums rows [sub * kBlockN / n, ...) over the CTAs in rank
    // order (the same order on every run: deterministic) and stores them; a second barrier
    // before the buffer is reused or the CTA exits (the others may still read it).
    constexpr int kPitch = kDP + 8;
    static_assert(kBlockN * kPitch * 4 <= Tr::kSmemBars, "the fp32 staging fits below the barriers");
    float* const sAcc = reinterpret_cast<float*>(smem);
    const uint32_t acc_addr = prims::smem_addr(sAcc);
    const int nsub = 1 << p.gqa_split_log2;
    const int rows = kBlockN >> p.gqa_split_log2;
    const int row_lo = split_sub() * rows;
    constexpr int kColChunks = kD / 8;  // (the data columns: D 96's padding is not stored)
    auto reduce_store = [&](const float (&a)[kChunks][8][4], float mul, T* gbase, int64_t row_stride) {
      for_each_kv_frag([&](int c, int j, int kr, int col) {
        *reinterpret_cast<float2*>(sAcc + kr * kPitch + col) = make_float2(a[c][j][0] * mul, a[c][j][1] * mul);
        *reinterpret_cast<float2*>(sAcc + (kr + 8) * kPitch + col) = make_float2(a[c][j][2] * mul, a[c][j][3] * mul);
      });
      prims::cluster_sync();
      for (int i = tid; i < rows * kColChunks; i += kThreads) {
        const int r = row_lo + i / kColChunks, col = (i % kColChunks) * 8;
        float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        for (int src = 0; src < nsub; ++src) {
          const uint32_t ca = prims::mapa_shared(acc_addr + uint32_t(r * kPitch + col) * 4u, uint32_t(src));
          const float4 lo = prims::ld_shared_cluster_f32x4(ca), hi = prims::ld_shared_cluster_f32x4(ca + 16u);
          v[0] += lo.x; v[1] += lo.y; v[2] += lo.z; v[3] += lo.w;
          v[4] += hi.x; v[5] += hi.y; v[6] += hi.z; v[7] += hi.w;
        }
        if (r < cta.keys_here) {
          const uint4 o = make_uint4(prims::pack2<T>(v[0], v[1]), prims::pack2<T>(v[2], v[3]),
                                     prims::pack2<T>(v[4], v[5]), prims::pack2<T>(v[6], v[7]));
          *reinterpret_cast<uint4*>(gbase + int64_t(r) * row_stride + col) = o;
        }
      }
      prims::cluster_sync();
    };
    reduce_store(dk, scale,
                 static_cast<T*>(p.dk) + cta.k_side_offset(p.dk_row_stride, p.dk_batch_stride) +
                     cta.head_kv * p.dk_head_stride + int64_t(cta.n0) * p.dk_row_stride,
                 p.dk_row_stride);
    reduce_store(dv, 1.f,
                 static_cast<T*>(p.dv) + cta.k_side_offset(p.dv_row_stride, p.dv_batch_stride) +
                     cta.head_kv * p.dv_head_stride + int64_t(cta.n0) * p.dv_row_stride,
                 p.dv_row_stride);
    return;
  }
  for_each_kv_frag([&](int c, int j, int kr, int col) {
    *reinterpret_cast<uint32_t*>(sK + KTile::offset(kr, col)) = prims::pack2<T>(dk[c][j][0] * scale, dk[c][j][1] * scale);
    *reinterpret_cast<uint32_t*>(sK + KTile::offset(kr + 8, col)) =
        prims::pack2<T>(dk[c][j][2] * scale, dk[c][j][3] * scale);
    *reinterpret_cast<uint32_t*>(sV + KTile::offset(kr, col)) = prims::pack2<T>(dv[c][j][0], dv[c][j][1]);
    *reinterpret_cast<uint32_t*>(sV + KTile::offset(kr + 8, col)) = prims::pack2<T>(dv[c][j][2], dv[c][j][3]);
  });
  epi_sync();
  if constexpr (kProducer) {
    // The CTA's extents made again (k_start, keys_here: ptxas kept them in local memory over the loop) and the
    // thread's index read again.
    const attn::BwdCta cta_e = attn::make_bwd_cta<kBlockM, kBlockN, kSplit>(p);
    attn::store_dkdv_tiles<KTileIO, kCThreads>(p, cta_e, sK, sV, tid_now() - 128);
  } else {
    attn::store_dkdv_tiles<KTileIO, kCThreads>(p, cta, sK, sV, ctid);
  }
#if FLASHKIT_BWD_PP_TRACE
  static_assert(!kProducer, "the step trace counts two warpgroups");
  static_assert(2 * Tr::kTraceSteps * Tr::kTraceFields == 2 * 32 * 10, "g_pp_trace's size");
  __threadfence_block();
  __syncthreads();
  if (tr_cta && tid == 0) {
    const int steps = min(Tr::kTraceSteps, cta.iters - Tr::kTraceFirst);
    for (int w = 0; w < 2; ++w) {
      for (int st = 0; st < steps; ++st) {
        const uint32_t* f = tr_buf + (w * Tr::kTraceSteps + st) * Tr::kTraceFields;
        printf("bwd_pp_trace D=%d S=%d causal=%d cta=%d wg=%d step=%d f=%u,%u,%u,%u,%u,%u,%u,%u,%u,%u\n", p.head_dim,
               p.seqlen_k, int(p.causal), int(blockIdx.x), w, st + Tr::kTraceFirst, f[0], f[1], f[2], f[3], f[4], f[5],
               f[6], f[7], f[8], f[9]);
      }
    }
  }
#endif
#if FLASHKIT_BWD_DET_TRACE
  if constexpr (kDet) {
    DetTrace& tr = g_det_trace;
    if (lane == 0 && (kDqSplit ? dq_writer : wg == 1)) {
      atomicAdd(&tr.wait_ns, (unsigned long long)tr_wait);
      atomicAdd(&tr.release_ns, (unsigned long long)tr_release);
      atomicAdd(&tr.sends, (unsigned long long)tr_sends);
    }
    if (tid == 0) {
      const uint64_t end = prims::globaltimer();
      atomicAdd(&tr.cta_ns, (unsigned long long)(end - tr_start));
      atomicMin(&tr.t_first, (unsigned long long)tr_start);
      atomicMax(&tr.t_last, (unsigned long long)end);
    }
    __threadfence();
    __syncthreads();
    if (tid == 0) {
      const unsigned long long grid = (unsigned long long)gridDim.x * gridDim.y * gridDim.z;
      if (atomicAdd(&tr.done, 1ull) == grid - 1) {
        __threadfence();
        const unsigned long long w = atomicAdd(&tr.wait_ns, 0ull), r = atomicAdd(&tr.release_ns, 0ull),
                                 n = atomicAdd(&tr.sends, 0ull), c = atomicAdd(&tr.cta_ns, 0ull),
                                 t0 = atomicAdd(&tr.t_first, 0ull), t1 = atomicAdd(&tr.t_last, 0ull);
        printf("det_trace D=%d batch=%d h_q=%d seqlen_q=%d seqlen_k=%d causal=%d rotate=%d grid=%llu "
               "issuing_warps=%d sends=%llu wait_ns=%llu release_ns=%llu cta_ns=%llu span_ns=%llu\n",
               p.head_dim, p.batch, p.h_q, p.seqlen_q, p.seqlen_k, int(p.causal), int(p.dq_rotate), grid,
               kDqSplit ? kDqWriters * kWarpsPerWg : kWarpsPerWg, n, w, r, c, t1 - t0);
        tr.wait_ns = tr.release_ns = tr.sends = tr.cta_ns = tr.t_last = tr.done = 0;
        tr.t_first = ~0ull;
        __threadfence();
      }
    }
  }
#endif
#endif  // FLASHKIT_BWD_SM90_KERNEL_BODY
}

}  // namespace flashkit::bwd_sm90
