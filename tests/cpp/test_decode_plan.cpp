// The paged-decode plan's size logic, on the CPU: the plan kernel's arithmetic
// (kernels/decode/plan_math.h, the functions the kernel itself calls) applied to batches of many
// shapes, against the workspace bounds the API sizes the workspace with
// (detail::decode_plan_limits). A plan beyond them is refused on the GPU (kDecodeErrPlan: no
// output), so a bound that some batch exceeds is a bug these tests catch without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "api/decode_internal.h"
#include "flashkit/decode.h"
#include "kernels/decode/plan_math.h"
#include "kernels/decode_params.h"

namespace {

using flashkit::DType;
using flashkit::DecodePlanArgs;
using flashkit::detail::DecodePlanLimits;

struct Counts {
  int64_t items = 0, partials = 0, combines = 0;
  int64_t chunk = 0;
};

// What the plan kernel writes for these (clamped) lengths: its steps 2 and 3.
Counts plan(const std::vector<int64_t>& lens, const DecodePlanLimits& lim, int target_ctas, int split_size) {
  Counts c;
  int64_t total = 0;
  for (int64_t l : lens) total += l;
  c.chunk = flashkit::decode_math::plan_chunk(total, int(lim.hr), target_ctas, split_size, lim.min_chunk,
                                                lim.min_chunk_tiny);
  const int cap = flashkit::decode_math::split_cap(total, int(lim.hr), target_ctas, split_size, lim.min_chunk,
                                                   int(lim.rows_max), int(lim.h_kv), lim.split_cap != 0);
  for (int64_t l : lens) {
    int n = 0;
    int64_t chunk_b = 0;
    flashkit::decode_math::splits_of(l, c.chunk, split_size > 0, cap, &n, &chunk_b);
    c.items += lim.hr * n;
    if (n > 1) {
      c.partials += lim.hr * n;
      if (!flashkit::fused_merge(n, int(lim.rows_max), int(lim.head_dim_v), lim.fused_max_splits)) c.combines += lim.hr;
    }
  }
  return c;
}

struct Shape {
  int64_t s_q, h_q, h_kv, d;
  DType kv;
};

DecodePlanLimits limits(const Shape& sh, int64_t B, int target, int64_t split_size, int64_t max_len) {
  DecodePlanArgs a;
  a.batch = B, a.s_q = sh.s_q, a.num_heads_q = sh.h_q, a.num_heads_kv = sh.h_kv, a.head_dim = sh.d;
  a.kv_dtype = sh.kv;
  a.split_size = split_size;
  a.max_seqlen_k = split_size > 0 ? std::max<int64_t>(max_len, 1) : 0;
  DecodePlanLimits lim;
  const flashkit::Status st = flashkit::detail::decode_plan_limits(a, target, &lim);
  EXPECT_TRUE(st.ok()) << st.message();
  return lim;
}

// Length distributions: the ones the GPU tests use (0, 1, page_size +- 1, a 1M-token sequence,
// mixed short and long) and random ones.
std::vector<std::vector<int64_t>> batches(std::mt19937_64& rng) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t B : {1, 2, 3, 7, 16, 64, 128, 257, 1024}) {
    out.push_back(std::vector<int64_t>(B, 0));
    out.push_back(std::vector<int64_t>(B, 1));
    out.push_back(std::vector<int64_t>(B, 15));
    out.push_back(std::vector<int64_t>(B, 17));
    out.push_back(std::vector<int64_t>(B, 1000));
    out.push_back(std::vector<int64_t>(B, 8192));
    std::vector<int64_t> one_long(B, 3);
    one_long[0] = int64_t{1} << 20;
    out.push_back(one_long);
    std::uniform_int_distribution<int64_t> small(0, 4096);
    std::vector<int64_t> mixed(B);
    for (auto& l : mixed) l = small(rng);
    if (B > 1) mixed[B / 2] = 65536;
    out.push_back(mixed);
    // heavy-tailed: most short, a few long
    std::exponential_distribution<double> ex(1.0 / 2000.0);
    std::vector<int64_t> tail(B);
    for (auto& l : tail) l = std::min<int64_t>(int64_t(ex(rng)), 1 << 20);
    out.push_back(tail);
  }
  return out;
}

const Shape kShapes[] = {
    {1, 32, 8, 128, DType::kInvalid},   // GQA 4: 16-row items
    {1, 64, 8, 128, DType::kInvalid},   // GQA 8
    {4, 64, 8, 128, DType::kInvalid},   // s_q 4 x GQA 8: 32 rows, two groups
    {1, 32, 32, 128, DType::kInvalid},  // MHA: one valid row of 16
    {16, 16, 1, 64, DType::kInvalid},   // MQA, s_q 16: 256 rows
    {2, 128, 8, 256, DType::kInvalid},  // D 256
    {1, 32, 8, 128, DType::kInt8},
    {3, 48, 4, 128, DType::kFloat8E4M3FN},
    {8, 32, 8, 128, DType::kFloat8E4M3FN},  // 32 rows: split cap of 16 in short calls
    {4, 32, 2, 128, DType::kInvalid},       // 64 rows, two 32-row groups
};

TEST(DecodePlan, BalancedPlansFitTheWorkspace) {
  std::mt19937_64 rng(1);
  const auto all = batches(rng);
  for (const Shape& sh : kShapes) {
    for (int target : {1, 7, 132, 264, 528, 1056, 2112}) {
      for (const auto& lens : all) {
        const int64_t B = int64_t(lens.size());
        const DecodePlanLimits lim = limits(sh, B, target, 0, 0);
        const Counts c = plan(lens, lim, target, 0);
        const std::string what = "B " + std::to_string(B) + " target " + std::to_string(target) + " max len " +
                                 std::to_string(*std::max_element(lens.begin(), lens.end())) + " hr " +
                                 std::to_string(lim.hr);
        EXPECT_LE(c.items, lim.max_items) << what;
        EXPECT_LE(c.partials, lim.max_partials) << what;
        EXPECT_LE(c.combines, lim.max_combines) << what;
        EXPECT_EQ(c.chunk % 64, 0) << what;
        EXPECT_GE(c.chunk, lim.min_chunk_tiny) << what;
      }
    }
  }
}

TEST(DecodePlan, FixedSplitPlansFitTheWorkspace) {
  std::mt19937_64 rng(2);
  const auto all = batches(rng);
  for (const Shape& sh : kShapes) {
    for (int split : {64, 128, 1024, 65536}) {
      for (const auto& lens : all) {
        const int64_t B = int64_t(lens.size());
        const int64_t max_len = *std::max_element(lens.begin(), lens.end());
        const DecodePlanLimits lim = limits(sh, B, 132, split, max_len);
        const Counts c = plan(lens, lim, 132, split);
        const std::string what = "B " + std::to_string(B) + " split " + std::to_string(split) + " max len " +
                                 std::to_string(max_len);
        EXPECT_EQ(c.chunk, split) << what;
        EXPECT_LE(c.items, lim.max_items) << what;
        EXPECT_LE(c.partials, lim.max_partials) << what;
        EXPECT_LE(c.combines, lim.max_combines) << what;
      }
    }
  }
}

// Each sequence's splits cover its tokens exactly once, with no empty split: the balanced ones
// evenly (64-token multiples; 650 tokens at a 64-token target are 6 splits of 128, not 10 with 4
// empty), the fixed ones split_size each but the last (a fixed split count depends on the
// sequence's own length only: batch invariance).
TEST(DecodePlan, SplitsCoverEachSequenceOnce) {
  struct Mode {
    bool fixed;
    int cap;  // split_cap's value (balanced plans only: fixed split sizes are never capped)
  };
  for (const Mode mode : {Mode{false, 0}, Mode{false, 1}, Mode{false, 5}, Mode{false, 16}, Mode{false, 32},
                          Mode{true, 0}}) {
    const bool fixed = mode.fixed;
    const int cap = mode.cap;
    for (int64_t target : {int64_t{64}, int64_t{128}, int64_t{192}, int64_t{4096}, int64_t{1} << 30}) {
      for (int64_t len : {int64_t{0}, int64_t{1}, int64_t{63}, int64_t{64}, int64_t{65}, int64_t{650}, int64_t{1000},
                          int64_t{8191}, int64_t{1} << 20}) {
        int n = 0;
        int64_t chunk = 0;
        flashkit::decode_math::splits_of(len, target, fixed, cap, &n, &chunk);
        const std::string what = "len " + std::to_string(len) + " target " + std::to_string(target) +
                                 (fixed ? " fixed" : " balanced") + " cap " + std::to_string(cap);
        ASSERT_GE(n, 1) << what;
        if (cap > 0) {
          EXPECT_LE(n, cap) << what;
        }
        EXPECT_GE(int64_t(n) * chunk, len) << what;  // covered
        if (len > 0) {
          EXPECT_LT(int64_t(n - 1) * chunk, len) << what;  // the last split holds a token
        }
        if (fixed) {
          EXPECT_EQ(chunk, target) << what;
        } else {
          EXPECT_EQ(chunk % 64, 0) << what;
          // nearest rounding: a split (the critical path) never exceeds 1.5 targets, to 64s (or, capped,
          // the even share of the cap's splits)
          const int64_t bound = cap > 0 ? std::max(3 * target / 2 + 1, (len + cap - 1) / cap) : 3 * target / 2 + 1;
          EXPECT_LE(chunk, (bound + 63) / 64 * 64) << what;
        }
      }
    }
  }
}

// The chunk rule: balanced plans aim at one wave (total work / target CTAs), never below the
// shortest split (64-token tiles where the target is at most 32 tokens per CTA, 128 above).
TEST(DecodePlan, ChunkRule) {
  using flashkit::decode_math::plan_chunk;
  DecodePlanArgs a;
  a.batch = 1, a.s_q = 1, a.num_heads_q = 32, a.num_heads_kv = 8, a.head_dim = 128;
  DecodePlanLimits lim;
  ASSERT_TRUE(flashkit::detail::decode_plan_limits(a, 264, &lim).ok());
  const int kMinChunk = lim.min_chunk, kMinChunkTiny = lim.min_chunk_tiny;
  ASSERT_EQ(kMinChunk, 128);  // the defaults (no FLASHKIT_DECODE_MIN_CHUNK* in the test's environment)
  ASSERT_EQ(kMinChunkTiny, 64);
  EXPECT_EQ(plan_chunk(1024, 8, 264, 0, kMinChunk, kMinChunkTiny), 64);       // 31 tokens per CTA: tiny
  EXPECT_EQ(plan_chunk(2048, 8, 264, 0, kMinChunk, kMinChunkTiny), 128);      // 62 per CTA: the floor
  EXPECT_EQ(plan_chunk(65536, 8, 264, 0, kMinChunk, kMinChunkTiny), 2048);    // 1986 per CTA, up to 64s
  EXPECT_EQ(plan_chunk(0, 8, 264, 0, kMinChunk, kMinChunkTiny), 64);          // nothing to do
  EXPECT_EQ(plan_chunk(100, 8, 264, 4096, kMinChunk, kMinChunkTiny), 4096);   // fixed
  EXPECT_EQ(plan_chunk(int64_t{1} << 40, 64, 1, 0, kMinChunk, kMinChunkTiny), int64_t{1} << 30);  // capped
}

// The split cap: short balanced calls (more than 32 and at most min_chunk tokens per target CTA) whose
// items hold >= 16 valid rows take at most min(512 / rows, target / (2 h_kv)) splits per sequence;
// everything else is uncapped.
TEST(DecodePlan, SplitCap) {
  using flashkit::decode_math::split_cap;
  struct Case {
    int64_t B, s_q, h_q, h_kv;
    DType kv;
    int target;
    int64_t len;
    int cap, n;  // the cap, and the splits of a sequence of len tokens
  };
  const DType bf = DType::kInvalid, f8 = DType::kFloat8E4M3FN;
  const Case cases[] = {
      {1, 4, 32, 8, bf, 264, 4096, 16, 16},    // 16 rows, 124 tokens per CTA: half a wave per KV head
      {1, 2, 64, 8, bf, 264, 4096, 16, 16},    // the same rows
      {1, 4, 32, 8, bf, 264, 2048, 16, 16},    // 2k: 16 splits of 128 anyway
      {1, 8, 32, 2, bf, 264, 4096, 16, 16},    // 128 rows per KV head: 32-row items, one combine round
      {1, 4, 32, 8, f8, 528, 4096, 32, 32},    // FP8 (twice the CTAs), 16 rows: 32 = one round
      {1, 4, 32, 8, f8, 528, 8192, 32, 32},    // 8k: 64 splits of 128 -> 32 of 256
      {1, 8, 32, 8, f8, 528, 4096, 16, 16},    // FP8, 32 rows: one round is 16 splits
      {1, 1, 32, 8, bf, 264, 4096, 0, 32},     // 4 rows: no cap
      {1, 2, 32, 2, bf, 264, 4096, 32, 32},    // 32 rows as two 16-row groups (tiny grid): the cap does not bind
      {1, 1, 32, 2, bf, 264, 4096, 0, 64},     // 16 rows, 31 tokens per CTA (tiny): no cap
      {1, 4, 32, 8, bf, 264, 65536, 0, 32},    // long: 1986 tokens per CTA, no cap
      {16, 4, 32, 8, bf, 264, 4096, 0, 2},     // B 16: 1986 tokens per CTA, no cap
  };
  for (const Case& c : cases) {
    DecodePlanArgs a;
    a.batch = c.B, a.s_q = c.s_q, a.num_heads_q = c.h_q, a.num_heads_kv = c.h_kv, a.head_dim = 128;
    a.kv_dtype = c.kv;
    DecodePlanLimits lim;
    ASSERT_TRUE(flashkit::detail::decode_plan_limits(a, c.target, &lim).ok());
    ASSERT_EQ(lim.split_cap, 1);  // the default (no FLASHKIT_DECODE_SPLIT_CAP in the test's environment)
    const int64_t total = c.B * c.len;
    const std::string what = "B " + std::to_string(c.B) + " s_q " + std::to_string(c.s_q) + " " +
                             std::to_string(c.h_q) + "/" + std::to_string(c.h_kv) + " len " + std::to_string(c.len);
    const int cap = split_cap(total, int(lim.hr), c.target, 0, lim.min_chunk, int(lim.rows_max), int(lim.h_kv), true);
    EXPECT_EQ(cap, c.cap) << what;
    const int64_t chunk = flashkit::decode_math::plan_chunk(total, int(lim.hr), c.target, 0, lim.min_chunk,
                                                            lim.min_chunk_tiny);
    int n = 0;
    int64_t chunk_b = 0;
    flashkit::decode_math::splits_of(c.len, chunk, false, cap, &n, &chunk_b);
    EXPECT_EQ(n, c.n) << what;
    EXPECT_EQ(split_cap(total, int(lim.hr), c.target, 0, lim.min_chunk, int(lim.rows_max), int(lim.h_kv), false), 0)
        << what;  // switched off
    EXPECT_EQ(split_cap(total, int(lim.hr), c.target, 512, lim.min_chunk, int(lim.rows_max), int(lim.h_kv), true), 0)
        << what;  // fixed split sizes
  }
}

// Item rows: a head's ratio x s_q rows in 16-row items, or 32-row ones where more than 16 are needed,
// except in balanced plans of tiny grids over a 16-bit cache (at most 16 sequence x KV-head pairs with
// 17..32 rows: two 16-row items).
TEST(DecodePlan, RowsPerItem) {
  DecodePlanArgs a;
  a.s_q = 4, a.num_heads_q = 64, a.num_heads_kv = 8, a.head_dim = 128;  // 32 rows per KV head
  DecodePlanLimits lim;
  for (int64_t b : {1, 2}) {  // 8 / 16 pairs: two 16-row items per KV head
    a.batch = b;
    ASSERT_TRUE(flashkit::detail::decode_plan_limits(a, 264, &lim).ok());
    EXPECT_EQ(lim.hr, 16) << "B " << b;
    EXPECT_EQ(lim.rows_max, 16) << "B " << b;
  }
  for (int64_t b : {3, 8, 128}) {  // 24+ pairs: one 32-row item per KV head
    a.batch = b;
    ASSERT_TRUE(flashkit::detail::decode_plan_limits(a, 264, &lim).ok());
    EXPECT_EQ(lim.hr, 8) << "B " << b;
    EXPECT_EQ(lim.rows_max, 32) << "B " << b;
  }
  a.batch = 1;
  a.split_size = 512, a.max_seqlen_k = 4096;  // a fixed split size: rows independent of B (batch invariance)
  ASSERT_TRUE(flashkit::detail::decode_plan_limits(a, 264, &lim).ok());
  EXPECT_EQ(lim.hr, 8);
  EXPECT_EQ(lim.rows_max, 32);
  a.split_size = 0, a.max_seqlen_k = 0;
  a.kv_dtype = flashkit::DType::kFloat8E4M3FN;  // 8-bit caches keep 32-row items in tiny grids too
  ASSERT_TRUE(flashkit::detail::decode_plan_limits(a, 528, &lim).ok());
  EXPECT_EQ(lim.hr, 8);
  EXPECT_EQ(lim.rows_max, 32);
  a.kv_dtype = flashkit::DType::kInvalid;
  a.s_q = 8;  // 64 rows: two 32-row items even in a tiny grid
  ASSERT_TRUE(flashkit::detail::decode_plan_limits(a, 264, &lim).ok());
  EXPECT_EQ(lim.hr, 16);
  EXPECT_EQ(lim.rows_max, 32);
  a.s_q = 2;  // 16 rows: 16-row items anyway
  ASSERT_TRUE(flashkit::detail::decode_plan_limits(a, 264, &lim).ok());
  EXPECT_EQ(lim.hr, 8);
  EXPECT_EQ(lim.rows_max, 16);
  a.s_q = 4, a.head_dim = 256;  // D 256: 16-row items always (the 32-row O tile does not fit)
  a.batch = 8;
  ASSERT_TRUE(flashkit::detail::decode_plan_limits(a, 264, &lim).ok());
  EXPECT_EQ(lim.hr, 16);
  EXPECT_EQ(lim.rows_max, 16);
}

// The fused merge (the last split CTA merges its sequence's partials) takes 2..4 splits whose partials fit
// the freed ring; more splits, or partials too large, go to the combine kernel.
TEST(DecodePlan, FusedMergeReach) {
  DecodePlanArgs a;
  a.batch = 16, a.s_q = 1, a.num_heads_q = 32, a.num_heads_kv = 8, a.head_dim = 128;
  DecodePlanLimits lim;
  ASSERT_TRUE(flashkit::detail::decode_plan_limits(a, 264, &lim).ok());
  ASSERT_EQ(lim.fused_max_splits, 4);  // the default (no FLASHKIT_DECODE_FUSED_MAX_SPLITS in the test's environment)
  using flashkit::fused_merge;
  EXPECT_FALSE(fused_merge(1, 4, 128, lim.fused_max_splits));   // not split
  EXPECT_TRUE(fused_merge(2, 4, 128, lim.fused_max_splits));
  EXPECT_TRUE(fused_merge(4, 4, 128, lim.fused_max_splits));
  EXPECT_FALSE(fused_merge(5, 4, 128, lim.fused_max_splits));   // the combine kernel is faster from 5 splits
  EXPECT_TRUE(fused_merge(3, 16, 128, lim.fused_max_splits));   // 6144 floats fit the 7168 of the ring
  EXPECT_FALSE(fused_merge(4, 16, 128, lim.fused_max_splits));  // 8192 do not
  EXPECT_FALSE(fused_merge(2, 32, 128, lim.fused_max_splits));
}

TEST(DecodePlan, LimitsRefuseBadSizes) {
  DecodePlanArgs a;
  a.batch = 2, a.s_q = 1, a.num_heads_q = 32, a.num_heads_kv = 8, a.head_dim = 128;
  DecodePlanLimits lim;
  EXPECT_TRUE(flashkit::detail::decode_plan_limits(a, 132, &lim).ok());
  EXPECT_EQ(lim.hr, 8);
  EXPECT_EQ(lim.rows_max, 4);
  EXPECT_FALSE(flashkit::detail::decode_plan_limits(a, 0, &lim).ok());
  a.split_size = 100;  // not a multiple of 64
  EXPECT_FALSE(flashkit::detail::decode_plan_limits(a, 132, &lim).ok());
}

}  // namespace

// Which calls self-plan (kernels/decode/self_plan.cuh): only the one-call form (the plan kernel launched
// just before the split kernel), on compute capability >= 9, with at most kSelfPlanMaxBatch sequences;
// FLASHKIT_DECODE_SELF_PLAN=0 turns it off and =verify asks for the checking form, read at every call.
TEST(DecodePlan, SelfPlanMode) {
  using flashkit::detail::decode_self_plan_mode;
  const char* saved = std::getenv("FLASHKIT_DECODE_SELF_PLAN");
  const std::string keep = saved != nullptr ? saved : "";
  unsetenv("FLASHKIT_DECODE_SELF_PLAN");
  EXPECT_EQ(decode_self_plan_mode(true, 9, 1), 1);
  EXPECT_EQ(decode_self_plan_mode(true, 10, flashkit::kSelfPlanMaxBatch), 1);
  EXPECT_EQ(decode_self_plan_mode(true, 9, flashkit::kSelfPlanMaxBatch + 1), 0);
  EXPECT_EQ(decode_self_plan_mode(false, 9, 1), 0);  // decode_run: an earlier plan
  EXPECT_EQ(decode_self_plan_mode(true, 8, 1), 0);   // no programmatic dependent launch
  setenv("FLASHKIT_DECODE_SELF_PLAN", "0", 1);
  EXPECT_EQ(decode_self_plan_mode(true, 9, 1), 0);
  setenv("FLASHKIT_DECODE_SELF_PLAN", "verify", 1);
  EXPECT_EQ(decode_self_plan_mode(true, 9, 4), 2);
  EXPECT_EQ(decode_self_plan_mode(false, 9, 4), 0);
  setenv("FLASHKIT_DECODE_SELF_PLAN", "1", 1);
  EXPECT_EQ(decode_self_plan_mode(true, 9, 4), 1);
  if (saved != nullptr) setenv("FLASHKIT_DECODE_SELF_PLAN", keep.c_str(), 1); else unsetenv("FLASHKIT_DECODE_SELF_PLAN");
}

// The narrow 8-bit kernels' 32-bit offsets (plan_math.h off32_units): the strides in units where every offset of the
// cache fits below kOff32None, false (units untouched) otherwise; such calls take the 16-row kernels.
TEST(DecodePlan, Off32Units) {
  using flashkit::decode_math::kOff32None;
  using flashkit::decode_math::off32_units;
  uint32_t pu = 7, su = 7;
  // An NHD int8 cache of 4096 pages of 16 slots, 8 heads of 128: bytes = elements.
  ASSERT_TRUE(off32_units(4096, 16, 16 * 8 * 128, 8 * 128, 16, &pu, &su));
  EXPECT_EQ(pu, 16u * 8 * 128 / 16);
  EXPECT_EQ(su, 8u * 128 / 16);
  // HND: slot stride 128, page stride H * page * 128.
  ASSERT_TRUE(off32_units(1000, 64, 8 * 64 * 128, 128, 16, &pu, &su));
  EXPECT_EQ(pu, 8u * 64 * 8);
  EXPECT_EQ(su, 8u);
  // Extents of 1: the stride never multiplies anything (unit 0), whatever it is.
  ASSERT_TRUE(off32_units(1, 16, int64_t{1} << 40, 128, 16, &pu, &su));
  EXPECT_EQ(pu, 0u);
  ASSERT_TRUE(off32_units(300, 1, 4096, 3, 16, &pu, &su));
  EXPECT_EQ(su, 0u);
  // Scales (unit 1): [pages, page, H] floats.
  ASSERT_TRUE(off32_units(4096, 16, 16 * 8, 8, 1, &pu, &su));
  EXPECT_EQ(pu, 128u);
  EXPECT_EQ(su, 8u);
  // The largest offset just below the marker fits; one unit more does not.
  const int64_t unit = 16;
  const int64_t pages = 65536, page_u = (int64_t(kOff32None) - 1) / (pages - 1);  // (pages - 1) * page_u < marker
  ASSERT_TRUE(off32_units(pages, 1, page_u * unit, 0, unit, &pu, &su));
  EXPECT_EQ(pu, uint32_t(page_u));
  const int64_t over = int64_t(kOff32None) / (pages - 1) + 1;  // (pages - 1) * over > marker
  pu = su = 7;
  EXPECT_FALSE(off32_units(pages, 1, over * unit, 0, unit, &pu, &su));
  EXPECT_EQ(pu, 7u);  // untouched
  // 16 KB pages: 2^22 of them (64 GB, the 32-bit range of 16-byte units; the last slot starts below it) fit, one page
  // more does not.
  EXPECT_TRUE(off32_units(int64_t{1} << 22, 16, int64_t{1} << 14, int64_t{1} << 10, 16, &pu, &su));
  EXPECT_FALSE(off32_units((int64_t{1} << 22) + 1, 16, int64_t{1} << 14, int64_t{1} << 10, 16, &pu, &su));
  EXPECT_TRUE(off32_units((int64_t{1} << 22) - 64, 16, int64_t{1} << 14, int64_t{1} << 10, 16, &pu, &su));
  // Page and slot terms together: each alone fits, the sum does not.
  EXPECT_FALSE(off32_units(2, 2, (int64_t(kOff32None) - 1) * unit, 16 * unit, unit, &pu, &su));
  // Strides that are not whole units, negative strides, empty extents.
  EXPECT_FALSE(off32_units(16, 16, 4096 + 8, 256, 16, &pu, &su));
  EXPECT_FALSE(off32_units(16, 16, 4096, 264 + 4, 16, &pu, &su));
  EXPECT_FALSE(off32_units(16, 16, -4096, 256, 16, &pu, &su));
  EXPECT_FALSE(off32_units(0, 16, 4096, 256, 16, &pu, &su));
  // A stride whose units alone reach the marker.
  EXPECT_FALSE(off32_units(2, 16, int64_t(kOff32None) * unit, 256, unit, &pu, &su));
}
