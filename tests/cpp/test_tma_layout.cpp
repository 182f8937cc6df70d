// The layout checks shared by the Hopper TMA maps (src/launch/tma_layout.h): what the launchers
// refuse before asking the driver to encode a map (they then take the copy path or report it).
#include <gtest/gtest.h>

#include <cstdint>

#include "launch/tma_layout.h"

namespace flashkit_test {
namespace {

using flashkit::launch_util::tma_layout_ok;

alignas(16) unsigned char g_buf[64];

TEST(TmaLayout, ContiguousTensorPasses) {
  // bf16 [B 2, S 100, H 8, D 128] as dims (D, S, H, B) with byte strides row, head, batch.
  const int64_t dims[4] = {128, 100, 8, 2};
  int64_t st[3] = {8 * 128 * 2, 128 * 2, 100 * 8 * 128 * 2};
  EXPECT_TRUE(tma_layout_ok(g_buf, dims, st));
  EXPECT_EQ(st[0], 8 * 128 * 2);
  EXPECT_EQ(st[1], 128 * 2);
  EXPECT_EQ(st[2], 100 * 8 * 128 * 2);
}

TEST(TmaLayout, UnalignedBaseFails) {
  const int64_t dims[4] = {128, 100, 8, 2};
  int64_t st[3] = {2048, 256, 204800};
  EXPECT_FALSE(tma_layout_ok(g_buf + 2, dims, st));
  EXPECT_FALSE(tma_layout_ok(g_buf + 8, dims, st));
  EXPECT_TRUE(tma_layout_ok(g_buf + 16, dims, st));
}

TEST(TmaLayout, DimsOutOfRangeFail) {
  int64_t st[3] = {2048, 256, 204800};
  for (int i = 0; i < 4; ++i) {
    int64_t dims[4] = {128, 100, 8, 2};
    dims[i] = 0;
    EXPECT_FALSE(tma_layout_ok(g_buf, dims, st)) << "dim " << i << " = 0";
    dims[i] = -1;
    EXPECT_FALSE(tma_layout_ok(g_buf, dims, st)) << "dim " << i << " < 0";
    dims[i] = int64_t(1) << 32;
    EXPECT_FALSE(tma_layout_ok(g_buf, dims, st)) << "dim " << i << " = 2^32";
    dims[i] = (int64_t(1) << 32) - 1;
    int64_t st2[3] = {2048, 256, 204800};
    EXPECT_TRUE(tma_layout_ok(g_buf, dims, st2)) << "dim " << i << " = 2^32 - 1";
  }
}

TEST(TmaLayout, StridesMustBePositiveMultiplesOf16Below2To40) {
  const int64_t dims[4] = {128, 100, 8, 2};
  for (int i = 0; i < 3; ++i) {
    for (int64_t bad : {int64_t(0), int64_t(-256), int64_t(8), int64_t(2056 + 4), int64_t(1) << 40}) {
      int64_t st[3] = {2048, 256, 204800};
      st[i] = bad;
      EXPECT_FALSE(tma_layout_ok(g_buf, dims, st)) << "stride " << i << " = " << bad;
    }
    int64_t st[3] = {2048, 256, 204800};
    st[i] = (int64_t(1) << 40) - 16;
    EXPECT_TRUE(tma_layout_ok(g_buf, dims, st)) << "stride " << i << " = 2^40 - 16";
  }
}

TEST(TmaLayout, DimOfSizeOneIgnoresItsStride) {
  // B = 1 (or a varlen batch folded into rows): the batch stride is never stepped, whatever it
  // is (0 from a broadcast, or unaligned); it is replaced by 16. Other strides are kept.
  const int64_t dims[4] = {128, 100, 8, 1};
  for (int64_t any : {int64_t(0), int64_t(-4), int64_t(6), int64_t(1) << 41}) {
    int64_t st[3] = {2048, 256, any};
    EXPECT_TRUE(tma_layout_ok(g_buf, dims, st)) << any;
    EXPECT_EQ(st[2], 16);
    EXPECT_EQ(st[0], 2048);
    EXPECT_EQ(st[1], 256);
  }
  // A single head (MQA / one KV head): its stride is free too, the row stride still checked.
  const int64_t dims1[4] = {128, 100, 1, 2};
  int64_t st1[3] = {256, 2, 25600};
  EXPECT_TRUE(tma_layout_ok(g_buf, dims1, st1));
  EXPECT_EQ(st1[1], 16);
  int64_t st2[3] = {250, 2, 25600};
  EXPECT_FALSE(tma_layout_ok(g_buf, dims1, st2));
}

TEST(TmaLayout, TheInnermostDimHasNoStride) {
  // dims[0] is contiguous by construction (its stride is the element size): any extent passes.
  const int64_t dims[4] = {3, 16, 1, 1};
  int64_t st[3] = {16, 0, 0};
  EXPECT_TRUE(tma_layout_ok(g_buf, dims, st));
}

}  // namespace
}  // namespace flashkit_test
