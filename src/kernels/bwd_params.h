// Plain-data parameters of the dense attention backward kernels. Extends FwdParams (the
// forward's q/k/v/out pointers, strides, sizes, varlen arrays, scale, mask, error word:
// `o` is the forward output, `lse` its log-sum-exp, read here) with the gradients and the
// workspace. Filled by src/api/attention_bwd.cpp from validated TensorRefs.
#pragma once

#include <cstdint>

#include "kernels/attention_params.h"

namespace flashkit {

struct BwdParams : FwdParams {
  const void* __restrict__ dout;  // like o
  void* __restrict__ dq;          // like q
  void* __restrict__ dk;          // like k
  void* __restrict__ dv;          // like v
  int64_t do_batch_stride, do_row_stride, do_head_stride;
  int64_t dq_batch_stride, dq_row_stride, dq_head_stride;
  int64_t dk_batch_stride, dk_row_stride, dk_head_stride;
  int64_t dv_batch_stride, dv_row_stride, dv_head_stride;

  // Workspace (see bwd_workspace_layout in src/api/attention_bwd.cpp):
  //  dq_accum fp32 [rows_q, h_q, head_dim] contiguous; row r of sequence b is
  //    b * seqlen_q + i (dense) or cu_seqlens_q[b] + i (varlen);
  //  delta fp32 = rowsum(dout * out), laid out like lse (lse_batch/head_stride);
  //  dq_semaphore int32 [batch, h_q, sem_m_blocks] (deterministic mode only);
  //  dq_exp int32 like delta and dq_kvbound fp32 [h_q][2] (deterministic mode only; below).
  float* dq_accum;
  float* delta;
  int32_t* dq_semaphore;
  int rows_q;        // rows of q (B * S_q dense, total_q varlen)
  int sem_m_blocks;  // row blocks per (batch, head) counted by dq_semaphore
  bool deterministic;

  // Hopper ping-pong backward with TMA loads only (set by its launcher): maps of Q and dO
  // with dims (innermost first) head_dim, rows, h_q, batch (varlen: rows = total_q and a
  // batch of 1), boxes of 64 columns x 64 rows, 128-byte swizzle.
  TmaDesc q_tmap, do_tmap;
  // ... and, fast mode with dQ by TMA reduce-adds (set by the same launcher), a map of
  // dq_accum: fp32, dims head_dim, h_q, rows (seqlen_q; varlen: total_q), batch (varlen: 1),
  // boxes of 32 columns x 1 head x 16 rows (one warp's), 128-byte swizzle.
  TmaDesc dq_tmap;
  // Deterministic mode of that kernel without a mask (set by its launcher): each CTA walks its
  // row blocks rotated and the dq turns follow (attn::BwdCta::m_block_rot / dq_turn_rot).
  bool dq_rotate = false;
  // GQA group split (set by the D 64 / 128 launcher for its TMA reduce-add kernels only): the
  // 2^gqa_split_log2 CTAs of one cluster share a key block of one KV head, each walking
  // h_ratio >> gqa_split_log2 of the group's query heads (grid.x = key blocks << log2, cluster
  // along x), and sum their dK / dV through distributed shared memory in a fixed order before one
  // store (kernel_pp.cuh; docs/kernels/bwd.md, "GQA: the group split"). 0: one CTA per key block.
  int gqa_split_log2 = 0;
  // Deterministic mode by fixed-point dQ (dq_fixed, set by the Hopper launcher for the D 64 / 128
  // TMA reduce-add kernels; docs/kernels/bwd.md "Deterministic dQ in fixed point"): dq_accum holds
  // int32 sums of round(dQ_i * 2^dq_exp[i]), which integer adds give the same bits in any order,
  // so no CTA waits for another. dq_exp (int32, laid out like delta) is row i's exponent, from a
  // bound on |dQ_i| that the pre kernel derives from ||dO_i||_2 and dq_kvbound ([h_kv][2] fp32:
  // max |K| and max_j ||V_j||_2 of each KV head, bwd_kvbound_kernel); kDqExpNonFinite marks a
  // row whose bound is not finite (the post kernel writes NaN there).
  int32_t* dq_exp = nullptr;
  float* dq_kvbound = nullptr;
  bool dq_fixed = false;
  // Chunked launch order under a right bound (set by the Hopper launcher where no CTA waits for
  // another and no cluster pairs neighbouring blockIdx.x; attn::make_bwd_cta; docs/kernels/bwd.md
  // "Chunked launch order"): the grid stays (key blocks, h_kv, batch), but its linear launch index is
  // read as chunks of order_chunk (batch, KV head) groups, key block first inside a chunk, so the
  // heaviest key blocks of a chunk's groups start together while the groups running at once stay
  // few (their Q / dO stay in L2). 0: the grid's order (key blocks fastest).
  int order_chunk = 0;
};

// dq_exp of a row whose bound is inf or NaN (inputs with non-finite values).
constexpr int32_t kDqExpNonFinite = -(1 << 30);

}  // namespace flashkit
