// FlashKit public API: MLA decoding (DeepSeek multi-head latent attention, absorbed form)
// over a paged latent cache, compatible with FlashMLA's interface.
//
// Layout:
//   q           [B, s_q, h_q, 576]        s_q = 1..4 new tokens per sequence (MTP)
//   kv_cache    [num_pages, page_size, h_kv, 576]  K = the whole vector, V = its first
//                                          512 dims; last dim contiguous, any other strides
//               or FlashMLA's FP8 layout: uint8 / float8_e4m3fn [num_pages, page_size,
//               h_kv, 656], per token 512 e4m3 NoPE values, 4 fp32 scales (one per 128:
//               value = e4m3 * scale), 64 bf16 RoPE values; byte strides multiples of 16.
//               Dequantized to q's dtype on load by the portable kernel (also on Hopper;
//               it needs 150 KB of shared memory per block, as for 16-bit caches).
//   block_table [B, max_pages] int32       page ids of each sequence, in order
//   seqlens_k   [B] int32                  cached tokens, the new ones included
//   out         [B, s_q, h_q, 512]         lse [B, h_q, s_q] fp32 (natural log)
// h_q is a multiple of h_kv with h_q / h_kv in 1..128; page_size is any value >= 1
// (16, 32, 64 and 128 are tested). With `causal`, query token t of sequence b sits at
// position seqlens_k[b] - s_q + t and sees keys j <= that position. A row that sees no
// key gets out = 0 and lse = +inf (FlashMLA's convention).
//
// Two steps, as in FlashMLA: mla_metadata() cuts the batch's KV blocks into `num_parts`
// equal shares on the GPU (no host sync; num_parts from mla_num_parts()), then
// mla_decode() runs the split kernel and the combine kernel with that schedule. Both can
// be captured in one CUDA graph and replayed with new lengths and block tables (re-run
// the metadata whenever seqlens_k changes). Device-side index data is never trusted: a
// length outside [0, max_pages * page_size] is clamped and a block id outside
// [0, num_pages) is never dereferenced (its tokens are left out); each sets a bit of the
// sticky device error word (flashkit/errors.h).
#pragma once

#include <cstdint>

#include "flashkit/tensor.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashkit {

// Number of scheduler parts for a GPU with `num_sms` SMs (FlashMLA's formula:
// num_sms / h_kv / ceil(rows_per_kv / 64), at least 1), rows_per_kv = s_q * h_q / h_kv.
int64_t mla_num_parts(int64_t num_sms, int64_t rows_per_kv, int64_t num_heads_kv);

struct MlaMetadataArgs {
  TensorRef seqlens_k;           // [B] int32, on the device
  TensorRef tile_scheduler_metadata;  // [num_parts, 8] int32, contiguous (written)
  TensorRef num_splits;          // [B + 1] int32, contiguous (written)
};
Status validate_mla_metadata(const MlaMetadataArgs& args);
Status mla_metadata(const MlaMetadataArgs& args, cudaStream_t stream);

struct MlaDecodeArgs {
  TensorRef q, kv_cache, block_table, seqlens_k;
  TensorRef tile_scheduler_metadata, num_splits;  // from mla_metadata for these lengths
  TensorRef out;
  TensorRef lse;        // required (FlashMLA returns it)
  TensorRef workspace;  // uint8 or int32, contiguous, >= mla_workspace_size bytes
  int64_t head_dim_v = 512;
  float softmax_scale = 0.f;  // <= 0 or NaN: 1/sqrt(576)
  bool causal = false;
  // As for decode: validate block_table and seqlens_k on the GPU before the launch.
  bool check_inputs = false;
};

// Bytes of workspace (fp32 partial outputs and LSEs) for these sizes.
int64_t mla_workspace_size(int64_t batch, int64_t s_q, int64_t num_heads_q, int64_t num_parts);

Status validate_mla_decode(const MlaDecodeArgs& args);
Status mla_decode(const MlaDecodeArgs& args, cudaStream_t stream);

// The split kernel mla_decode runs for `dtype` (q's) on the current device: "sm90" (Hopper,
// where compiled, on compute capability 9.0), "sm80" (the portable kernel; always with
// FLASHKIT_MLA_PORTABLE=1 in the environment, read on every call), or "" when the dtype is not
// compiled or there is no usable device. The FP8 cache: "sm90" for bf16 q on Hopper (its pages of
// multiples of 64 tokens run the Hopper kernel, other page sizes the portable one), else "sm80"
// (also with FLASHKIT_MLA_FP8_PORTABLE=1, read on every call).
const char* mla_split_kernel_family(DType dtype, bool fp8_kv_cache = false);

}  // namespace flashkit
