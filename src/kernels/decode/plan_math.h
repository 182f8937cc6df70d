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

}  // namespace flashkit::decode_math
