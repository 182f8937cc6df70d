// Shared-memory tile layout: the 128-byte swizzle.
//
// A kRows x kCols tile is stored as "atom columns" of 128 bytes (64 16-bit or 128 8-bit
// elements): block c holds columns [c * kAtomCols, (c + 1) * kAtomCols), kRows rows of 128
// bytes each. Within a block, the 16-byte chunk j of row r is stored at chunk position
// j ^ (r % 8). For 16-bit elements this is the layout Hopper's wgmma reads with swizzle mode
// "128B": the XOR is applied by the hardware to the absolute shared address, so such a tile
// must start on a 1024-byte boundary (8 rows x 128 B, one swizzle atom). Conflict-free for
// 16-byte cp.async writes (a warp's 32 chunks cover 4 rows x 8 distinct chunk positions) and
// for the 4-byte epilogue writes (8 rows at one column chunk land on 8 distinct positions).
// Unlike a padded row-major tile, every 8 consecutive 16-byte chunks of a row fill one
// aligned 128-byte line of shared memory, so a quarter-warp's 16-byte cp.async copies of a
// 128-byte global line are one request (a padded row starts 16 r bytes into a line, and the
// copy is split in two that both fetch the straddled sector: docs/kernels/decode.md).
#pragma once

#include <cstdint>
#include <type_traits>

#include "tiles/smem_tile.cuh"

namespace flashkit::tiles {

template <typename T, int kRows_, int kCols_>
struct Swizzle128Tile {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2, "8- or 16-bit elements");
  static constexpr int kRows = kRows_;
  static constexpr int kCols = kCols_;
  static constexpr int kChunkElems = 16 / int(sizeof(T));  // elements per 16-byte chunk
  static constexpr int kAtomCols = 128 / int(sizeof(T));   // elements per 128-byte row
  static constexpr int kBlocks = kCols / kAtomCols;        // atom columns
  static constexpr int kBlockBytes = kRows * 128;
  static constexpr int kElems = kBlocks * kRows * kAtomCols;
  static constexpr int kBytes = kBlocks * kBlockBytes;
  // Copies may step through rows with a constant element stride only in steps of 8 rows
  // (the swizzle pattern repeats every 8 rows); see tiles::TileCopyPlan.
  static constexpr int kRowPeriod = 8;
  static constexpr int kStride = kAtomCols;            // elements between rows of one block
  static_assert(kCols % kAtomCols == 0, "whole 128-byte atom columns");
  static_assert(kRows % 8 == 0, "whole 8-row swizzle atoms");

  // Element offset of (row, col); col must be a multiple of 2 (4-byte accesses) or of a chunk.
  __device__ __forceinline__ static constexpr int offset(int row, int col) {
    return (col / kAtomCols) * (kRows * kAtomCols) + row * kAtomCols +
           ((((col % kAtomCols) / kChunkElems) ^ (row % 8)) * kChunkElems) + (col % kChunkElems);
  }

  // Shared address of (row0 + row_step, col0 + col_step) from the address `lane_addr` of a
  // lane's (row0, col0), with compile-time steps: one XOR and one add. Holds when the tile
  // starts on a 128-byte boundary, row_step is a multiple of 8, col_step a multiple of a
  // chunk, and the lane's chunk within its atom (col0 % kAtomCols / kChunkElems) shares no
  // set bit with the step's chunk (col_step % kAtomCols / kChunkElems) and their sum stays
  // in the atom (e.g. ldmatrix lanes at chunk 0 or 1 stepping by 16 16-bit columns):
  // then chunk + step = chunk ^ step, and the XOR with row0 % 8 commutes.
  __device__ __forceinline__ static uint32_t step_addr(uint32_t lane_addr, int row_step, int col_step) {
    return (lane_addr ^ uint32_t(((col_step % kAtomCols) / kChunkElems) * 16)) +
           uint32_t((col_step / kAtomCols) * kBlockBytes + row_step * 128);
  }
};

// The layout for tiles written by 16-byte cp.async copies and read by ldmatrix (the sm80
// kernels): the 128-byte swizzle where a row is whole 128-byte lines (16-bit D 64/128/256,
// 8-bit D >= 128), padded rows otherwise (D 96/192 rows are 1.5 lines). Both offer offset()
// and step_addr(); kernels that use step_addr keep to its conditions (see above).
// kCopyRowStep: the row step of the kernel's copy passes when they walk the tile at a
// constant stride (tiles::TileCopyPlan: threads / chunks per row); the swizzle needs a
// multiple of its 8-row period there (fwd_sm80 at D 256 on 128 threads steps 4 rows: padded).
template <typename T, int kRows, int kCols, int kCopyRowStep = 8>
using LdmatrixTile =
    std::conditional_t<(kCols * int(sizeof(T))) % 128 == 0 && kRows % 8 == 0 && kCopyRowStep % 8 == 0,
                       Swizzle128Tile<T, kRows, kCols>, PaddedTile<T, kRows, kCols>>;

// The first kCols_ columns of a tile, in the tile's own layout: what the copies in
// tile_copy.cuh move when a tile is wider than the data (a head dim padded up to whole
// 64-column atoms, e.g. 96 -> 128; the padding columns stay as the kernel set them).
template <class Tile, int kCols_>
struct ColumnPrefix {
  static constexpr int kRows = Tile::kRows;
  static constexpr int kCols = kCols_;
  static constexpr int kRowPeriod = Tile::kRowPeriod;
  static constexpr int kStride = Tile::kStride;
  static_assert(kCols_ % 8 == 0 && kCols_ <= Tile::kCols, "whole 16-byte chunks inside the tile");
  __device__ __forceinline__ static constexpr int offset(int row, int col) { return Tile::offset(row, col); }
};

}  // namespace flashkit::tiles
