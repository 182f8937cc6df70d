// Tile shapes and shared-memory plan of the Hopper (sm_90a) forward kernel.
//
// A CTA owns kBlockM = 128 query rows; warpgroup w (of 2) owns rows [64w, 64w + 64) and
// issues its own wgmmas (m64n64k16) for them. K/V stream in tiles of kBlockN keys through
// shared-memory stages filled by cp.async. All operands use the 128-byte
// swizzle that wgmma reads directly from shared memory (tiles/smem_swizzle.cuh).
#pragma once

#include "prims/wgmma.cuh"
#include "tiles/smem_swizzle.cuh"

namespace flashkit::fwd_sm90 {

// K streams through kKStages stages, V through 2 (see the pipeline in kernel.cuh).
// kMinBlocks: CTAs per SM to fit (launch bounds; 2 caps registers at 128 per thread).
// kProducer: a third warpgroup (warps 8..11, after the two consumer warpgroups) only
// issues the TMA loads of K/V tiles and gives its registers to the consumers (setmaxnreg
// 24 / 240: 128 x 24 + 256 x 240 = 64512 of 65536). ptxas compiles the kernel at 168
// registers (3 warps per register-file quadrant) and the consumers' region at 240 --
// unless that region contains a trap (then everything stays at 168 and spills:
// scripts/dev/setmaxnreg_probe.cu).
//
// kWarpGroups_ = 3 (d64 only, the persistent kernel: fwd_sm90.md "d64 with three consumer
// warpgroups"): 192-row tiles, FlashAttention-3's d64 shape; the turns go round the three
// warpgroups, V gets as many stages as K, and the registers split 32 / 160 (128 x 32 +
// 384 x 160 = 65536).
template <typename T_, int kHeadDim_, int kBlockN_, int kKStages_ = 3, int kMinBlocks_ = 1, bool kProducer_ = false,
          int kWarpGroups_ = 2>
struct FwdTraits {
  using T = T_;
  static constexpr int kHeadDim = kHeadDim_;
  // Tiles and MMAs use the head dim rounded up to whole 64-column swizzle atoms (96 -> 128):
  // the padding columns of Q and K are zeroed once, so they add nothing to Q K^T, and O's
  // padding columns are computed but never stored.
  static constexpr int kHeadDimPadded = (kHeadDim + 63) / 64 * 64;
  static constexpr bool kPadded = kHeadDimPadded != kHeadDim;
  static constexpr int kWarpGroups = kWarpGroups_;
  static_assert(kWarpGroups == 2 || (kWarpGroups == 3 && kProducer_ && kMinBlocks_ == 1),
                "three consumer warpgroups: the producer (persistent) kernel only");
  static constexpr int kBlockM = 64 * kWarpGroups;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kKStages = kKStages_;
  static constexpr int kMinBlocks = kMinBlocks_;
  static constexpr int kVStages = kWarpGroups == 3 ? kKStages_ : 2;
  static constexpr bool kProducer = kProducer_;
  static constexpr int kConsumerThreads = 128 * kWarpGroups;               // the MMA warpgroups
  static constexpr int kThreads = kConsumerThreads + (kProducer ? 128 : 0);  // the launch
  static constexpr int kProducerRegs = kWarpGroups == 3 ? 32 : 24;
  static constexpr int kConsumerRegs = kWarpGroups == 3 ? 160 : 240;
  static_assert(!kProducer_ || prims::setmaxnreg_split_fits(kThreads, kProducerRegs + kWarpGroups * kConsumerRegs),
                "setmaxnreg's split fits the registers the CTA is launched with");
  static_assert(!kProducer || kMinBlocks_ == 1, "the producer design takes the whole register file");
  static constexpr int kNChunks = kBlockN / 64;   // n64 wgmmas per k-step of Q K^T
  static constexpr int kDChunks = kHeadDimPadded / 64;  // n64 wgmmas per k-step of P V
  static constexpr int kNTiles = kBlockN / 8;     // 8-key column tiles of S (per lane: 4 floats)
  static constexpr int kDTiles = kHeadDimPadded / 8;    // 8-column tiles of O
  // k16 steps of Q K^T: the data columns only (at D = 96 the last two steps of the padded
  // tile would multiply zeros; their offsets land in the second atom column as usual).
  static constexpr int kKSteps = kHeadDim / 16;
  static constexpr int kPSteps = kBlockN / 16;    // k16 steps of P V
  static_assert(kHeadDim % 16 == 0 && kBlockN % 64 == 0, "k16 steps; whole 128-byte swizzle atoms of keys");

  using QTile = tiles::Swizzle128Tile<T, kBlockM, kHeadDimPadded>;  // reused for O in the epilogue
  using KTile = tiles::Swizzle128Tile<T, kBlockN, kHeadDimPadded>;
  using VTile = tiles::Swizzle128Tile<T, kBlockN, kHeadDimPadded>;
  // What the copies move between global and shared memory: the kHeadDim data columns.
  using QTileIO = tiles::ColumnPrefix<QTile, kHeadDim>;
  using KTileIO = tiles::ColumnPrefix<KTile, kHeadDim>;
  using VTileIO = tiles::ColumnPrefix<VTile, kHeadDim>;

  // [Q | K stages | V stages | mbarriers], every tile on a 1024-byte boundary (the kernel
  // aligns the base; kSmemBytes includes the slack).
  static constexpr int kSmemQ = 0;
  static constexpr int kSmemK = kSmemQ + QTile::kBytes;
  static constexpr int kSmemV = kSmemK + kKStages * KTile::kBytes;
  static constexpr int kSmemBar = kSmemV + kVStages * VTile::kBytes;
  // full/empty per stage, and (TMA variant) the "full" barriers of tile 0's cp.async copies
  static constexpr int kNumBars = 2 * kKStages + 2 * kVStages + 2;
  static constexpr int kSmemBytes = kSmemBar + 8 * kNumBars + 1024;
  static_assert(QTile::kBytes % 1024 == 0 && KTile::kBytes % 1024 == 0, "1024-byte aligned tiles");
};

// The same tile configuration with the producer warpgroup (the TMA variant).
template <class Tr>
using WithProducer =
    FwdTraits<typename Tr::T, Tr::kHeadDim, Tr::kBlockN, Tr::kKStages, Tr::kMinBlocks, true, Tr::kWarpGroups>;

}  // namespace flashkit::fwd_sm90
