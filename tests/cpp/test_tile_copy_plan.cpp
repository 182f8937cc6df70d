// tiles::CopyPlanShape (src/tiles/tile_copy_plan.h): the thread -> chunk assignment of
// tiles::load_tile_async. For the tile shapes and thread counts the kernels use, every 16-byte
// chunk of the tile is copied by exactly one (thread, pass), and no thread touches a row past the
// tile. (A chunk copied twice is two cp.async writes of one address, which racecheck reports: the
// portable backward at D 96 / 192 did that until 2026-11-28.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tiles/tile_copy_plan.h"

namespace {

using flashkit::tiles::CopyPlanShape;

template <int kRows, int kCols, int kPeriod, int kThreads, int kElemBytes>
void expect_each_chunk_once() {
  using P = CopyPlanShape<kRows, kCols, kPeriod, kThreads, kElemBytes>;
  const std::string name = std::to_string(kRows) + "x" + std::to_string(kCols) + " period " + std::to_string(kPeriod) +
                           " threads " + std::to_string(kThreads) + " elem " + std::to_string(kElemBytes) + "B";
  std::vector<int> count(kRows * P::kChunksPerRow, 0);
  for (int tid = 0; tid < kThreads; ++tid) {
    const int row0 = P::row_of(tid), col = P::col_of(tid);
    ASSERT_EQ(col % P::kElemsPerChunk, 0) << name;
    ASSERT_LT(col, kCols) << name;
    for (int pass = 0; pass < P::kPasses; ++pass) {
      if (!P::active(row0, pass)) continue;
      const int row = row0 + pass * P::kRowsPerPass;
      ASSERT_LT(row, kRows) << name << ": tid " << tid << " pass " << pass;
      ++count[row * P::kChunksPerRow + col / P::kElemsPerChunk];
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < P::kChunksPerRow; ++c) {
      EXPECT_EQ(count[r * P::kChunksPerRow + c], 1) << name << ": row " << r << " chunk " << c;
    }
  }
  // the step keeps the layout's row period
  EXPECT_EQ(P::kRowsPerPass % kPeriod, 0) << name;
}

TEST(TileCopyPlan, SixteenBitTilesOfEveryHeadDim) {
  // Swizzled (period 8): whole 64-column atoms, and the data-column prefixes of padded head dims
  // (ColumnPrefix: D 96 in 128-wide tiles, D 192 in 256-wide ones), on 128 / 256 / 384 threads.
  expect_each_chunk_once<64, 64, 8, 128, 2>();
  expect_each_chunk_once<128, 64, 8, 256, 2>();
  expect_each_chunk_once<64, 96, 8, 128, 2>();
  expect_each_chunk_once<128, 96, 8, 256, 2>();
  expect_each_chunk_once<64, 128, 8, 128, 2>();
  expect_each_chunk_once<128, 128, 8, 256, 2>();
  expect_each_chunk_once<176, 128, 8, 256, 2>();
  expect_each_chunk_once<64, 192, 8, 256, 2>();
  expect_each_chunk_once<128, 192, 8, 384, 2>();
  expect_each_chunk_once<64, 256, 8, 256, 2>();
  expect_each_chunk_once<64, 64, 8, 256, 2>();  // (the key-split pair kernel's D 192 half: 64 data columns)
  // Padded rows (period 1: the portable kernels' D 96 / 192 tiles), where the left-over threads of
  // an uneven split used to repeat rows of the next pass.
  expect_each_chunk_once<64, 96, 1, 128, 2>();
  expect_each_chunk_once<128, 96, 1, 128, 2>();
  expect_each_chunk_once<64, 192, 1, 128, 2>();
  expect_each_chunk_once<32, 192, 1, 128, 2>();
  expect_each_chunk_once<64, 96, 1, 256, 2>();
  expect_each_chunk_once<64, 192, 1, 256, 2>();
  expect_each_chunk_once<16, 576, 1, 128, 2>();  // MLA's 576-wide rows
  expect_each_chunk_once<64, 512, 1, 256, 2>();
}

TEST(TileCopyPlan, EightBitTiles) {
  expect_each_chunk_once<64, 128, 8, 128, 1>();
  expect_each_chunk_once<64, 256, 8, 128, 1>();
  expect_each_chunk_once<128, 64, 1, 128, 1>();
  expect_each_chunk_once<64, 576, 1, 128, 1>();
}

TEST(TileCopyPlan, UnevenSplitsIdleTheLeftOverThreads) {
  // D 96 on 128 threads: 12 chunks a row, 10 rows a pass (padded) -> threads 120..127 idle.
  using P = CopyPlanShape<64, 96, 1, 128, 2>;
  static_assert(P::kChunksPerRow == 12 && P::kRowsPerPass == 10 && !P::kEven, "the uneven case");
  for (int tid = 120; tid < 128; ++tid) {
    for (int pass = 0; pass < P::kPasses; ++pass) EXPECT_FALSE(P::active(P::row_of(tid), pass)) << tid;
  }
  // D 192 on 256 threads, swizzled: 24 chunks a row, 10 rows rounded down to the period, 8.
  using S = CopyPlanShape<64, 192, 8, 256, 2>;
  static_assert(S::kRowsPerPass == 8 && S::kTrimmed, "trimmed to the swizzle period");
  EXPECT_FALSE(S::active(S::row_of(200), 0));  // row 8: idle
  EXPECT_TRUE(S::active(S::row_of(191), 0));   // row 7
}

}  // namespace
