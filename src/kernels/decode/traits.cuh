// Tile shapes and the shared-memory plan of the paged-decode split kernel.
//
// A CTA = 4 warps works on one item (sequence b, head-row group hr, KV chunk). The kRows
// query rows of the item (16 or 32: the GQA heads of one KV head times the s_q new
// tokens) are the M dimension of m16n8k16 MMAs; each KV tile of kBlockN = 64 tokens is
// split between the warps, 16 keys each (split-K inside the CTA: rows are few, keys are
// many), and the 4 partial softmax states are merged once at the end. K/V tiles stream
// through a kStages-deep cp.async ring; the per-token page offsets of each tile are
// computed one tile ahead from the block table (whose entries are loaded two tiles
// ahead), so the pointer chase never sits on the critical path of the loads.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/decode_params.h"
#include "tiles/smem_swizzle.cuh"
#include "tiles/smem_tile.cuh"

// FLASHKIT_DECODE_OFF32 (tuning switch, the narrow 8-bit kernels; decode.md "32-bit offset rings"): 1 = the per-token
// offset rings hold 32-bit offsets (K / V rows in 16-byte units, scales in elements; DecodeParams::off32 says whether a
// call's cache fits, else the launch takes the 16-row form) instead of 64-bit ones.
#ifndef FLASHKIT_DECODE_OFF32
#define FLASHKIT_DECODE_OFF32 1
#endif

namespace flashkit::decode {

// kQuant: 0 = the cache holds T; 1 = int8, 2 = fp8 e4m3 (one byte per value, fp32 scales
// per token and head, dequantized in registers into the MMA operands).
// kNarrow (items of at most 8 query rows; the 8-bit caches, and the 16-bit ones behind FLASHKIT_DECODE_NARROW16):
// the keys are the MMAs' M dimension and the rows their N (S^T = K Q^T, O^T = V^T P^T with n8 row tiles), half the
// MMAs of the 16-row form (decode.md "The narrow form of the 8-bit kernels", "The narrow form for the 16-bit
// caches").
template <typename T_, int kHeadDim_, int kMTiles_, int kStages_, int kBlockN_ = 64, int kQuant_ = 0,
          bool kNarrow_ = false>
struct DecodeTraits {
  using T = T_;
  static constexpr int kQuant = kQuant_;
  using TC = std::conditional_t<kQuant == 0, T, uint8_t>;  // cache element (storage) type
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kMTiles = kMTiles_;     // 16-row MMA tiles of query rows
  static constexpr int kRows = 16 * kMTiles;   // query rows of one item
  static constexpr int kStages = kStages_;     // K/V tiles in flight
  static constexpr int kBlockN = kBlockN_;     // tokens per K/V tile
  static constexpr int kNWarps = 4;
  static constexpr int kThreads = kNWarps * 32;
  static constexpr int kWarpKeys = kBlockN / kNWarps;  // keys per warp per tile
  static constexpr int kNTiles = kWarpKeys / 8;        // n8 tiles of S per warp
  static constexpr int kPSteps = kWarpKeys / 16;       // k16 steps of P V per warp
  static constexpr int kKSteps = kHeadDim / 16;        // k16 steps of Q K^T
  static constexpr int kDTiles = kHeadDim / 8;         // n8 tiles of O
  static constexpr int kOffSlots = kStages + 1;        // offset ring: one more than the data ring
  static_assert(kWarpKeys % 16 == 0, "each warp takes whole k16 steps of keys");
  static constexpr int kMetaWarps = kBlockN / 32;      // warps that compute a tile's offsets
  static_assert(kHeadDim % 16 == 0, "MMA k-steps of 16");
  static constexpr bool kNarrow = kNarrow_;
  static_assert(!kNarrow || (kMTiles == 1 && kWarpKeys == 16 && kHeadDim % 32 == 0),
                "narrow form: one 16-row item tile, 16 keys per warp");
  // 32-bit offset rings (the 8-bit narrow kernels; needs params.off32)
  static constexpr bool kOff32 = kNarrow && kQuant != 0 && FLASHKIT_DECODE_OFF32 != 0;

  using QTile = tiles::PaddedTile<T, kRows, kHeadDim>;
  // K/V stages: swizzled where rows are whole 128-byte lines (padded rows cost 1.5x the L2
  // sectors: decode.md v9); 8-bit D = 64 rows are 64 bytes and stay padded.
  using KVTile = tiles::LdmatrixTile<TC, kBlockN, kHeadDim>;

  // fp32 rows of the end-of-CTA merge buffer (padded by 4 floats: rows stay 16-byte
  // aligned and the fragment writes of 8 rows spread over more banks).
  static constexpr int kMergeStride = kHeadDim + 4;

  // Shared-memory plan: [Q | K ring | V ring | K offsets | V offsets | bad flags | stats].
  static constexpr int kSmemQ = 0;
  static constexpr int kSmemK = kSmemQ + QTile::kBytes;
  static constexpr int kSmemV = kSmemK + kStages * KVTile::kBytes;
  static constexpr int kSmemOffK = kSmemV + kStages * KVTile::kBytes;  // int64 [kOffSlots][kBlockN]
  static constexpr int kSmemOffV = kSmemOffK + kOffSlots * kBlockN * 8;
  static constexpr int kSmemBad = kSmemOffV + kOffSlots * kBlockN * 8;  // int [kOffSlots][kMetaWarps]
  static constexpr int kSmemStats = kSmemBad + ((kOffSlots * kMetaWarps * 4 + 15) / 16) * 16;
  // Quantized caches: per-token scale offsets (int64 [2][kOffSlots][kBlockN]) and the scales
  // of each stage (fp32 [kStages][2][kBlockN]); empty otherwise.
  static constexpr int kSmemOffScale = kSmemStats + 2 * kNWarps * kRows * 4;
  static constexpr int kSmemScale = kSmemOffScale + (kQuant ? 2 * kOffSlots * kBlockN * 8 : 0);
  static constexpr int kSmemEnd = kSmemScale + (kQuant ? kStages * 2 * kBlockN * 4 : 0);
  // float [2][kNWarps][kRows]: each warp's row max and row sum
  static constexpr int kSmemBytes = kSmemEnd;
  // The merge buffer fp32 [kNWarps][kRows][kMergeStride] reuses the K/V rings.
  static constexpr int kMergeBytes = kNWarps * kRows * kMergeStride * 4;
  // (it may run on into the offset rings and flags, dead by then; not into the stats)
  static_assert(kMergeBytes <= kSmemStats - kSmemK, "merge buffer must fit in front of the stats");
  // The fused merge (decode_params.h) stages its partials in the same freed region.
  static_assert((kFusedMergeFloats + kFusedMergeRows + 32) * 4 <= kSmemStats - kSmemK,
                "fused-merge staging must fit in front of the stats");
  static_assert(kSmemK % 128 == 0 && KVTile::kBytes % 128 == 0, "K/V stages on 128-byte lines (swizzle)");
};

}  // namespace flashkit::decode
