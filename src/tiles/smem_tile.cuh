// Shared-memory tile layout: row-major with every row padded by 16 bytes.
//
// Why padding and not an XOR swizzle: the pad works for every head dim we build
// (64, 96, 128, 192, 256), including 96 and 192 whose 192/384-byte rows don't split into
// whole 128-byte swizzle atoms. With a row stride of (kCols + 8) elements, the 8 row
// addresses of one ldmatrix 8x8 matrix (same column, consecutive rows) fall in 8 distinct
// 16-byte bank groups for all those widths, so ldmatrix, the 16-byte cp.async writes and
// the 4-byte epilogue writes are all bank-conflict-free. Cost: 16 bytes per row (6% at D=128).
#pragma once

#include <cstdint>

namespace flashkit::tiles {

template <typename T, int kRows_, int kCols_>
struct PaddedTile {
  static constexpr int kRows = kRows_;
  static constexpr int kCols = kCols_;
  static constexpr int kPad = 16 / sizeof(T);
  static constexpr int kStride = kCols + kPad;  // elements between rows
  static constexpr int kElems = kRows * kStride;
  static constexpr int kBytes = kElems * static_cast<int>(sizeof(T));
  static constexpr int kRowPeriod = 1;  // rows are uniform: any row step keeps the layout
  static_assert(kCols % 8 == 0, "rows are moved in 16-byte chunks");

  __device__ __forceinline__ static constexpr int offset(int row, int col) {
    return row * kStride + col;
  }
  // Shared address of (row0 + row_step, col0 + col_step) from a lane's (row0, col0) address
  // (the same call as Swizzle128Tile::step_addr; here always a plain add).
  __device__ __forceinline__ static uint32_t step_addr(uint32_t lane_addr, int row_step, int col_step) {
    return lane_addr + uint32_t(offset(row_step, col_step) * int(sizeof(T)));
  }
};

}  // namespace flashkit::tiles
