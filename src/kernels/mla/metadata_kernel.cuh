// MLA tile scheduler on the GPU (one CTA, no host sync): cuts the batch's 64-token KV blocks
// into `num_parts` equal shares, in batch order. See docs/kernels/mla.md ("Scheduler").
//
// Cost line: every non-empty sequence b occupies kMlaFixedOverhead + n_b consecutive units
// of one line (n_b = ceil(len_b / 64); empty sequences occupy nothing): first its overhead,
// then its blocks. With S_b the units before b and the payload
//   P = max(ceil(total / num_parts), 2 * kMlaFixedOverhead),
// block k of sequence b sits at unit u = S_b + overhead + k and belongs to part u / P. So
// every block belongs to exactly one part, pieces are in order, and part q's piece of b has
// split index q - (part of b's first block). Everything is two block-wide scans (unit
// prefix, piece prefix) and a loop over the parts each sequence touches.
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

__global__ void __launch_bounds__(kMetaThreads) mla_metadata_kernel(const MlaMetadataParams p) {
  __shared__ int64_t s_warp[32];
  const int B = p.batch, parts = p.num_parts;
  // Parts without work (overwritten below for the others).
  for (int i = threadIdx.x; i < parts; i += blockDim.x) {
    int32_t* s = p.sched + int64_t(i) * kMlaSchedInts;
    s[0] = B, s[1] = 0, s[2] = -1, s[3] = 0, s[4] = 0, s[5] = 0, s[6] = 0, s[7] = 0;
  }
  // Each thread owns a run of consecutive sequences [b0, b1).
  const int per = (B + int(blockDim.x) - 1) / int(blockDim.x);
  const int b0 = min(B, int(threadIdx.x) * per), b1 = min(B, b0 + per);
  int64_t cost = 0;
  for (int b = b0; b < b1; ++b) {
    const int64_t n = mla_blocks_of(p.seqlens_k[b]);
    cost += n > 0 ? n + kMlaFixedOverhead : 0;
  }
  int64_t total = 0;
  const int64_t start = block_inclusive_scan(cost, s_warp, &total) - cost;  // also orders the init
  const int64_t payload = max((total + parts - 1) / parts, int64_t{2 * kMlaFixedOverhead});

  int64_t pieces = 0, S = start;
  for (int b = b0; b < b1; ++b) {
    const int64_t n = mla_blocks_of(p.seqlens_k[b]);
    if (n > 0) {
      const int64_t first = S + kMlaFixedOverhead;
      pieces += (first + n - 1) / payload - first / payload + 1;
      S += n + kMlaFixedOverhead;
    }
  }
  int64_t total_pieces = 0;
  int64_t split_prefix = block_inclusive_scan(pieces, s_warp, &total_pieces) - pieces;
  if (threadIdx.x == 0) p.num_splits[0] = 0;

  S = start;
  for (int b = b0; b < b1; ++b) {
    const int64_t n = mla_blocks_of(p.seqlens_k[b]);
    if (n > 0) {
      const int64_t first = S + kMlaFixedOverhead, last = first + n - 1;
      const int64_t pf = first / payload, pl = last / payload;
      const int64_t next_first = S + n + 2 * kMlaFixedOverhead;  // the next non-empty sequence's
      const bool has_next = S + n + kMlaFixedOverhead < total;
      for (int64_t q = pf; q <= pl; ++q) {
        int32_t* s = p.sched + q * kMlaSchedInts;
        // b is the part's first sequence unless the previous one's last block (unit S - 1) is
        // in it too; its last unless the next one's first block is.
        if (q > pf || S == 0 || (S - 1) / payload < pf) {
          s[0] = b;
          s[1] = int32_t(max(q * payload - first, int64_t{0}));
          s[4] = int32_t(q - pf);
        }
        if (q < pl || !has_next || next_first / payload > pl) {
          s[2] = b;
          s[3] = int32_t(min((q + 1) * payload - first, n));
        }
      }
      split_prefix += pl - pf + 1;
      S += n + kMlaFixedOverhead;
    }
    p.num_splits[b + 1] = int32_t(split_prefix);
  }
}

}  // namespace flashkit::mla
