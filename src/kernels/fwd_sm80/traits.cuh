// Tile shapes of the portable (sm_80+) forward kernel and the shared-memory plan.
//
// A CTA owns kBlockM query rows of one (batch, head) and streams K/V in tiles of kBlockN
// keys. Each of the kNWarps warps owns kWarpM = kBlockM / kNWarps consecutive rows
// (split-Q: no cross-warp reduction), i.e. kMTiles = kWarpM / 16 MMA row tiles. Two
// row tiles per warp reuse every K/V fragment loaded from shared memory twice, which
// halves shared-memory traffic per MMA; the price is registers (O and S accumulators).
#pragma once

#include "tiles/smem_tile.cuh"

namespace flashkit::fwd_sm80 {

template <typename T_, int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_,
          bool kConditionalRescale_ = true, bool kWarpPairs_ = false, int kMinBlocks_ = 1>
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
  // Warp pairs (large head dims): two warps share kWarpM rows. In Q K^T each takes half
  // of the key tile, in P V each takes half of the head dim, so every K and V fragment read
  // from shared memory feeds two row tiles while O stays at D/2 columns per warp. The
  // pair exchanges row maxima (a named barrier) and its halves of P (shared memory).
  static constexpr bool kWarpPairs = kWarpPairs_;
  static constexpr int kRowGroups = kWarpPairs ? kNWarps / 2 : kNWarps;
  static constexpr int kWarpM = kBlockM / kRowGroups;
  static constexpr int kWarpKeys = kWarpPairs ? kBlockN / 2 : kBlockN;  // keys of S per warp
  static constexpr int kWarpD = kWarpPairs ? kHeadDim / 2 : kHeadDim;    // O columns per warp
  static constexpr int kMTiles = kWarpM / 16;     // 16-row MMA tiles per warp
  static constexpr int kNTiles = kWarpKeys / 8;   // 8-key MMA tiles of S per warp
  static constexpr int kDTiles = kWarpD / 8;      // 8-column MMA tiles of O per warp
  static constexpr int kKSteps = kHeadDim / 16;   // k16 steps of Q K^T
  static constexpr int kPSteps = kBlockN / 16;    // k16 steps of P V (the whole key tile)
  static constexpr int kOwnPSteps = kWarpKeys / 16;  // ... of which this warp computed P
  static_assert(kWarpM % 16 == 0 && kMTiles >= 1, "a warp owns whole 16-row MMA tiles");
  static_assert(kBlockN % 16 == 0 && kHeadDim % 16 == 0, "MMA k-steps of 16");
  static_assert(!kWarpPairs || (kNWarps % 2 == 0 && kWarpKeys % 16 == 0 && kWarpD % 16 == 0),
                "warp pairs split keys and head dim in whole k16/n16 steps");

  using QTile = tiles::PaddedTile<T, kBlockM, kHeadDim>;  // reused for O in the epilogue
  using KTile = tiles::PaddedTile<T, kBlockN, kHeadDim>;
  using VTile = tiles::PaddedTile<T, kBlockN, kHeadDim>;

  // Shared-memory plan: [Q | K | V] (one K and one V buffer: V(n) loads during QK^T and
  // K(n-1) during PV, as FA2 on sm80); its size is the dynamic shared memory of a CTA.
  static constexpr int kSmemQ = 0;
  static constexpr int kSmemK = kSmemQ + QTile::kBytes;
  static constexpr int kSmemV = kSmemK + KTile::kBytes;
  // Warp pairs: each warp's P (kWarpM x kWarpKeys, padded rows) and its row maxima.
  using PTile = tiles::PaddedTile<T, kWarpM, kWarpKeys>;
  static constexpr int kSmemP = kSmemV + VTile::kBytes;
  static constexpr int kSmemMax = kSmemP + (kWarpPairs ? kNWarps * PTile::kBytes : 0);
  static constexpr int kSmemBytes = kSmemMax + (kWarpPairs ? kNWarps * kWarpM * 4 : 0);
};

}  // namespace flashkit::fwd_sm80
