// The arithmetic of the paged-decode plan (plan_kernel.cuh), host- and device-callable so that
// the CPU tests run the same functions (tests/cpp/test_decode_plan.cpp checks the plans they make
// against the workspace bounds of api/decode.cpp for batches of every shape).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FLASHKIT_DECODE_PLAN_HD __host__ __device__ __forceinline__
#else
#define FLASHKIT_DECODE_PLAN_HD inline
#endif

namespace flashkit::decode_math {

// A balanced call is tiny where its target is at most this many tokens per CTA (half a 64-token tile).
constexpr int64_t kTinyPerCta = 32;

// The balanced target before rounding: the total work hr * total over target_ctas, in tokens per CTA.
FLASHKIT_DECODE_PLAN_HD int64_t per_cta_tokens(int64_t total, int hr, int target_ctas) {
  return (total * hr + target_ctas - 1) / target_ctas;
}

// Tokens per split (step 2 of the plan). Fixed (split_size > 0): split_size. Balanced: the
// total work hr * total over target_ctas, rounded up to whole 64-token tiles and at least
// min_chunk (min_chunk_tiny where that target is at most 32 tokens per CTA). At most 2^30.
FLASHKIT_DECODE_PLAN_HD int64_t plan_chunk(int64_t total, int hr, int target_ctas, int split_size, int min_chunk,
                                           int min_chunk_tiny) {
  int64_t chunk;
  if (split_size > 0) {
    chunk = split_size;
  } else {
    const int64_t per_cta = per_cta_tokens(total, hr, target_ctas);
    chunk = ((per_cta + 63) / 64) * 64;
    // Tiny calls (at most half a 64-token tile per target CTA: B 1 with GQA at ~1k tokens)
    // take one-tile splits: the shortest critical path, still one wave.
    const int64_t floor = per_cta <= kTinyPerCta ? min_chunk_tiny : min_chunk;
    if (chunk < floor) chunk = floor;
  }
  if (chunk > (int64_t{1} << 30)) chunk = int64_t{1} << 30;
  return chunk;
}

// Partial rows the combine kernel stages per round (kStageFloats / kCombineCols in
// combine_kernel.cuh, which asserts it): a sequence of n splits of R valid rows is one staging
// round while n * R <= this.
constexpr int kCombineStageRows = 512;

// The most splits per sequence of a short balanced call whose item rows are many (0: no cap).
// Where a KV head has >= kCapMinRows valid rows per item and the call's balanced target sits at the
// shortest split (more than kTinyPerCta and at most min_chunk tokens per target CTA), n is capped at
//   min(kCombineStageRows / rows_max   -- the combine merges the partials in one staging round,
//       target_ctas / (2 h_kv))         -- half a wave of split CTAs per KV head,
// trading split-phase parallelism, which such a call has in excess, for a cheaper combine, where
// the combine's work grows with rows x splits. Measured (H100, 2026-11-28; docs/kernels/decode.md
// "Splits of short calls with many rows"). Fixed split sizes are never capped (batch invariance).
constexpr int kCapMinRows = 16;
FLASHKIT_DECODE_PLAN_HD int split_cap(int64_t total, int hr, int target_ctas, int split_size, int min_chunk,
                                      int rows_max, int h_kv, bool enabled) {
  if (!enabled || split_size > 0 || rows_max < kCapMinRows || target_ctas < 1 || h_kv < 1) return 0;
  const int64_t per_cta = per_cta_tokens(total, hr, target_ctas);
  if (per_cta <= kTinyPerCta || per_cta > min_chunk) return 0;
  const int by_combine = kCombineStageRows / rows_max;
  const int by_wave = target_ctas / (2 * h_kv);
  const int cap = by_combine < by_wave ? by_combine : by_wave;
  return cap < 1 ? 1 : cap;
}

// Splits of a sequence of `len` tokens and their (even) chunk. Fixed: ceil(len / target) splits
// of exactly target tokens (one for an empty sequence). Balanced: n = max(1, round(len /
// target)) (nearest, so that 2.06 targets make 2 splits, not 3, and the wave stays full) of
// ceil(len / n) tokens rounded up to 64, then as many of those as hold tokens; with cap > 0
// (split_cap, balanced only) n is at most cap.
FLASHKIT_DECODE_PLAN_HD void splits_of(int64_t len, int64_t target, bool fixed, int cap, int* n, int64_t* chunk) {
  if (fixed) {
    *chunk = target;
    *n = len == 0 ? 1 : int((len + target - 1) / target);
    return;
  }
  const int64_t k = (len + target / 2) / target;
  *n = k < 1 ? 1 : int(k);
  if (cap > 0 && *n > cap) *n = cap;
  const int64_t even = (len + *n - 1) / *n;
  *chunk = ((even + 63) / 64) * 64;
  // The rounding up to 64 can leave the last splits empty (650 tokens at a 64-token target: 10
  // splits of 128, 4 of them empty): count the splits that hold tokens.
  if (len > 0) *n = int((len + *chunk - 1) / *chunk);
}

// 32-bit offset rings of the narrow 8-bit split kernels (split_kernel.cuh, FLASHKIT_DECODE_OFF32). A token's offset from
// its head's base, page * page_stride + slot * slot_stride, is kept in units of `unit` elements (16 one-byte elements
// for the K / V rows, 1 for the fp32 scales) below kOff32None, which marks a slot with no valid token. off32_units gives
// the strides in units (0 along an extent of 1, where the index is always 0) if every offset of a cache of num_pages
// pages of page_size slots fits, and false (units untouched) otherwise: negative or non-multiple strides, or a cache
// too large; those calls take the 16-row kernels, which keep 64-bit offsets.
constexpr uint32_t kOff32None = 0xFFFFFFFFu;
FLASHKIT_DECODE_PLAN_HD bool off32_units(int64_t num_pages, int64_t page_size, int64_t page_stride, int64_t slot_stride,
                                         int64_t unit, uint32_t* page_u, uint32_t* slot_u) {
  if (num_pages < 1 || page_size < 1 || unit < 1 || page_stride < 0 || slot_stride < 0) return false;
  const uint64_t pu = num_pages > 1 ? uint64_t(page_stride) / uint64_t(unit) : 0;
  const uint64_t su = page_size > 1 ? uint64_t(slot_stride) / uint64_t(unit) : 0;
  if ((num_pages > 1 && page_stride % unit != 0) || (page_size > 1 && slot_stride % unit != 0)) return false;
  if (pu >= kOff32None || su >= kOff32None) return false;
  // Each product < 2^32 * 2^63 / 2^32: num_pages and page_size are int32 in every caller (< 2^31), so < 2^63; the sum
  // of two such terms fits an uint64.
  const uint64_t largest = pu * uint64_t(num_pages - 1) + su * uint64_t(page_size - 1);
  if (largest >= kOff32None) return false;
  *page_u = uint32_t(pu);
  *slot_u = uint32_t(su);
  return true;
}

}  // namespace flashkit::decode_math
