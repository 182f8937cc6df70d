// Paged-decode plan: the split schedule computed on the GPU from seqlens_k, with no host
// sync, so that plan + split + combine can be captured in one CUDA graph and replayed
// with new lengths.
//
// One CTA. With a fixed split size (split_size > 0) sequence b gets n_b = ceil(len_b /
// split_size) splits of exactly split_size tokens: they depend on its own length only,
// so its output bits do not depend on the rest of the batch. Otherwise (balanced) the
// target is the total work hr_count * sum(len) over target_ctas (the split CTAs resident
// on the GPU: one wave), rounded up to whole 64-token tiles and at least min_chunk
// (min_chunk_tiny where that target is at most 32 tokens);
// n_b = max(1, round(len_b / target)) (nearest, so that e.g. 2.06 targets make 2 splits,
// not 3, and the wave stays full) and the splits are even: ceil(len_b / n_b) rounded up
// to 64. With target >= hr_count * sum(len) / target_ctas the counts are bounded
// independently of the lengths, which is what sizes the workspace:
//   items    = hr_count * sum_b n_b            <= hr_count * B + target_ctas
//   partials = hr_count * sum_{n_b>1} n_b      <= 4/3 * target_ctas
//   combines = hr_count * #{b : n_b > 1}       <= 2/3 * target_ctas
// (n_b >= 2 needs len_b >= 1.5 target, so n_b <= len_b / target + 1/2 <= 4/3 len_b /
// target.) Items are laid out sequence by sequence, split-major, so the CTAs in flight
// read neighbouring heads of the same pages.
#pragma once

#include <cstdint>

#include "kernels/decode/plan_math.h"
#include "kernels/decode/split_kernel.cuh"  // clamped_len, make_item (self_plan.cuh)
#include "kernels/decode_params.h"

namespace flashkit::decode {

constexpr int kPlanThreads = 512;

// Block-wide exclusive scan of one int per thread; returns the prefix, writes the total.
__device__ __forceinline__ int block_exclusive_scan(int v, int* total, int* s_warp) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int x = v;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) s_warp[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int w = lane < kPlanThreads / 32 ? s_warp[lane] : 0;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int y = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += y;
    }
    if (lane < kPlanThreads / 32) s_warp[lane] = w;  // inclusive warp prefixes
  }
  __syncthreads();
  const int before = (warp > 0 ? s_warp[warp - 1] : 0) + x - v;
  *total = s_warp[kPlanThreads / 32 - 1];
  __syncthreads();  // s_warp is reused by the next scan
  return before;
}

__global__ void __launch_bounds__(kPlanThreads) decode_plan_kernel(const DecodeParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");  // the split kernel may get resident
#endif
  __shared__ int s_warp[kPlanThreads / 32];
  __shared__ unsigned long long s_total;
  const int tid = threadIdx.x;
  const int B = p.batch;
  const int hr = p.hr_count;

  // 1. Total clamped length; out-of-range lengths set the error bit.
  if (tid == 0) s_total = 0;
  __syncthreads();
  unsigned long long local = 0;
  bool bad_len = false;
  for (int b = tid; b < B; b += kPlanThreads) {
    const int raw = p.seqlens_k[b];
    bad_len |= raw < 0 || int64_t(raw) > p.capacity;
    local += unsigned(clamped_len(p, b));
  }
  if (bad_len) atomicOr(p.errors, uint32_t(kDecodeErrSeqlen));
  atomicAdd(&s_total, local);
  __syncthreads();
  const int64_t total = int64_t(s_total);

  // 2. Chunk.
  const int64_t chunk = decode_math::plan_chunk(total, hr, p.target_ctas, p.split_size, p.min_chunk, p.min_chunk_tiny);
  const int rows_max = min(p.rows, p.ratio * p.s_q);
  const int cap = decode_math::split_cap(total, hr, p.target_ctas, p.split_size, p.min_chunk, rows_max, p.h_kv,
                                         p.split_cap != 0);

  // 3. Splits per sequence, scans of items / partial rows / combines; combine entries
  // (sequences the split kernel merges itself get none: their arrival counters are zeroed).
  int run_items = 0, run_parts = 0, run_comb = 0;  // in units of splits / splits / sequences
  for (int base = 0; base < B; base += kPlanThreads) {
    const int b = base + tid;
    int n = 0;
    if (b < B) {
      int64_t chunk_b;
      decode_math::splits_of(clamped_len(p, b), chunk, p.split_size > 0, cap, &n, &chunk_b);
    }
    const int parts = n > 1 ? n : 0;
    const bool fused = fused_merge(n, rows_max, p.head_dim_v, p.fused_max_splits);  // merged by the split kernel
    const bool comb = n > 1 && !fused;                          // merged by the combine kernel
    int t_items, t_parts, t_comb;
    const int pre_items = block_exclusive_scan(n, &t_items, s_warp) + run_items;
    const int pre_parts = block_exclusive_scan(parts, &t_parts, s_warp) + run_parts;
    const int pre_comb = block_exclusive_scan(comb ? 1 : 0, &t_comb, s_warp) + run_comb;
    if (b < B) {
      p.ws.num_splits[b] = n;
      p.ws.first_partial[b] = n > 1 ? pre_parts : -1;
      p.ws.item_base[b] = pre_items;
      if (comb && int64_t(pre_comb + 1) * hr <= p.max_combines) {
        for (int h = 0; h < hr; ++h) p.ws.combines[pre_comb * hr + h] = make_int4(b, h, pre_parts, n);
      }
      if (fused) {
        for (int h = 0; h < hr; ++h) p.ws.counters[int64_t(b) * hr + h] = 0;
      }
    }
    run_items += t_items;
    run_parts += t_parts;
    run_comb += t_comb;
  }
  const int64_t num_items = int64_t(run_items) * hr;
  const bool fits = num_items <= p.max_items && int64_t(run_parts) * hr <= p.max_partials &&
                    int64_t(run_comb) * hr <= p.max_combines;
  __syncthreads();  // item_base, num_splits, first_partial visible to the whole block

  // 4. Items, spread evenly over the threads: each finds the sequence of its first item by
  // binary search over item_base, then walks forward.
  if (fits) {
    const int64_t per_thread = (num_items + kPlanThreads - 1) / kPlanThreads;
    const int64_t i0 = min(num_items, per_thread * tid);
    const int64_t i1 = min(num_items, i0 + per_thread);
    if (i0 < i1) {
      int lo = 0, hi = B - 1;  // last b with item_base[b] * hr <= i0
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (int64_t(p.ws.item_base[mid]) * hr <= i0) lo = mid; else hi = mid - 1;
      }
      int b = lo;
      for (int64_t i = i0; i < i1; ++i) {
        while (b + 1 < B && int64_t(p.ws.item_base[b + 1]) * hr <= i) ++b;
        const int local_i = int(i - int64_t(p.ws.item_base[b]) * hr);
        const int split = local_i / hr, h = local_i - (local_i / hr) * hr;
        const int fp = p.ws.first_partial[b];
        const int64_t len = clamped_len(p, b);
        int n;
        int64_t chunk_b;
        decode_math::splits_of(len, chunk, p.split_size > 0, cap, &n, &chunk_b);
        const DecodeItem it = make_item(b, h, split, int(len), n, chunk_b, fp, hr,
                                        fused_merge(n, rows_max, p.head_dim_v, p.fused_max_splits));
        p.ws.items[i] = it;
      }
    }
  }
  if (tid == 0) {
    if (!fits) atomicOr(p.errors, uint32_t(kDecodeErrPlan));
    p.ws.header[kHdrNumItems] = fits ? int(num_items) : 0;
    p.ws.header[kHdrNumCombines] = fits ? run_comb * hr : 0;
    p.ws.header[kHdrChunk] = int(chunk);
    p.ws.header[kHdrTotalTokens] = int(total < INT32_MAX ? total : INT32_MAX);
    p.ws.header[kHdrBatch] = B;
    p.ws.header[kHdrHrCount] = hr;
    p.ws.header[kHdrTargetCtas] = p.target_ctas;
  }
}

}  // namespace flashkit::decode
