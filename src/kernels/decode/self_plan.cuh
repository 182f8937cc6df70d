// Self-planned split CTAs (sm_90, calls of at most kSelfPlanMaxBatch (decode_params.h) sequences whose plan kernel
// is launched just before the split kernel: decode()'s one-call form).
//
// The split CTAs become resident as soon as the plan kernel starts (programmatic dependent
// launch) and used to wait in griddepcontrol.wait until it completed (~4 us at B 1, H100 trace)
// before reading their item from the workspace. With DecodeParams::self_plan each warp of a
// split CTA computes the CTA's item itself from seqlens_k, with the arithmetic of
// decode_plan_kernel (plan_math.h; the same lengths: the one-call form plans with capacity
// 2^31 - 1, so a length is only clamped at 0), and the CTA streams its K/V at once. It waits for
// the plan only before its first global write (partial / output, the fused merge's counter),
// where the plan has long finished; the plan kernel still writes everything the combine kernel
// and the fused merge read (entries, header, zeroed counters), and the split kernel's
// launch_dependents stays after that wait, so the combine's reads before its own wait remain
// safe (combine_kernel.cuh).
//
// Reading seqlens_k, the block table, q and the cache before the wait is safe because the plan
// kernel is launched without PDL: the split grid cannot start before every earlier kernel of the
// stream has completed. A call that reuses an earlier plan (decode_run) never sets self_plan.
// docs/kernels/decode.md "Self-planned split CTAs".
#pragma once

#include <cstdint>

#include "kernels/decode/plan_math.h"
#include "kernels/decode_params.h"

namespace flashkit::decode {

// Split `split` of head row `h` of sequence b (length len, n splits of chunk_b tokens, partial slots
// from first_partial where n > 1; merged by its last split CTA where fused). The plan kernel and the
// self-planned CTAs build their items here, so that both are the same bit for bit.
__device__ __forceinline__ DecodeItem make_item(int b, int h, int split, int len, int n, int64_t chunk_b,
                                                int first_partial, int hr, bool fused) {
  DecodeItem it;
  it.batch = b;
  it.hr = h;
  it.t_begin = int(min(int64_t(len), int64_t(split) * chunk_b));
  it.t_end = int(min(int64_t(len), int64_t(split + 1) * chunk_b));
  it.partial = n > 1 ? (first_partial + split) * hr + h : -1;
  it.split = split;
  it.len = len;
  it.merge_n = fused ? n : 0;
  return it;
}

// Item `cta` of the plan decode_plan_kernel writes for this call, computed by the calling warp
// (all 32 lanes, converged). Returns the plan's item count (0 where the plan does not fit the
// workspace: the plan kernel flags that); `it` is set only when cta < the count.
__device__ __forceinline__ int self_plan_item(const DecodeParams& p, int cta, DecodeItem& it) {
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = threadIdx.x % 32;
  const int B = p.batch;
  const int hr = p.hr_count;
  int len = 0;
  if (lane < B) {
    const int raw = p.seqlens_k[lane];
    len = raw < 0 ? 0 : raw;
  }
  unsigned long long total = unsigned(len);
#pragma unroll
  for (int d = 16; d >= 1; d /= 2) total += __shfl_xor_sync(kAll, total, d);
  const int64_t chunk = decode_math::plan_chunk(int64_t(total), hr, p.target_ctas, p.split_size, p.min_chunk,
                                                p.min_chunk_tiny);
  const int rows_max = min(p.rows, p.ratio * p.s_q);
  const int cap = decode_math::split_cap(int64_t(total), hr, p.target_ctas, p.split_size, p.min_chunk, rows_max,
                                         p.h_kv, p.split_cap != 0);
  int n = 0;
  int64_t chunk_b = 0;
  if (lane < B) decode_math::splits_of(len, chunk, p.split_size > 0, cap, &n, &chunk_b);
  const int parts = n > 1 ? n : 0;
  const bool fused = fused_merge(n, rows_max, p.head_dim_v, p.fused_max_splits);
  const int comb = n > 1 && !fused ? 1 : 0;
  int s_items = n, s_parts = parts, s_comb = comb;  // inclusive scans over the sequences
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int yi = __shfl_up_sync(kAll, s_items, d);
    const int yp = __shfl_up_sync(kAll, s_parts, d);
    const int yc = __shfl_up_sync(kAll, s_comb, d);
    if (lane >= d) s_items += yi, s_parts += yp, s_comb += yc;
  }
  const int64_t num_items = int64_t(__shfl_sync(kAll, s_items, 31)) * hr;
  const bool fits = num_items <= p.max_items && int64_t(__shfl_sync(kAll, s_parts, 31)) * hr <= p.max_partials &&
                    int64_t(__shfl_sync(kAll, s_comb, 31)) * hr <= p.max_combines;
  if (!fits) return 0;
  if (int64_t(cta) >= num_items) return int(num_items);
  // The item's sequence: the last b with item_base[b] * hr <= cta (lane 0's base is 0).
  const int base = s_items - n;
  const unsigned at_or_before = __ballot_sync(kAll, lane < B && int64_t(base) * hr <= cta);
  const int b = 31 - __clz(at_or_before);
  const int base_b = __shfl_sync(kAll, base, b);
  const int n_b = __shfl_sync(kAll, n, b);
  const int len_b = __shfl_sync(kAll, len, b);
  const int first_partial = __shfl_sync(kAll, s_parts - parts, b);
  const int64_t chunk_bb = static_cast<int64_t>(__shfl_sync(kAll, static_cast<long long>(chunk_b), b));
  const bool fused_b = __shfl_sync(kAll, fused ? 1 : 0, b) != 0;
  const int local_i = cta - base_b * hr;
  const int split = local_i / hr;
  it = make_item(b, local_i - split * hr, split, len_b, n_b, chunk_bb, first_partial, hr, fused_b);
  return int(num_items);
}

}  // namespace flashkit::decode
