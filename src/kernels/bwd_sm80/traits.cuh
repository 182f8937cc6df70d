// Tile shapes of the portable (sm_80+) backward kernel and its shared-memory plan.
//
// A CTA owns kBlockN keys of one (batch, KV head) and walks the query row blocks of every
// query head that reads that KV head (GQA), kBlockM rows at a time. Warps are laid out as
// kWarpsN x kWarpsD: warp (wn, wd) computes S^T and dP^T for keys 16 wn .. 16 wn + 15
// against all kBlockM rows (the kWarpsD warps of one key slab compute the same S^T: that
// duplicate work buys registers at large head dims) and accumulates columns
// [wd * kSliceD, (wd + 1) * kSliceD) of dK and dV for those keys in registers, for the
// whole CTA lifetime. dQ = dS K needs all keys, so dS^T goes through shared memory and
// the dQ product is laid out separately (kDqWarpsM x kDqWarpsD warps over kBlockM x D).
#pragma once

#include "tiles/smem_tile.cuh"

namespace flashkit::bwd_sm80 {

template <typename T_, int kHeadDim_, int kBlockM_, int kBlockN_, int kWarpsD_, int kMinBlocks_ = 1>
struct BwdTraits {
  using T = T_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kWarpsD = kWarpsD_;
  static constexpr int kMinBlocks = kMinBlocks_;
  static constexpr int kWarpsN = kBlockN / 16;
  static constexpr int kNWarps = kWarpsN * kWarpsD;
  static constexpr int kThreads = kNWarps * 32;
  static constexpr int kSliceD = kHeadDim / kWarpsD;  // dK/dV columns of one warp
  static constexpr int kSliceTiles = kSliceD / 8;     // n8 MMA tiles of them
  static constexpr int kMTiles = kBlockM / 8;         // n8 tiles of S^T (query rows)
  static constexpr int kDSteps = kHeadDim / 16;       // k16 steps of S^T = K Q^T, dP^T = V dO^T
  static constexpr int kMSteps = kBlockM / 16;        // k16 steps of dV += P^T dO, dK += dS^T Q
  static constexpr int kNSteps = kBlockN / 16;        // k16 steps of dQ = dS K
  static constexpr int kDqWarpsM = kNWarps < kBlockM / 16 ? kNWarps : kBlockM / 16;
  static constexpr int kDqRowTiles = (kBlockM / 16) / kDqWarpsM;  // 16-row tiles per warp
  static constexpr int kDqWarpsD = kNWarps / kDqWarpsM;
  static constexpr int kDqCols = kHeadDim / kDqWarpsD;
  static constexpr int kDqTiles = kDqCols / 8;

  static_assert(kBlockN % 16 == 0 && kBlockM % 16 == 0 && kHeadDim % 16 == 0, "k16 MMA steps");
  static_assert(kSliceD % 16 == 0 && kDqCols % 16 == 0, "B fragments come in pairs of n8 tiles");
  static_assert(kNWarps % kDqWarpsM == 0 && (kBlockM / 16) % kDqWarpsM == 0, "dQ warp layout");
  static_assert(kHeadDim % kWarpsD == 0 && kHeadDim % kDqWarpsD == 0, "column slices");
  static_assert(kBlockM % 32 == 0, "dq semaphores are counted in units of 32 rows");

  using QTile = tiles::PaddedTile<T, kBlockM, kHeadDim>;   // also dO
  using KTile = tiles::PaddedTile<T, kBlockN, kHeadDim>;   // also V, dK, dV (epilogue)
  using DsTile = tiles::PaddedTile<T, kBlockN, kBlockM>;   // dS^T [key][row]

  static constexpr int kSmemK = 0;
  static constexpr int kSmemV = kSmemK + KTile::kBytes;
  static constexpr int kSmemQ = kSmemV + KTile::kBytes;
  static constexpr int kSmemDo = kSmemQ + QTile::kBytes;
  static constexpr int kSmemDs = kSmemDo + QTile::kBytes;
  static constexpr int kSmemLse = kSmemDs + DsTile::kBytes;  // fp32 [kBlockM], base-2 LSE
  static constexpr int kSmemDelta = kSmemLse + kBlockM * 4;  // fp32 [kBlockM]
  static constexpr int kSmemBytes = kSmemDelta + kBlockM * 4;
};

}  // namespace flashkit::bwd_sm80
