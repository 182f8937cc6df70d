// launch_util::fwd_sched_group and its override parser (src/launch/fwd_sched.h): the forward's
// scheduling groups of (batch, head) pairs.
#include <gtest/gtest.h>

#include <vector>

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

// The rotation the kernel applies (kernel_persistent.cuh persistent_tile / persistent_coords) is a
// permutation of the walk's units: each unit exactly once, a pair's units in the round of the pair.
TEST(FwdWalkRotate, KernelWalkIsAPermutation) {
  for (int64_t ctas : {132, 114, 66, 12}) {
    for (int64_t u : {2, 3, 6, 11, 22, 5, 7}) {
      for (int64_t pairs : {1, 5, 44, 131, 512}) {
        const int64_t units = pairs * u;
        if (!fwd_walk_rotate(true, 1, u, units, ctas)) continue;
        std::vector<int> seen(size_t(units), 0);
        for (int64_t round = 0; round * ctas < units; ++round) {
          for (int64_t c = 0; c < ctas; ++c) {
            const int64_t t = round * ctas + c;
            if (t >= units) continue;
            const int64_t z = t / u;
            int64_t rest = t - z * u + round % u;
            if (rest >= u) rest -= u;
            EXPECT_EQ((z * u) / ctas, round);  // the pair's round
            ++seen[size_t(z * u + rest)];
          }
        }
        for (int64_t i = 0; i < units; ++i) EXPECT_EQ(seen[size_t(i)], 1) << ctas << " " << u << " " << pairs;
      }
    }
  }
}

}  // namespace
