// launch_util::fwd_sched_group and its override parser (src/launch/fwd_sched.h): the forward's
// scheduling groups of (batch, head) pairs.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/fwd_sm90/persistent_walk.h"
#include "launch/fwd_sched.h"

namespace {

using flashkit::launch_util::FwdSchedOverride;
using flashkit::launch_util::fwd_sched_group;
using flashkit::launch_util::parse_fwd_sched_override;

constexpr int64_t kL2 = 50LL << 20;  // an H100's / H200's L2
int64_t kv_bytes(int64_t s, int d) { return s * d * 2 * 2; }

TEST(FwdSched, NonCausalIsHeadMajor) {
  for (bool persistent : {false, true}) {
    EXPECT_EQ(fwd_sched_group(512, false, kv_bytes(512, 128), kL2, persistent), 1);
    EXPECT_EQ(fwd_sched_group(16, false, kv_bytes(16384, 128), kL2, persistent), 1);
  }
}

TEST(FwdSched, PersistentCausalIsHeadMajor) {
  for (int64_t s : {512, 1024, 2048, 4096, 8192}) {
    EXPECT_EQ(fwd_sched_group(16384 / s * 16, true, kv_bytes(s, 128), kL2, true), 1) << s;
  }
}

TEST(FwdSched, GridCausalKeepsTheL2Rule) {
  // D 128, S 512, 32 x 16 pairs of 256 KB: 200 fit, three groups of equal size (171, 171, 170)
  EXPECT_EQ(fwd_sched_group(512, true, kv_bytes(512, 128), kL2, false), 171);
  // D 256, S 16k, 8 pairs of 16 MB: 3 fit, groups of 3, 3, 2
  EXPECT_EQ(fwd_sched_group(8, true, kv_bytes(16384, 256), kL2, false), 3);
  // a pair larger than the L2: groups of one
  EXPECT_EQ(fwd_sched_group(8, true, kv_bytes(1 << 20, 256), kL2, false), 1);
  // fewer pairs than fit: one group of all of them
  EXPECT_EQ(fwd_sched_group(5, true, kv_bytes(512, 128), kL2, false), 5);
  EXPECT_EQ(fwd_sched_group(1, true, kv_bytes(512, 128), kL2, false), 1);
  EXPECT_EQ(fwd_sched_group(0, true, kv_bytes(512, 128), kL2, false), 1);
}

TEST(FwdSched, GroupsAreEqualAndCoverEveryPair) {
  for (int64_t num_bh : {2, 3, 7, 100, 171, 512, 1000, 4097}) {
    for (int64_t kv : {int64_t(1) << 16, int64_t(1) << 18, int64_t(1) << 20, int64_t(1) << 24}) {
      const int64_t g = fwd_sched_group(num_bh, true, kv, kL2, false);
      ASSERT_GE(g, 1);
      ASSERT_LE(g, num_bh);
      const int64_t groups = (num_bh + g - 1) / g;
      const int64_t last = num_bh - (groups - 1) * g;
      EXPECT_GE(last, 1) << num_bh << " " << kv;
      EXPECT_LE(g - last, groups) << num_bh << " " << kv;  // the last group is at most `groups` pairs short
      EXPECT_LE(g * kv, std::max<int64_t>(kL2, kv) + (g / 2 + 1) * kv) << num_bh << " " << kv;
    }
  }
}

TEST(FwdSched, Overrides) {
  const FwdSchedOverride l2 = parse_fwd_sched_override("l2");
  EXPECT_EQ(l2.kind, 1);
  EXPECT_EQ(l2.value, 1);
  EXPECT_EQ(fwd_sched_group(512, true, kv_bytes(512, 128), kL2, true, l2), 171);
  const FwdSchedOverride l2q = parse_fwd_sched_override("l2/4");
  EXPECT_EQ(l2q.kind, 1);
  EXPECT_EQ(l2q.value, 4);
  // 50 pairs fit in 12.5 MB: 11 groups of 47 (the last 42)
  EXPECT_EQ(fwd_sched_group(512, true, kv_bytes(512, 128), kL2, true, l2q), 47);
  EXPECT_EQ(fwd_sched_group(512, true, kv_bytes(512, 128), kL2, false, l2q), 47);
  const FwdSchedOverride n = parse_fwd_sched_override("8");
  EXPECT_EQ(n.kind, 2);
  EXPECT_EQ(fwd_sched_group(512, true, kv_bytes(512, 128), kL2, false, n), 8);
  EXPECT_EQ(fwd_sched_group(5, true, kv_bytes(512, 128), kL2, false, n), 5);
  // non-causal calls ignore it
  EXPECT_EQ(fwd_sched_group(512, false, kv_bytes(512, 128), kL2, false, n), 1);
  for (const char* bad : {"", "0", "l2/", "l2/0", "l2x", "x", "-3", "12a", "l2/1x"}) {
    EXPECT_EQ(parse_fwd_sched_override(bad).kind, 0) << bad;
  }
  EXPECT_EQ(parse_fwd_sched_override(nullptr).kind, 0);
}

}  // namespace

namespace {

using flashkit::launch_util::fwd_walk_rotate;

// Units per pair of a causal call with 192-row blocks (D 64's three-warpgroup kernel) and 128-row ones.
int64_t units_per_pair(int64_t s, int64_t block_m) { return ((s + block_m - 1) / block_m + 1) / 2; }

TEST(FwdWalkRotate, TheFa3SweepsD64CausalRows) {
  // 132 SMs; D 64: 32 heads, 16k tokens. U = 2, 3, 6, 11, 22 divide 132: rotated, every pair's units in one round.
  for (int64_t s : {512, 1024, 2048, 4096, 8192}) {
    const int64_t u = units_per_pair(s, 192), units = 16384 / s * 32 * u;
    EXPECT_EQ(132 % u, 0) << s;
    EXPECT_TRUE(fwd_walk_rotate(true, 1, u, units, 132)) << s;
  }
}

TEST(FwdWalkRotate, OnlyWhereItIsAPermutationThatCanHelp) {
  EXPECT_FALSE(fwd_walk_rotate(false, 1, 3, 1536, 132));  // no mask: units are single blocks
  EXPECT_FALSE(fwd_walk_rotate(true, 2, 3, 1536, 132));   // groups of two pairs (the override)
  EXPECT_FALSE(fwd_walk_rotate(true, 1, 7, 1536, 132));   // 7 does not divide 132: pairs straddle rounds
  EXPECT_FALSE(fwd_walk_rotate(true, 1, 3, 132, 132));    // one round
  EXPECT_FALSE(fwd_walk_rotate(true, 1, 1, 1536, 132));   // one unit per pair: nothing to rotate
  EXPECT_FALSE(fwd_walk_rotate(true, 1, 3, 1536, 0));
  EXPECT_TRUE(fwd_walk_rotate(true, 1, 4, 1024, 132));    // D 128 S 1k: rotated, equal units (no change in cost)
}

// The persistent forward's walk as the kernel decodes it (kernels/fwd_sm90/persistent_walk.h: persistent_tile_at and
// persistent_coords, the functions the kernel calls, with the launcher's set_persistent_walk): over the rounds of
// `walkers` CTAs (or clusters of two, whose ranks take the two halves of each unit, the same decode), every
// (batch x head, row block) of the call exactly once, in range, and under the rotation a pair's units in the pair's
// round. The snake walk everywhere, the rotated one where the launcher would set it (fwd_walk_rotate).
void check_walk(int bh, int m_blocks, int group, int walkers, bool rotate) {
  flashkit::FwdParams p{};
  p.batch = bh;
  p.h_q = 1;
  p.num_m_blocks = m_blocks;
  p.sched_group = group;
  ASSERT_TRUE(flashkit::fwd_sm90::set_persistent_walk(p));
  p.walk_rotate = rotate ? 1 : 0;
  const int units_per_pair = (m_blocks + 1) / 2;
  std::vector<int> seen(size_t(bh) * size_t(m_blocks), 0);
  for (int c = 0; c < walkers; ++c) {
    int t = 0;
    for (int round = 0; flashkit::fwd_sm90::persistent_tile_at(p, round, walkers, c, t); ++round) {
      if (t >= p.num_tiles) continue;
      for (int half = 0; half < 2; ++half) {
        int x = -1, m_block = -1, z = -1;
        if (!flashkit::fwd_sm90::persistent_coords(p, t, half, round, x, m_block, z)) {
          EXPECT_EQ(half, 1);  // (only the middle block's missing half)
          continue;
        }
        const int pair = z * group + x;
        ASSERT_GE(x, 0);
        ASSERT_LT(x, group);
        ASSERT_GE(pair, 0);
        ASSERT_LT(pair, bh) << bh << " " << m_blocks << " " << group << " " << walkers;
        ASSERT_GE(m_block, 0);
        ASSERT_LT(m_block, m_blocks);
        if (rotate) EXPECT_EQ(int64_t(pair) * units_per_pair / walkers, round);  // (groups of one pair)
        ++seen[size_t(pair) * size_t(m_blocks) + size_t(m_block)];
      }
    }
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    ASSERT_EQ(seen[i], 1) << "pair " << i / size_t(m_blocks) << " block " << i % size_t(m_blocks) << ": bh " << bh
                          << " m_blocks " << m_blocks << " group " << group << " walkers " << walkers
                          << " rotate " << rotate;
  }
}

TEST(FwdWalk, KernelDecodeCoversEveryBlockOnce) {
  for (int walkers : {132, 114, 66, 12, 1}) {
    for (int m_blocks : {1, 2, 3, 4, 5, 11, 16}) {
      for (int bh : {1, 5, 44, 131, 512}) {
        for (int group : {1, 2, 3, 8, 64}) {
          check_walk(bh, m_blocks, group, walkers, false);
        }
        const int units = bh * ((m_blocks + 1) / 2);
        if (flashkit::launch_util::fwd_walk_rotate(true, 1, (m_blocks + 1) / 2, units, walkers)) {
          check_walk(bh, m_blocks, 1, walkers, true);
        }
      }
    }
  }
}

}  // namespace
