// Shared-memory tile layout for Hopper wgmma operands: the 128-byte swizzle.
//
// A kRows x kCols tile (16-bit elements) is stored as kCols / 64 column blocks ("atom
// columns"), each kRows rows of 128 bytes; block c holds columns [64c, 64c + 64). Within a
// block, the 16-byte chunk j of row r is stored at chunk position j ^ (r % 8). This is the
// layout wgmma reads with swizzle mode "128B": the XOR is applied by the hardware to the
// absolute shared address, so every tile must start on a 1024-byte boundary (8 rows x 128 B,
// one swizzle atom). Conflict-free for 16-byte cp.async writes (a warp's 32 chunks cover
// 4 rows x 8 distinct chunk positions) and for the 4-byte epilogue writes (8 rows at one
// column chunk land on 8 distinct chunk positions).
#pragma once

#include <cstdint>

namespace flashkit::tiles {

template <typename T, int kRows_, int kCols_>
struct Swizzle128Tile {
  static_assert(sizeof(T) == 2, "16-bit elements: 64 per 128-byte row");
  static constexpr int kRows = kRows_;
  static constexpr int kCols = kCols_;
  static constexpr int kAtomCols = 64;                 // elements per 128-byte row
  static constexpr int kBlocks = kCols / kAtomCols;    // atom columns
  static constexpr int kBlockBytes = kRows * 128;
  static constexpr int kBytes = kBlocks * kBlockBytes;
  // Copies may step through rows with a constant element stride only in steps of 8 rows
  // (the swizzle pattern repeats every 8 rows); see tiles::TileCopyPlan.
  static constexpr int kRowPeriod = 8;
  static constexpr int kStride = kAtomCols;            // elements between rows of one block
  static_assert(kCols % kAtomCols == 0, "whole 128-byte atom columns");
  static_assert(kRows % 8 == 0, "whole 8-row swizzle atoms");

  // Element offset of (row, col); col must be a multiple of 2 (4-byte accesses) or 8.
  __device__ __forceinline__ static constexpr int offset(int row, int col) {
    return (col / kAtomCols) * (kRows * kAtomCols) + row * kAtomCols +
           ((((col % kAtomCols) / 8) ^ (row % 8)) * 8) + (col % 8);
  }
};

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
