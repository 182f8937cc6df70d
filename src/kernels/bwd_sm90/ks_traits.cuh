// Tile shapes and shared-memory plan of the key-split Hopper backward (kernel_ks.cuh, D = 256).
//
// A CTA owns kBlockN = 64 keys of one (batch, KV head) and walks 64-row query blocks.
// Warpgroup w computes S and dP for keys [32w, 32w + 32) (m64n32 wgmmas, rows of the query
// block as M), forms P and dS for them and stores both, bf16, into [row][key] tiles. After
// one CTA barrier each warpgroup accumulates dK and dV for all 64 keys over its half of the
// head dimension, d in [128w, 128w + 128), and computes dQ for the same columns.
// (FlashAttention-3's Hopper backward splits S/dP by keys at D = 256 the same way;
// docs/kernels/bwd-redesign.md sec. 5.3.)
//
// D = 192 runs on D = 256's tiles: the warpgroups' column halves must be whole 64-column
// swizzle atoms (96 columns each would start warpgroup 1 inside an atom, which an MN-major
// wgmma operand cannot), so the tiles and the dK / dV / dQ products use 256 columns; S and dP
// take the data columns' k-steps only, the copies move the data columns, and warpgroup 1's last
// 64 columns of dK / dV / dQ are computed but never stored (docs/kernels/bwd.md "D 96 and 192
// on the Hopper kernels").
#pragma once

#include "tiles/smem_swizzle.cuh"

namespace flashkit::bwd_sm90 {

template <typename T_, int kHeadDim_>
struct BwdKsTraits {
  using T = T_;
  static constexpr int kHeadDim = kHeadDim_;
  static_assert(kHeadDim_ == 256 || kHeadDim_ == 192, "the key-split kernel is the D = 256 (and 192) kernel");
  static constexpr int kHeadDimPadded = 256;
  static constexpr int kDataAtoms = kHeadDim / 64;  // 64-column atoms holding data (Q / dO loads)
  static constexpr int kBlockM = 64;
  static constexpr int kBlockN = 64;
  static constexpr int kWgKeys = kBlockN / 2;      // S/dP keys per warpgroup
  static constexpr int kWgCols = kHeadDimPadded / 2;  // dK/dV/dQ columns per warpgroup
  static constexpr int kThreads = 256;
  static constexpr int kMinBlocks = 1;
  static constexpr int kKSteps = kHeadDim / 16;    // k16 steps of S, dP (data columns)
  static constexpr int kMSteps = kBlockM / 16;     // k16 steps of dV, dK (over query rows)
  static constexpr int kNSteps = kBlockN / 16;     // k16 steps of dQ (over keys)

  using QTile = tiles::Swizzle128Tile<T, kBlockM, kHeadDimPadded>;  // also dO
  using KTile = tiles::Swizzle128Tile<T, kBlockN, kHeadDimPadded>;  // also V, and dK/dV in the epilogue
  // What the cp.async copies move between global and shared memory: the data columns.
  using QTileIO = tiles::ColumnPrefix<QTile, kHeadDim>;
  using KTileIO = tiles::ColumnPrefix<KTile, kHeadDim>;
  using PTile = tiles::Swizzle128Tile<T, kBlockM, kBlockN>;   // P and dS, [row][key]

  static constexpr int kSmemK = 0;
  static constexpr int kSmemV = kSmemK + KTile::kBytes;
  static constexpr int kSmemQ = kSmemV + KTile::kBytes;        // 2 stages
  static constexpr int kSmemDo = kSmemQ + 2 * QTile::kBytes;   // 2 stages
  static constexpr int kSmemP = kSmemDo + 2 * QTile::kBytes;
  static constexpr int kSmemDs = kSmemP + PTile::kBytes;
  static constexpr int kSmemLse = kSmemDs + PTile::kBytes;     // fp32 [2][kBlockM]
  static constexpr int kSmemDelta = kSmemLse + 2 * kBlockM * 4;
  // dQ by TMA reduce-adds: each warp stages 16 rows x 32 fp32 columns (one 128-byte
  // swizzled box of the dq_accum map, 2 KB) at a time.
  static constexpr int kDqBoxBytes = 16 * 128;
  static constexpr int kSmemDqStage = kSmemDelta + 2 * kBlockM * 4;
  // Q/dO by TMA (with the dQ reduce-adds): the two stages' "full" mbarriers.
  static constexpr int kSmemBar = kSmemDqStage + (kThreads / 32) * kDqBoxBytes;
  // Deterministic mode, rotated walk: thread 0's "gave up waiting" flag (kernel_ks.cuh).
  static constexpr int kSmemDetFree = kSmemBar + 2 * 8;
  static constexpr int kSmemBytes = kSmemDetFree + 8 + 1024;  // + alignment slack
  static_assert(kSmemBytes <= 227 * 1024, "fits an H100/H200 SM's shared memory");
  static_assert(QTile::kBytes % 1024 == 0 && KTile::kBytes % 1024 == 0 && PTile::kBytes % 1024 == 0,
                "1024-byte aligned tiles");
  static_assert((kWgKeys * 128) % 1024 == 0, "a warpgroup's key slice starts on a swizzle atom");
  static_assert(kSmemDqStage % 1024 == 0, "dQ staging boxes on swizzle atoms");
};

}  // namespace flashkit::bwd_sm90
