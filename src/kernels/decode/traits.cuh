// Tile shapes and the shared-memory plan of the paged-decode split kernel.
//
// A CTA works on one item (sequence b, head-row group hr, KV token range). Warp roles:
//   - 4 consumer warps. The kRows query rows of the item (16 or 32: the GQA heads of one
//     KV head times the s_q new tokens) are the M dimension of m16n8k16 MMAs. Each
//     consumer warp takes whole stages of kStageTokens = 16 keys (stage j goes to warp
//     j % 4) and keeps its own online-softmax state; the 4 states are merged once at the
//     end. No CTA-wide barrier in the loop.
//   - 1 producer warp: block-table lookups (the entry of stage j+1 loaded while stage j is
//     issued), per-token offsets, cp.async of K and V rows into a ring of kStages stages,
//     completion signalled on the stage's `full` mbarrier; it reuses a stage once its
//     consumer arrived on the stage's `empty` mbarrier.
// Small stages make most of the ring bytes in flight at any time (kStages - 4 or more),
// which is what a memory-bound kernel needs (docs/kernels/decode.md, v7).
#pragma once

#include "tiles/smem_tile.cuh"

namespace flashkit::decode {

template <typename T_, int kHeadDim_, int kMTiles_, int kStages_>
struct DecodeTraits {
  using T = T_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kMTiles = kMTiles_;     // 16-row MMA tiles of query rows
  static constexpr int kRows = 16 * kMTiles;   // query rows of one item
  static constexpr int kStages = kStages_;     // ring depth (stages of 16 tokens)
  static constexpr int kStageTokens = 16;      // one k16 step of P V per stage
  static constexpr int kConsumers = 4;         // consumer warps
  static constexpr int kConsumerThreads = kConsumers * 32;
  static constexpr int kThreads = kConsumerThreads + 32;  // + the producer warp
  static constexpr int kKSteps = kHeadDim / 16;           // k16 steps of Q K^T
  static constexpr int kDTiles = kHeadDim / 8;            // n8 tiles of O
  static constexpr int kChunksPerRow = kHeadDim * int(sizeof(T)) / 16;  // 16-byte chunks
  static_assert(kHeadDim % 16 == 0, "MMA k-steps of 16");
  static_assert(kChunksPerRow <= 32 && 32 % kChunksPerRow == 0, "a producer pass covers whole rows");
  static_assert(kStages >= kConsumers + 1, "every consumer needs a stage and the producer one more");

  using QTile = tiles::PaddedTile<T, kRows, kHeadDim>;
  using KVTile = tiles::PaddedTile<T, kStageTokens, kHeadDim>;

  // fp32 rows of the end-of-CTA merge buffer (padded by 4 floats: rows stay 16-byte
  // aligned and the fragment writes of 8 rows spread over more banks).
  static constexpr int kMergeStride = kHeadDim + 4;

  // Shared-memory plan: [Q | K ring | V ring | valid masks | full | empty | stats].
  static constexpr int kSmemQ = 0;
  static constexpr int kSmemK = kSmemQ + QTile::kBytes;
  static constexpr int kSmemV = kSmemK + kStages * KVTile::kBytes;
  static constexpr int kSmemValid = kSmemV + kStages * KVTile::kBytes;  // uint32 [kStages]
  static constexpr int kSmemFull = ((kSmemValid + kStages * 4 + 7) / 8) * 8;  // uint64 [kStages]
  static constexpr int kSmemEmpty = kSmemFull + kStages * 8;                 // uint64 [kStages]
  static constexpr int kSmemStats = kSmemEmpty + kStages * 8;  // float [2][kConsumers][kRows]
  static constexpr int kSmemBytes = kSmemStats + 2 * kConsumers * kRows * 4;
  // The merge buffer fp32 [kConsumers][kRows][kMergeStride] reuses the K/V rings.
  static constexpr int kMergeBytes = kConsumers * kRows * kMergeStride * 4;
  static_assert(kMergeBytes <= 2 * kStages * KVTile::kBytes, "merge buffer must fit in the K/V rings");
};

}  // namespace flashkit::decode
