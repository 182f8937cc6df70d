// attn::bwd_chunked_coords (src/kernels/attention_common/bwd_launch_order.h): the permutation of the Hopper
// backward's chunked launch order (BwdParams::order_chunk), which attn::make_bwd_cta applies to every CTA.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/attention_common/bwd_launch_order.h"

namespace {

using flashkit::attn::bwd_chunked_coords;

// Every (key block, group) exactly once over the launch indices, for chunks that divide the groups, leave a
// short last chunk, equal them and exceed them, and for grids of one key block or one group.
TEST(BwdLaunchOrder, EveryCtaExactlyOnce) {
  for (int n_blocks : {1, 2, 3, 4, 16, 17, 128}) {
    for (int groups : {1, 2, 5, 6, 10, 16, 33}) {
      for (int chunk : {1, 2, 3, 4, 8, 16, 40}) {
        std::vector<int> seen(size_t(n_blocks) * groups, 0);
        for (int lin = 0; lin < n_blocks * groups; ++lin) {
          const auto c = bwd_chunked_coords(lin, n_blocks, groups, chunk);
          ASSERT_GE(c.key_block, 0);
          ASSERT_LT(c.key_block, n_blocks);
          ASSERT_GE(c.group, 0);
          ASSERT_LT(c.group, groups);
          ++seen[size_t(c.group) * n_blocks + c.key_block];
        }
        for (size_t i = 0; i < seen.size(); ++i) {
          ASSERT_EQ(seen[i], 1) << "n_blocks " << n_blocks << " groups " << groups << " chunk " << chunk << " cta " << i;
        }
      }
    }
  }
}

// Inside a chunk the key blocks run first (every group's block 0, then block 1, ...: under a causal mask the
// heaviest first), the chunks follow each other in group order, and a chunk's groups are contiguous.
TEST(BwdLaunchOrder, ChunkOrder) {
  const int n_blocks = 16, groups = 10, chunk = 4;  // chunks of 4, 4, 2 groups
  int lin = 0;
  for (int c0 = 0; c0 < groups; c0 += chunk) {
    const int cc = c0 + chunk <= groups ? chunk : groups - c0;
    for (int kb = 0; kb < n_blocks; ++kb) {
      for (int g = 0; g < cc; ++g, ++lin) {
        const auto c = bwd_chunked_coords(lin, n_blocks, groups, chunk);
        EXPECT_EQ(c.key_block, kb) << lin;
        EXPECT_EQ(c.group, c0 + g) << lin;
      }
    }
  }
  EXPECT_EQ(lin, n_blocks * groups);
}

// Chunks of one group are the grid's own order (key blocks fastest); a chunk of every group (or more) is
// key-major over the whole grid.
TEST(BwdLaunchOrder, LimitCases) {
  const int n_blocks = 7, groups = 5;
  for (int lin = 0; lin < n_blocks * groups; ++lin) {
    const auto one = bwd_chunked_coords(lin, n_blocks, groups, 1);
    EXPECT_EQ(one.key_block, lin % n_blocks);
    EXPECT_EQ(one.group, lin / n_blocks);
    for (int chunk : {groups, groups + 3}) {
      const auto all = bwd_chunked_coords(lin, n_blocks, groups, chunk);
      EXPECT_EQ(all.key_block, lin / groups);
      EXPECT_EQ(all.group, lin % groups);
    }
  }
}

}  // namespace
