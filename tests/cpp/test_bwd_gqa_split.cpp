// launch_util::bwd_gqa_split_default / bwd_gqa_split_log2 (src/launch/bwd_gqa_split.h): the measured
// table that decides when the Hopper backward splits a GQA group over a cluster, and the cluster
// size a cap gives for a group.
#include <gtest/gtest.h>

#include "launch/bwd_gqa_split.h"

namespace {

using flashkit::launch_util::bwd_gqa_split_default;
using flashkit::launch_util::bwd_gqa_split_log2;

constexpr int kSms = 132;

// The FA3 sweep's GQA 8 shapes: batch * S = 16k, D 128 with 16 query heads (h_kv 2), D 64 with 32
// (h_kv 4); base_ctas = batch * h_kv * S / 128.
long long sweep_ctas(int d) { return d == 128 ? 256 : 512; }

TEST(BwdGqaSplit, MeasuredRowsFast) {
  for (int s : {512, 1024, 2048, 4096, 8192}) EXPECT_EQ(bwd_gqa_split_default(128, false, true, 8, s, 256, kSms), 2) << s;
  EXPECT_EQ(bwd_gqa_split_default(128, false, true, 8, 16384, 256, kSms), 1);
  for (int s : {2048, 4096, 8192}) EXPECT_EQ(bwd_gqa_split_default(64, false, true, 8, s, 512, kSms), 2) << s;
  for (int s : {512, 1024, 16384}) EXPECT_EQ(bwd_gqa_split_default(64, false, true, 8, s, 512, kSms), 1) << s;
}

TEST(BwdGqaSplit, MeasuredRowsDeterministic) {
  EXPECT_EQ(bwd_gqa_split_default(128, true, true, 8, 512, 256, kSms), 2);
  EXPECT_EQ(bwd_gqa_split_default(128, true, true, 8, 1024, 256, kSms), 2);
  for (int s : {2048, 4096, 8192}) EXPECT_EQ(bwd_gqa_split_default(128, true, true, 8, s, 256, kSms), 4) << s;
  EXPECT_EQ(bwd_gqa_split_default(128, true, true, 8, 16384, 256, kSms), 8);
  for (int s : {512, 2048, 8192, 16384}) EXPECT_EQ(bwd_gqa_split_default(64, true, true, 8, s, 512, kSms), 1) << s;
}

TEST(BwdGqaSplit, NeverOutsideTheMeasuredGround) {
  for (int d : {64, 128}) {
    for (bool det : {false, true}) {
      for (int s : {512, 2048, 8192, 16384}) {
        EXPECT_EQ(bwd_gqa_split_default(d, det, false, 8, s, sweep_ctas(d), kSms), 1) << "no mask " << d << " " << s;
        for (int r : {1, 2, 6, 10}) {
          EXPECT_EQ(bwd_gqa_split_default(d, det, true, r, s, sweep_ctas(d), kSms), 1) << "h_ratio " << r;
        }
      }
      EXPECT_EQ(bwd_gqa_split_default(d, det, true, 8, 511, 4, kSms), 1) << "short";
      EXPECT_EQ(bwd_gqa_split_default(d, det, true, 8, 4096, 4LL * kSms + 1, kSms), 1) << "large grid";
      EXPECT_EQ(bwd_gqa_split_default(d, det, true, 8, 4096, 256, 0), 1) << "no SM count";
    }
  }
  EXPECT_EQ(bwd_gqa_split_default(256, false, true, 8, 4096, 128, kSms), 1);
  EXPECT_EQ(bwd_gqa_split_default(96, true, true, 8, 4096, 128, kSms), 1);
  // Larger groups that are multiples of 8 take the same clusters.
  EXPECT_EQ(bwd_gqa_split_default(128, true, true, 16, 4096, 128, kSms), 4);
  EXPECT_EQ(bwd_gqa_split_default(128, true, true, 8, 4096, 4LL * kSms, kSms), 4);
}

TEST(BwdGqaSplit, GroupsOfFour) {
  // Deterministic D 128 from 2k keys only, clusters of 2 (h_ratio 4 and 12 alike).
  for (int r : {4, 12}) {
    for (int s : {2048, 4096, 8192, 16384}) EXPECT_EQ(bwd_gqa_split_default(128, true, true, r, s, 512, kSms), 2) << s;
    for (int s : {512, 1024}) EXPECT_EQ(bwd_gqa_split_default(128, true, true, r, s, 512, kSms), 1) << s;
    for (int s : {512, 2048, 8192, 16384}) {
      EXPECT_EQ(bwd_gqa_split_default(128, false, true, r, s, 512, kSms), 1) << "fast " << s;
      EXPECT_EQ(bwd_gqa_split_default(64, true, true, r, s, 512, kSms), 1) << "D 64 " << s;
      EXPECT_EQ(bwd_gqa_split_default(128, true, false, r, s, 512, kSms), 1) << "no mask " << s;
    }
    EXPECT_EQ(bwd_gqa_split_default(128, true, true, r, 4096, 4LL * kSms + 1, kSms), 1) << "large grid";
  }
}

TEST(BwdGqaSplit, Log2OfACap) {
  EXPECT_EQ(bwd_gqa_split_log2(1, 8), 0);
  EXPECT_EQ(bwd_gqa_split_log2(0, 8), 0);
  EXPECT_EQ(bwd_gqa_split_log2(2, 8), 1);
  EXPECT_EQ(bwd_gqa_split_log2(4, 8), 2);
  EXPECT_EQ(bwd_gqa_split_log2(8, 8), 3);
  EXPECT_EQ(bwd_gqa_split_log2(64, 16), 3);  // at most 8
  EXPECT_EQ(bwd_gqa_split_log2(8, 4), 2);    // the group's own size bounds it
  EXPECT_EQ(bwd_gqa_split_log2(8, 6), 1);    // largest power of two dividing 6
  EXPECT_EQ(bwd_gqa_split_log2(8, 3), 0);
  EXPECT_EQ(bwd_gqa_split_log2(8, 1), 0);    // MHA
  EXPECT_EQ(bwd_gqa_split_log2(3, 8), 1);    // a cap that is no power of two: the largest below it
}

}  // namespace
