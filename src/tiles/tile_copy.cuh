// Whole-CTA copies of a row-major tile between global and shared memory in 16-byte
// chunks: consecutive threads take consecutive chunks of a row, so global accesses are
// coalesced 128-bit transactions.
#pragma once

#include <cstdint>

#include "prims/cp_async.cuh"
#include "prims/opaque.cuh"
#include "tiles/smem_tile.cuh"
#include "tiles/tile_copy_plan.h"

namespace flashkit::tiles {

// Thread -> chunk assignment of the copies below (tile_copy_plan.h: the arithmetic, host-tested).
// Keeping one row pointer per thread (instead of an address per chunk) matters: the
// per-chunk 64-bit addresses are loop-invariant and would otherwise be hoisted out of
// the key loop, pinning dozens of registers.
template <typename Tile, int kThreads, typename T>
struct TileCopyPlan : CopyPlanShape<Tile::kRows, Tile::kCols, Tile::kRowPeriod, kThreads, int(sizeof(T))> {
  using Shape = CopyPlanShape<Tile::kRows, Tile::kCols, Tile::kRowPeriod, kThreads, int(sizeof(T))>;
  int row;  // this thread's first row (may be >= kRows for idle threads)
  int col;  // element column of this thread's chunk
  __device__ __forceinline__ explicit TileCopyPlan(int tid) : row(Shape::row_of(tid)), col(Shape::col_of(tid)) {}
  __device__ __forceinline__ bool active(int pass) const { return Shape::active(row, pass); }
};

// Starts copying rows [0, Tile::kRows) of a global tile (row stride `gstride` elements,
// contiguous columns) into `smem`. Rows >= `valid_rows` are zero-filled and not read, so
// memory past the end of a sequence (garbage, NaN) never reaches the tile.
template <typename Tile, int kThreads, typename T>
__device__ __forceinline__ void load_tile_async(T* smem, const T* gmem, int64_t gstride,
                                                int valid_rows, int tid) {
  using Plan = TileCopyPlan<Tile, kThreads, T>;
  const Plan plan(tid);
  const T* src = gmem + plan.row * gstride + plan.col;
  T* dst = smem + Tile::offset(plan.row, plan.col);
  // The row step is made opaque so the compiler walks the rows with one pointer add per
  // pass instead of hoisting kPasses loop-invariant 64-bit offsets out of the key loop
  // (2 registers each, for K and for V).
  const int64_t step = prims::opaque(int64_t(Plan::kRowsPerPass) * gstride);
#pragma unroll
  for (int i = 0; i < Plan::kPasses; ++i) {
    const int row = plan.row + i * Plan::kRowsPerPass;
    if (plan.active(i)) {
      const bool pred = row < valid_rows;
      prims::cp_async_16(dst + i * Plan::kRowsPerPass * Tile::kStride, pred ? src : gmem, pred);
    }
    src += step;
  }
}

// Copies rows [0, valid_rows) of a shared tile to global memory (16-byte stores).
template <typename Tile, int kThreads, typename T>
__device__ __forceinline__ void store_tile(T* gmem, int64_t gstride, const T* smem, int valid_rows,
                                           int tid) {
  constexpr int kChunksPerRow = Tile::kCols * static_cast<int>(sizeof(T)) / 16;
  constexpr int kElemsPerChunk = 16 / sizeof(T);
  constexpr int kChunks = Tile::kRows * kChunksPerRow;
  static_assert(kChunks % kThreads == 0, "tile must split evenly over the CTA");
#pragma unroll
  for (int i = 0; i < kChunks / kThreads; ++i) {
    const int c = tid + i * kThreads;
    const int row = c / kChunksPerRow;
    const int col = (c % kChunksPerRow) * kElemsPerChunk;
    if (row < valid_rows) {
      *reinterpret_cast<uint4*>(gmem + row * gstride + col) =
          *reinterpret_cast<const uint4*>(smem + Tile::offset(row, col));
    }
  }
}

// Writes zeros to rows [0, valid_rows) of a global tile (rows that see no key).
template <typename Tile, int kThreads, typename T>
__device__ __forceinline__ void zero_tile(T* gmem, int64_t gstride, int valid_rows, int tid) {
  constexpr int kChunksPerRow = Tile::kCols * static_cast<int>(sizeof(T)) / 16;
  constexpr int kElemsPerChunk = 16 / sizeof(T);
  constexpr int kChunks = Tile::kRows * kChunksPerRow;
  static_assert(kChunks % kThreads == 0, "zero_tile: the chunks split evenly over the threads");
#pragma unroll
  for (int i = 0; i < kChunks / kThreads; ++i) {
    const int c = tid + i * kThreads;
    const int row = c / kChunksPerRow;
    const int col = (c % kChunksPerRow) * kElemsPerChunk;
    if (row < valid_rows) *reinterpret_cast<uint4*>(gmem + row * gstride + col) = make_uint4(0, 0, 0, 0);
  }
}

}  // namespace flashkit::tiles
