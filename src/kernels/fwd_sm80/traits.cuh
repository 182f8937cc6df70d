// Tile shapes of the portable (sm_80+) forward kernel and the shared-memory plan.
//
// A CTA owns kBlockM query rows of one (batch, head) and streams K/V in tiles of kBlockN
// keys. Each of the kNWarps warps owns kWarpM = kBlockM / kNWarps consecutive rows
// (split-Q: no cross-warp reduction), i.e. kMTiles = kWarpM / 16 MMA row tiles. Two
// row tiles per warp reuse every K/V fragment loaded from shared memory twice, which
// halves shared-memory traffic per MMA; the price is registers (O and S accumulators).
#pragma once

#include "tiles/smem_swizzle.cuh"
#include "tiles/smem_tile.cuh"

namespace flashkit::fwd_sm80 {

template <typename T_, int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_,
          bool kConditionalRescale_ = true, int kMinBlocks_ = 1>
struct FwdTraits {
  using T = T_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kNWarps = kNWarps_;
  static constexpr int kThreads = kNWarps * 32;
  // See OnlineSoftmax: skip rescaling O unless a row max grew by more than 2^8.
  static constexpr bool kConditionalRescale = kConditionalRescale_;
  static constexpr int kMinBlocks = kMinBlocks_;
  static constexpr int kWarpM = kBlockM / kNWarps;
  static constexpr int kMTiles = kWarpM / 16;     // 16-row MMA tiles per warp
  static constexpr int kNTiles = kBlockN / 8;     // 8-key MMA tiles of S
  static constexpr int kDTiles = kHeadDim / 8;    // 8-column MMA tiles of O
  static constexpr int kKSteps = kHeadDim / 16;   // k16 steps of Q K^T
  static constexpr int kPSteps = kBlockN / 16;    // k16 steps of P V

  static_assert(kWarpM % 16 == 0 && kMTiles >= 1, "a warp owns whole 16-row MMA tiles");
  static_assert(kBlockN % 16 == 0 && kHeadDim % 16 == 0, "MMA k-steps of 16");

  // 128-byte swizzle at D 64/128, padded rows at D 96/192/256 (tiles::LdmatrixTile): with
  // padded rows a quarter-warp's 16-byte copies of one 128-byte global line straddle two
  // shared lines and go out as two L2 requests (docs/kernels/decode.md, v9).
  static constexpr int kCopyRowStep = kThreads / (kHeadDim / 8);  // rows per copy pass
  using QTile = tiles::LdmatrixTile<T, kBlockM, kHeadDim, kCopyRowStep>;  // reused for O in the epilogue
  using KTile = tiles::LdmatrixTile<T, kBlockN, kHeadDim, kCopyRowStep>;
  using VTile = tiles::LdmatrixTile<T, kBlockN, kHeadDim, kCopyRowStep>;

  // Shared-memory plan: [Q | K | V] (one K and one V buffer: V(n) loads during QK^T and
  // K(n-1) during PV, as FA2 on sm80); its size is the dynamic shared memory of a CTA.
  static constexpr int kSmemQ = 0;
  static constexpr int kSmemK = kSmemQ + QTile::kBytes;
  static constexpr int kSmemV = kSmemK + KTile::kBytes;
  static constexpr int kSmemBytes = kSmemV + VTile::kBytes;
  static_assert(kSmemK % 128 == 0 && kSmemV % 128 == 0, "tiles on 128-byte lines (swizzle step_addr)");
};

}  // namespace flashkit::fwd_sm80
