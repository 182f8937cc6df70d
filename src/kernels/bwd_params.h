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
  //  dq_semaphore int32 [batch, h_q, sem_m_blocks] (deterministic mode only).
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
  // Key blocks launched key-major (set by the launchers of the kernels that take it; never the
  // D 256 pair kernel, whose clusters pair adjacent blockIdx.x): the grid stays (key blocks,
  // h_kv, batch), but a CTA's linear launch index is read as key block first, so every (batch,
  // KV head) group's heaviest key block under a causal mask starts before any group's second
  // (attn::make_bwd_cta; docs/kernels/bwd.md, "Key-major launch order").
  bool key_major = false;
};

// A/B switch: 0 compiles the key-major launch out (the launchers never set key_major, the kernels
// read the grid as (key blocks, h_kv, batch) only). Defined here so that an instantiation file's
// launcher and kernels agree.
#ifndef FLASHKIT_BWD_KEY_MAJOR_REMAP
#define FLASHKIT_BWD_KEY_MAJOR_REMAP 1
#endif

}  // namespace flashkit
