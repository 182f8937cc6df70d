// Plain-data parameters of the dense attention forward kernels (all families).
// Filled by the launch layer from validated TensorRefs; strides are in elements.
#pragma once

#include <cstdint>

#include "kernels/tma_desc.h"
#include "prims/fastdiv.h"

namespace flashkit {

struct FwdParams {
  const void* __restrict__ q;
  const void* __restrict__ k;
  const void* __restrict__ v;
  void* __restrict__ o;
  float* __restrict__ lse;  // nullptr: not written

  // Strides in elements. In varlen mode the batch strides are unused: sequence b starts
  // at row cu_seqlens[b] of a [total, H, D] tensor.
  int64_t q_batch_stride, q_row_stride, q_head_stride;
  int64_t k_batch_stride, k_row_stride, k_head_stride;
  int64_t v_batch_stride, v_row_stride, v_head_stride;
  int64_t o_batch_stride, o_row_stride, o_head_stride;
  // lse[b, h, i] = lse[b * lse_batch_stride + h * lse_head_stride + i]; varlen: b's rows
  // start at cu_seqlens_q[b] and lse_batch_stride is 0.
  int64_t lse_batch_stride, lse_head_stride;

  // Varlen: device memory, never trusted. The kernels clamp every range they read to
  // [0, total_q/k] and report what they found in *error_flag (flashkit/errors.h).
  const int32_t* __restrict__ cu_seqlens_q;  // nullptr unless varlen
  const int32_t* __restrict__ cu_seqlens_k;
  uint32_t* error_flag;  // the device error word (launch/device_errors.h); may be null

  int batch;
  int h_q, h_kv, h_ratio;  // h_ratio = h_q / h_kv (GQA group size)
  // Division by h_q and by h_ratio as multiply-highs (prims/fastdiv.h), for the kernels'
  // tile decode: filled with h_q / h_ratio by make_fwd_params.
  prims::FastDiv div_h_q, div_h_ratio;
  int seqlen_q, seqlen_k;  // fixed lengths, or upper bounds in varlen mode (the grid
                           // covers seqlen_q rows): min(max_seqlen, total)
  int total_q, total_k;    // rows of q and k: S_q/S_k (dense), total_q/total_k (varlen)
  int head_dim;

  float softmax_scale;       // applied to q k^T
  // The scale of the (capped) scores in base 2: softmax_scale * log2(e), or log2(e) with a
  // softcap (the cap's input already carries softmax_scale). The kernels work in base 2.
  float softmax_scale_log2;
  bool causal;
  // Sliding window: -1 = unbounded; window_right is 0 when causal (the kernels test causal).
  int window_left, window_right;
  // Softcap: softcap > 0 turns a raw score s into softcap * tanh(s * softcap_scale) with
  // softcap_scale = softmax_scale / softcap; 0: off.
  float softcap, softcap_scale;

  // Tile order, set by the launcher (not by callers): (batch, head) pairs are taken in
  // groups of `sched_group` (launch/fwd_sched.h: 1 without a mask and in the persistent
  // kernel's walk; causal grid kernels: as many as keep their K/V in the L2); within a
  // group, row blocks run heaviest-first (matters with a causal mask).
  int sched_group;
  int num_m_blocks;

  // Hopper forward with TMA loads only (set by its launcher, launch/fwd_sm90_launch.cuh):
  // maps of K and V with dims (innermost first) head_dim, rows, h_kv, batch (varlen: rows =
  // total_k and a batch of 1), boxes of 64 columns x kBlockN rows, 128-byte swizzle.
  TmaDesc k_tmap, v_tmap;
  // The persistent variant also loads Q by TMA: dims head_dim, rows (varlen: total_q),
  // h_q, batch; boxes of 64 columns x 128 rows. num_tiles: the units of its walk (pairs of
  // row blocks of one (batch, head), kernel_persistent.cuh).
  TmaDesc q_tmap;
  int num_tiles;
  // Its tile decode's divisors (launch_persistent): units per group of (batch, head) pairs
  // (sched_group x pairs of row blocks), sched_group, and the last group's size.
  prims::FastDiv div_group_units, div_group, div_last_group;
  // Its walk without the snake and with each pair's units rotated by the round (set by
  // launch_persistent where that is a permutation and balances unequal units; kernel_persistent.cuh).
  int walk_rotate;
  // Its epilogue stores O by TMA where o_tma is set (FLASHKIT_FWD_TMA_STORE): O's map, dims
  // as Q's (head_dim, rows, h_q, batch), boxes of 64 columns x 64 rows (one warpgroup's).
  TmaDesc o_tmap;
  int o_tma;
};

}  // namespace flashkit
