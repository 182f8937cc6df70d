// FlashKit public API: attention decoding over a paged KV cache (Flash-Decoding with a
// GPU-side plan), and the append of new tokens into the cache.
//
//   out = softmax(q k^T * softmax_scale [+ causal mask]) v   over each sequence's cached keys
//
// Layout (SPEC §2):
//   q          [B, s_q, H_q, D]            s_q = 1..16 new tokens per sequence
//   k_cache    [num_pages, page_size, H_kv, D]    any strides, last dim contiguous: the
//   v_cache    [num_pages, page_size, H_kv, D_v]  NHD layout and the HND layout (a
//                                                   permuted view) both work
//   block_table [B, max_pages] int32      page ids of each sequence, in order
//   seqlens_k  [B] int32                  cached tokens, the new ones included
//   out        [B, s_q, H_q, D_v]         lse [B, H_q, s_q] fp32 (optional)
// Query token t of sequence b sits at position seqlens_k[b] - s_q + t; with `causal` it
// sees keys j <= that position (the cache and the new tokens before it), else all
// seqlens_k[b] keys. A row that sees no key gets out = 0 and lse = -inf.
//
// Plan / run: decode_plan() computes on the GPU, from seqlens_k alone and with no host
// sync, how each sequence's KV range is cut into splits (one CTA each) and where partial
// results go, into `workspace` (decode_workspace_size() bytes, which depend only on B, the
// head counts, s_q, the head dim, the SM count and, with a fixed split size, the block
// table's capacity). decode_run() then runs the split kernel and, for sequences that were
// split, the combine kernel. Plan and run can be captured together in one CUDA graph and
// replayed with new lengths and new block tables. Re-plan whenever seqlens_k changes.
//
// Device-side index data is never trusted: a length outside [0, max_pages * page_size] is
// clamped, a block id outside [0, num_pages) is never dereferenced (its tokens are left
// out), and each sets a bit of the sticky device error word (see flashkit/errors.h).
#pragma once

#include <cstdint>

#include "flashkit/tensor.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashkit {

// The sizes a plan depends on.
struct DecodePlanArgs {
  int64_t batch = 0;       // B
  int64_t s_q = 1;         // new tokens per sequence, 1..16
  int64_t num_heads_q = 0;
  int64_t num_heads_kv = 0;
  int64_t head_dim = 0;    // 64, 128 or 256
  int64_t head_dim_v = 0;  // 0: same as head_dim
  // > 0: every split covers exactly split_size tokens (a multiple of 64), so a sequence's
  // result bits do not depend on the rest of the batch (batch invariance); then
  // max_seqlen_k (an upper bound of the lengths, e.g. max_pages * page_size) sizes the
  // workspace. 0: splits balanced over the GPU from the batch's total length.
  int64_t split_size = 0;
  int64_t max_seqlen_k = 0;
  // The KV cache's dtype when it is quantized (kInt8 or kFloat8E4M3FN); kInvalid (default)
  // for a cache in q's dtype. Must match the caches given to decode_run.
  DType kv_dtype = DType::kInvalid;
  TensorRef seqlens_k;  // [B] int32 on the device (decode_plan reads it there)
  TensorRef workspace;  // int32 or uint8, contiguous, >= decode_workspace_size bytes
};

// Quantized caches: k_cache / v_cache int8 or float8_e4m3fn (one byte per value, last dim
// contiguous, other strides multiples of 16 values) with fp32 scales per token and head,
// k_scale / v_scale [num_pages, page_size, H_kv] (value = stored * scale); the kernel
// dequantizes in registers and computes in q's dtype with fp32 accumulation. append_kv
// quantizes (symmetric, amax / 127 or amax / 448 per token and head).
struct DecodeArgs {
  TensorRef q, k_cache, v_cache, block_table, seqlens_k;
  TensorRef k_scale, v_scale;  // required for int8 / fp8 caches, absent otherwise
  TensorRef out;
  TensorRef lse;        // optional
  TensorRef workspace;  // planned by decode_plan for the same sizes (decode_run only)
  float softmax_scale = 0.f;  // <= 0 or NaN: 1/sqrt(D)
  bool causal = true;
  int64_t split_size = 0;     // as in DecodePlanArgs (must match the plan)
  int64_t max_seqlen_k = 0;
  // Check mode (or FLASHKIT_CHECK_INPUTS=1): before the launch, validate block_table and
  // seqlens_k on the GPU (every length in [0, max_pages * page_size], every block id a
  // sequence uses in [0, num_pages)) and return Invalid naming the first bad entry. It
  // synchronizes the stream; an explicit request is refused during CUDA-graph capture.
  bool check_inputs = false;
};

// Bytes of workspace a plan with these sizes needs on `device` (-1: current device).
// Reads the device's SM count once; validates the sizes (seqlens_k/workspace not needed).
Status decode_workspace_size(const DecodePlanArgs& args, int device, int64_t* bytes);

// Checks without touching the GPU.
Status validate_decode_plan(const DecodePlanArgs& args);
Status validate_decode(const DecodeArgs& args);

// GPU-side plan into args.workspace; no host sync, CUDA-graph capturable.
Status decode_plan(const DecodePlanArgs& args, cudaStream_t stream);
// Split + combine with a workspace planned for the same sizes and lengths.
Status decode_run(const DecodeArgs& args, cudaStream_t stream);
// Convenience: plan + run (args.workspace must be large enough). On Hopper, with at most 32
// sequences, the split CTAs compute their own items while the plan kernel runs, so this form costs
// ~1.5-3.5 us over decode_run instead of ~5-7 (FLASHKIT_DECODE_SELF_PLAN=0 turns that off).
Status decode(const DecodeArgs& args, cudaStream_t stream);

// Append: writes k_new [B, s_new, H_kv, D] and v_new [B, s_new, H_kv, D_v] into the slots
// of positions seqlens_k[b] - s_new + t (seqlens_k already counts the new tokens). A token
// without a valid slot is skipped and sets the append bit of the device error word.
struct AppendKVArgs {
  TensorRef k_new, v_new, k_cache, v_cache, block_table, seqlens_k;
  TensorRef k_scale, v_scale;  // int8 / fp8 caches: written with the quantized rows
};
Status validate_append_kv(const AppendKVArgs& args);
Status append_kv(const AppendKVArgs& args, cudaStream_t stream);

}  // namespace flashkit
