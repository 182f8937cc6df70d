// Tile shapes and shared-memory plan of the Hopper backward's ping-pong variant (D 64, 96 and
// 128; kernel_pp.cuh; D 96 on D 128's tiles).
//
// A CTA owns kBlockN = 128 keys of one (batch, KV head); warpgroup w owns keys
// [64w, 64w + 64) and does everything for them on its own: S^T, dP^T, dV, dK and its
// partial dQ = dS_w K_w over all D columns (the dS^T tile of each warpgroup is its own).
// The two warpgroups meet only at the MMA gates (named barriers: their tensor phases
// alternate), at the Q/dO stages (full/empty mbarriers) and at dQ: with TMA reduce-adds each
// warpgroup computes 64 of D 128's columns over both dS^T tiles (kDqSplit), and at D 64
// warpgroup 1 computes all of them (kDqOne); otherwise warpgroup 0's partial goes through a
// shared-memory hand-off buffer to warpgroup 1, which adds once.
#pragma once

#include "prims/wgmma.cuh"
#include "tiles/smem_swizzle.cuh"

// Step-timeline trace (diagnostic builds only, scripts/dev/bwd_pp_trace.py; off, every kernel
// compiles to the same SASS): two CTAs in the middle of the grid record clock64 at fixed points
// of each warpgroup's row-block steps kTraceFirst .. + kTraceSteps - 1 in a global buffer and
// print them at exit (kernel_pp.cuh).
#ifndef FLASHKIT_BWD_PP_TRACE
#define FLASHKIT_BWD_PP_TRACE 0
#endif

// Which warpgroup issues the row-block loads of the TMA kernels (Q / dO boxes, lse / delta):
// the step trace (docs/kernels/bwd.md) found the issuing warpgroup's chain ~560 cycles longer
// a step, and at D 128 warpgroup 0's chain is the critical one (warpgroup 1 waits ~600 cycles at
// gate A), at D 64 warpgroup 1's (it makes and sends the whole dQ). FLASHKIT_BWD_PP_LOADER_WG_D128
// and _D64 (0 or 1) pick it per head dim. Measured (H100, 2026-11-27, define A/B, two rounds):
// warpgroup 1 loading is +0.8..3.2% at D 128 (fast mode, every row; deterministic rows +5..11%
// against v9's in a separate run) and -1.5..4.5% at D 64: D 128 uses warpgroup 1, D 64 warpgroup 0.
#ifndef FLASHKIT_BWD_PP_LOADER_WG_D128
#define FLASHKIT_BWD_PP_LOADER_WG_D128 1
#endif
#ifndef FLASHKIT_BWD_PP_LOADER_WG_D64
#define FLASHKIT_BWD_PP_LOADER_WG_D64 0
#endif

namespace flashkit::bwd_sm90 {

// kBlockM_ = 128 (D 64 only; the fast and deterministic TMA kernels, kernel_pp.cuh's kRowSplit):
// 128 query rows a step, so the fixed part of a step (gates, waits, loads, sends; ~57% of a
// 64-row D 64 step, bwd-redesign.md) is spread over twice the FLOPs. S^T / dP^T are m64n128
// (64 keys x 128 rows per warpgroup), dV / dK take 8 k-steps, and dQ is split by rows (warpgroup
// w: rows 64w .. 64w + 63 over all 128 keys, from both warpgroups' dS^T tiles). Two stages of
// Q / dO (three do not fit), loaded by warpgroup 1, whose dV / dK of a row block finish last.
//
// kProducer_ (D 128's 64-row TMA reduce-add kernels only; a prototype behind FLASHKIT_BWD_PP_PRODUCER, see
// kernel_pp.cuh): a third warpgroup, first in the CTA, issues every row block's loads (Q / dO by TMA, lse / delta
// copies) as soon as a stage is free and gives its registers to the two MMA warpgroups (setmaxnreg: 24 for it,
// 240 for them), which then never load (bwd-redesign.md 5.2). setmaxnreg.inc only takes what the CTA's own
// warpgroups gave back with .dec, so the split must fit the launch's allocation, 384 x 168 = 128 x 504, not the
// SM's 65536: a first build at 32 / 240 (512) hung every call at the consumers' setmaxnreg.inc (2026-11-29).
template <typename T_, int kHeadDim_, int kBlockM_ = 64, bool kProducer_ = false>
struct BwdPpTraits {
  using T = T_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = 128;
  static constexpr bool kProducer = kProducer_;
  static constexpr int kConsumerThreads = 256;                       // the two MMA warpgroups
  static constexpr int kThreads = kProducer ? 384 : kConsumerThreads;  // + the producer warpgroup
  static constexpr int kProducerRegs = 24, kConsumerRegs = 240;
  static_assert(!kProducer || prims::setmaxnreg_split_fits(kThreads, kProducerRegs + 2 * kConsumerRegs),
                "setmaxnreg's split fits the registers the CTA is launched with");
  static constexpr int kMinBlocks = 1;
  static constexpr bool kRowSplit = kBlockM == 128;  // dQ split by rows between the warpgroups
  static_assert(kBlockM == 64 || (kBlockM == 128 && kHeadDim == 64), "128-row blocks: D 64 only");
  static constexpr int kStages = kRowSplit ? 2 : 3;  // Q/dO/lse/delta ring (load of j + 2 at gate B of j)
  // D 96 runs on D 128's tiles (as the forward's sm90 family does): tiles and the dK / dV / dQ
  // products use the head dim rounded up to whole 64-column swizzle atoms; S^T and dP^T take
  // the data columns' k-steps only, the copies move the data columns (QTileIO / KTileIO, the
  // TMA boxes zero-fill past the tensor), and the padding columns of dK / dV / dQ are computed
  // but never stored (docs/kernels/bwd.md "D 96 and 192 on the Hopper kernels").
  static constexpr int kHeadDimPadded = (kHeadDim + 63) / 64 * 64;
  static constexpr int kDChunks = kHeadDimPadded / 64;  // n64 column chunks of dK, dV, dQ
  static constexpr int kKSteps = kHeadDim / 16;   // k16 steps of S^T, dP^T (data columns)
  static constexpr int kMSteps = kBlockM / 16;    // k16 steps of dV, dK (query rows)
  static constexpr int kDqKSteps = 64 / 16;       // k16 steps of dQ (this warpgroup's keys)
  static constexpr int kRowTiles = kBlockM / 8;   // n8 column tiles of S^T / dP^T (query rows)
  static_assert(kHeadDim == 64 || kHeadDim == 96 || kHeadDim == 128, "the ping-pong variant is for D 64, 96 and 128");
  static_assert(!kProducer || (kHeadDim == 128 && kBlockM == 64), "the producer warpgroup: D 128's 64-row kernel");
  static constexpr int kLoaderWg =
      kRowSplit ? 1 : kHeadDimPadded == 128 ? FLASHKIT_BWD_PP_LOADER_WG_D128 : FLASHKIT_BWD_PP_LOADER_WG_D64;
  static_assert(kLoaderWg == 0 || kLoaderWg == 1, "a warpgroup of the two");

  using QTile = tiles::Swizzle128Tile<T, kBlockM, kHeadDimPadded>;  // also dO
  using KTile = tiles::Swizzle128Tile<T, kBlockN, kHeadDimPadded>;  // also V, and dK/dV in the epilogue
  // What the cp.async copies move between global and shared memory: the data columns.
  using QTileIO = tiles::ColumnPrefix<QTile, kHeadDim>;
  using KTileIO = tiles::ColumnPrefix<KTile, kHeadDim>;
  using DsTile = tiles::Swizzle128Tile<T, 64, kBlockM>;       // one warpgroup's dS^T [key][row]
  static constexpr int kXChunkBytes = kBlockM * 64 * 4;       // fp32 dQ chunk (kRowSplit: both warpgroups' 64 rows)
  // dS^T tiles per warpgroup: two (row blocks j and j - 1) for the TMA kernel's dQ after the
  // next row block's gate B (kernel_pp.cuh: kDqSplit at D 128, kDqOne at D 64), which reads
  // both warpgroups' tiles of j - 1.
  static constexpr int kDsBufs = 2;

  static constexpr int kSmemK = 0;
  static constexpr int kSmemV = kSmemK + KTile::kBytes;
  static constexpr int kSmemQ = kSmemV + KTile::kBytes;
  static constexpr int kSmemDo = kSmemQ + kStages * QTile::kBytes;
  static constexpr int kSmemDs = kSmemDo + kStages * QTile::kBytes;  // [kDsBufs][2 warpgroups]
  static constexpr int kSmemX = kSmemDs + 2 * kDsBufs * DsTile::kBytes;  // [kXChunks] fp32 chunks
  static constexpr int kXChunks = kDChunks;
  static constexpr int kSmemLse = kSmemX + kXChunks * kXChunkBytes;  // fp32 [kStages][kBlockM]
  static constexpr int kSmemDelta = kSmemLse + kStages * kBlockM * 4;
  // mbarriers: full[kStages], empty[kStages], x_full, x_empty, ds_empty[2]
  static constexpr int kNumBars = 2 * kStages + 4;
  static constexpr int kSmemBars = kSmemDelta + kStages * kBlockM * 4;
  static constexpr int kSmemBytes = kSmemBars + 8 * kNumBars + 1024;  // + alignment slack
  // FLASHKIT_BWD_PP_TRACE: steps recorded per warpgroup, fields per step (kernel_pp.cuh).
  static constexpr int kTraceFirst = 8, kTraceSteps = 32, kTraceFields = 10;
  static_assert(QTile::kBytes % 1024 == 0 && KTile::kBytes % 1024 == 0 && DsTile::kBytes % 1024 == 0,
                "1024-byte aligned tiles");
  static_assert(kSmemBytes <= 227 * 1024, "fits an H100/H200 SM's shared memory");
};

}  // namespace flashkit::bwd_sm90
