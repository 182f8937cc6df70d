// When the Hopper backward's ping-pong kernel (D 64 / 128) splits a GQA group's query heads over a
// cluster of CTAs (kernel_pp.cuh's kSplit instantiations, BwdParams::gqa_split_log2; docs/kernels/bwd.md
// "GQA: the group split"). Host-only and header-only, so that the CPU tests check the table.
#pragma once

namespace flashkit::launch_util {

// What the default asks of the split: the largest cluster (1 = no split, else 2, 4 or 8) for a call
// with this head dim, mode and shape. base_ctas = batch * h_kv * key blocks (128 keys each), the
// grid without a split. A measured table, not a model (H100, 2026-11-27, GQA 8, FA3 sweep: batch *
// S = 16k, so base_ctas <= 4 * SMs; env A/B, two rounds, never / 2 / 4 / 8):
//   fast,          D 128, causal, S_k 512..8k:  clusters of 2: +20..37% (16k level)
//   fast,          D 64,  causal, S_k 2k..8k:   clusters of 2: +7..15% (shorter and 16k level)
//   deterministic, D 128, causal, S_k 512 / 1k: 2 (+13 / +24%); 2k..8k: 4 (+31..39%); 16k: 8 (+15%)
// Without a mask every split lost (-1..31%), and deterministic D 64 gained too little to take
// (<= +5%, clusters of 2). GQA 4: deterministic D 128 from 2k keys, clusters of 2 (+9..23%; rechecked
// at eb5305b, bwd-logs/gqa4-split-check-h100-2026-11-27/).
// Outside the measured ground (no right bound, group not a multiple of 4,
// S_k < 512, more than 4 CTAs per SM in the plain grid, other head dims) it returns 1.
inline int bwd_gqa_split_default(int head_dim, bool deterministic, bool right_bound, int h_ratio, int seqlen_k,
                                 long long base_ctas, int num_sms) {
  if (!right_bound || h_ratio % 4 != 0 || seqlen_k < 512 || num_sms <= 0) return 1;
  if (base_ctas > 4LL * num_sms) return 1;
  if (h_ratio % 8 != 0) {
    // GQA 4 (H100, 2026-11-27, one call, causal, D 128 16 / 4 heads, D 64 32 / 8): deterministic D 128
    // clusters of 2 from 2k keys +9..23%; fast +3..7% (not taken), D 64 lost with every split.
    return head_dim == 128 && deterministic && seqlen_k >= 2048 ? 2 : 1;
  }
  if (head_dim == 128) {
    if (!deterministic) return seqlen_k <= 8192 ? 2 : 1;
    return seqlen_k <= 1024 ? 2 : seqlen_k <= 8192 ? 4 : 8;
  }
  if (head_dim == 64 && !deterministic) return seqlen_k >= 2048 && seqlen_k <= 8192 ? 2 : 1;
  return 1;
}

// The cluster's log2 for a cap (from the table or the env switch): the largest power of two <= min(cap, 8)
// that divides h_ratio.
inline int bwd_gqa_split_log2(int cap, int h_ratio) {
  int lg = 0;
  if (h_ratio > 1) {
    while (lg < 3 && (2 << lg) <= cap && h_ratio % (2 << lg) == 0) ++lg;
  }
  return lg;
}

}  // namespace flashkit::launch_util
