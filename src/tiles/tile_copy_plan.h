// The thread -> chunk assignment of tiles::load_tile_async (tile_copy.cuh) as plain integer
// arithmetic, so that host tests can enumerate it (tests/cpp/test_tile_copy_plan.cpp: every
// 16-byte chunk of a tile copied exactly once, for the tile shapes the kernels use).
//
// Thread `tid` takes column chunk tid % kChunksPerRow of rows tid / kChunksPerRow + i *
// kRowsPerPass, i < kPasses. A thread steps kRowsPerPass rows at a constant shared-memory
// stride, which a swizzled layout only allows in multiples of its row period (kRowPeriod: 8 for
// the 128-byte swizzle, 1 for padded rows), so the step is rounded down to one (D = 192 on 256
// threads: 10 rows -> 8, the threads of rows 8 and 9 idle). When the threads don't split evenly
// into rows (head dims 96 and 192), the left-over threads idle. (They used to repeat rows of the
// next pass in padded tiles: the same data, but two cp.async writes of one address, which
// racecheck reports as a hazard: the portable backward at D 96, 2026-11-28, docs/kernels/bwd.md
// "D 96 and 192 on the Hopper kernels".)
#pragma once

#if defined(__CUDACC__)
#define FLASHKIT_TILE_PLAN_HD __host__ __device__ __forceinline__
#else
#define FLASHKIT_TILE_PLAN_HD inline
#endif

namespace flashkit::tiles {

template <int kRows_, int kCols_, int kRowPeriod_, int kThreads_, int kElemBytes_>
struct CopyPlanShape {
  static constexpr int kRows = kRows_;
  static constexpr int kElemsPerChunk = 16 / kElemBytes_;
  static constexpr int kChunksPerRow = kCols_ / kElemsPerChunk;
  static constexpr int kRowsPerPassRaw = kThreads_ / kChunksPerRow;
  static constexpr int kRowsPerPass = kRowsPerPassRaw / kRowPeriod_ * kRowPeriod_;
  static constexpr bool kTrimmed = kRowsPerPass != kRowsPerPassRaw;
  static_assert(kRowsPerPass >= 1, "a row (period) must not need more chunks than there are threads");
  static constexpr int kPasses = (kRows_ + kRowsPerPass - 1) / kRowsPerPass;
  static constexpr bool kEven = kThreads_ % kChunksPerRow == 0 && !kTrimmed && kRows_ % kRowsPerPass == 0;

  // Thread tid's first row (>= kRowsPerPass for idle threads) and the element column of its chunk.
  static FLASHKIT_TILE_PLAN_HD constexpr int row_of(int tid) { return tid / kChunksPerRow; }
  static FLASHKIT_TILE_PLAN_HD constexpr int col_of(int tid) { return (tid % kChunksPerRow) * kElemsPerChunk; }
  // Whether the thread whose first row is `row` copies a chunk in pass `pass` (row + pass * kRowsPerPass).
  static FLASHKIT_TILE_PLAN_HD constexpr bool active(int row, int pass) {
    return kEven || (row < kRowsPerPass && row + pass * kRowsPerPass < kRows_);
  }
};

}  // namespace flashkit::tiles
