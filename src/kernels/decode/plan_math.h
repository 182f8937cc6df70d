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

// Tokens per split (step 2 of the plan). Fixed (split_size > 0): split_size. Balanced: the
// total work hr * total over target_ctas, rounded up to whole 64-token tiles and at least
// min_chunk (min_chunk_tiny where that target is at most 32 tokens per CTA). At most 2^30.
FLASHKIT_DECODE_PLAN_HD int64_t plan_chunk(int64_t total, int hr, int target_ctas, int split_size, int min_chunk,
                                           int min_chunk_tiny) {
  int64_t chunk;
  if (split_size > 0) {
    chunk = split_size;
  } else {
    const int64_t per_cta = (total * hr + target_ctas - 1) / target_ctas;
    chunk = ((per_cta + 63) / 64) * 64;
    // Tiny calls (at most half a 64-token tile per target CTA: B 1 with GQA at ~1k tokens)
    // take one-tile splits: the shortest critical path, still one wave.
    const int64_t floor = per_cta <= 32 ? min_chunk_tiny : min_chunk;
    if (chunk < floor) chunk = floor;
  }
  if (chunk > (int64_t{1} << 30)) chunk = int64_t{1} << 30;
  return chunk;
}

// Splits of a sequence of `len` tokens and their (even) chunk. Fixed: ceil(len / target) splits
// of exactly target tokens (one for an empty sequence). Balanced: n = max(1, round(len /
// target)) (nearest, so that 2.06 targets make 2 splits, not 3, and the wave stays full) of
// ceil(len / n) tokens rounded up to 64, then as many of those as hold tokens.
FLASHKIT_DECODE_PLAN_HD void splits_of(int64_t len, int64_t target, bool fixed, int* n, int64_t* chunk) {
  if (fixed) {
    *chunk = target;
    *n = len == 0 ? 1 : int((len + target - 1) / target);
    return;
  }
  const int64_t k = (len + target / 2) / target;
  *n = k < 1 ? 1 : int(k);
  const int64_t even = (len + *n - 1) / *n;
  *chunk = ((even + 63) / 64) * 64;
  // The rounding up to 64 can leave the last splits empty (650 tokens at a 64-token target: 10
  // splits of 128, 4 of them empty): count the splits that hold tokens.
  if (len > 0) *n = int((len + *chunk - 1) / *chunk);
}

}  // namespace flashkit::decode_math
