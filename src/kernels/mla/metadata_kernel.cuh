// MLA tile scheduler on the GPU (one CTA, no host sync): cuts the batch's 64-token KV blocks
// into `num_parts` shares, in batch order. See docs/kernels/mla.md ("Scheduler").
//
// Costs: a piece of a sequence costs its blocks (n_b = ceil(len_b / 64)) plus
// kMlaFixedOverhead (its prologue and epilogue); empty sequences cost nothing and get no
// piece (the combine writes their rows). Greedy in batch order with
// payload = max(ceil(total / num_parts) + overhead, 2 * overhead), total = sum of
// (n_b + overhead) over non-empty sequences: see mla_metadata_kernel.
#pragma once

#include <cstdint>

#include "kernels/mla_params.h"

namespace flashkit::mla {

constexpr int kMetaThreads = 1024;

__device__ __forceinline__ int64_t mla_blocks_of(int32_t len) {
  return len > 0 ? (int64_t(len) + kMlaBlockN - 1) / kMlaBlockN : 0;
}

// Inclusive block-wide scan (every thread of the CTA calls it); *total = the sum of all.
__device__ __forceinline__ int64_t block_inclusive_scan(int64_t v, int64_t* s_warp, int64_t* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int64_t n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  if (lane == 31) s_warp[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int64_t w = lane < nwarps ? s_warp[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int64_t n = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += n;
    }
    if (lane < nwarps) s_warp[lane] = w;
  }
  __syncthreads();
  if (warp > 0) v += s_warp[warp - 1];
  *total = s_warp[nwarps - 1];
  __syncthreads();  // s_warp may be reused by the next scan
  return v;
}

// Greedy cut in batch order (FlashMLA's scheduling idea, see the header comment): part q
// takes whole sequences while `payload` allows (a piece costs its blocks + the overhead),
// and cuts the first one that does not fit after `remaining - overhead` blocks (when that is
// positive; else the part ends there). payload = ceil(total / parts) + overhead, so a batch
// of equal sequences that nearly fill a part is not split at all (the unit line cut every
// one of them: partial writes and a combine for nothing). The last part takes whatever is
// left, so coverage never depends on the payload arithmetic. The cut is sequential: thread
// 0 walks the batch through shared-memory chunks of block counts that all threads load.
constexpr int kMetaChunk = 4096;

__global__ void __launch_bounds__(kMetaThreads) mla_metadata_kernel(const MlaMetadataParams p) {
  __shared__ int64_t s_warp[32];
  __shared__ int32_t s_blocks[kMetaChunk];
  const int B = p.batch, parts = p.num_parts;
  // Parts without work (overwritten below for the others).
  for (int i = threadIdx.x; i < parts; i += blockDim.x) {
    int32_t* s = p.sched + int64_t(i) * kMlaSchedInts;
    s[0] = B, s[1] = 0, s[2] = -1, s[3] = 0, s[4] = 0, s[5] = 0, s[6] = 0, s[7] = 0;
  }
  int64_t cost = 0;
  for (int b = threadIdx.x; b < B; b += blockDim.x) {
    const int64_t n = mla_blocks_of(p.seqlens_k[b]);
    cost += n > 0 ? n + kMlaFixedOverhead : 0;
  }
  int64_t total = 0;
  block_inclusive_scan(cost, s_warp, &total);  // (also orders the initialization above)
  const int64_t payload =
      max((total + parts - 1) / parts + kMlaFixedOverhead, int64_t{2 * kMlaFixedOverhead});

  // Thread 0's walk state (carried across chunks).
  int q = 0, pieces = 0;
  int64_t remaining = payload;
  bool opened = false;
  if (threadIdx.x == 0) p.num_splits[0] = 0;
  for (int c0 = 0; c0 < B; c0 += kMetaChunk) {
    const int cn = min(kMetaChunk, B - c0);
    __syncthreads();  // the previous chunk is consumed
    for (int i = threadIdx.x; i < cn; i += blockDim.x) s_blocks[i] = int32_t(mla_blocks_of(p.seqlens_k[c0 + i]));
    __syncthreads();
    if (threadIdx.x != 0) continue;
    for (int i = 0; i < cn; ++i) {
      const int b = c0 + i;
      const int n = s_blocks[i];
      int blk = 0, split = 0;
      while (n > 0) {
        int32_t* s = p.sched + int64_t(q) * kMlaSchedInts;
        const int64_t need = int64_t(n - blk) + kMlaFixedOverhead;
        if (q == parts - 1 || remaining >= need) {  // the rest of b fits in part q
          if (!opened) s[0] = b, s[1] = blk, s[4] = split, opened = true;
          s[2] = b, s[3] = n;
          remaining -= need;
          ++split;
          break;
        }
        const int64_t take = remaining - kMlaFixedOverhead;
        if (take > 0) {  // part q ends inside b
          if (!opened) s[0] = b, s[1] = blk, s[4] = split;
          s[2] = b, s[3] = blk + int32_t(take);
          blk += int32_t(take);
          ++split;
        }
        ++q;  // (a fresh part always takes >= overhead blocks: payload >= 2 * overhead)
        remaining = payload;
        opened = false;
      }
      pieces += split;
      p.num_splits[b + 1] = pieces;
    }
  }
}

}  // namespace flashkit::mla
