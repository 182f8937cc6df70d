// Declarations of the paged-decode launchers. The split kernels are instantiated per
// (dtype, head dim) in src/kernels/decode/inst/decode_<dtype>_hd<D>.cu; the plan, combine
// and append launchers live in src/kernels/decode/inst/decode_aux.cu.
#pragma once

#include "kernels/decode_params.h"
#include "launch/fwd_launch.h"  // DeviceInfo, fp16_t / bf16_t tags

typedef struct CUstream_st* cudaStream_t;

namespace flashkit {

// Query rows per item for `rows_needed` = (H_q / H_kv) * s_q: 16, or 32 where the O tile
// of 32 rows still fits in registers (head dim <= 128) and max_rows allows it. Larger
// groups use several items (their K/V reads of the same pages then mostly hit L2).
inline int decode_rows_per_item(int rows_needed, int head_dim, int max_rows = 32) {
  return (rows_needed <= 16 || head_dim > 128 || max_rows < 32) ? 16 : 32;
}

// The split kernel of (dtype, head dim, cache kind) for params.rows rows; kQuant 0: the
// cache holds the dtype, 1: int8, 2: fp8 e4m3. All return cudaError_t as int.
template <typename DTypeTag, int kHeadDim, int kQuant>
int launch_decode_split(const DecodeParams& params, const DeviceInfo& dev, cudaStream_t stream);
// CTAs of that split kernel resident per SM (occupancy), used to size the plan.
template <typename DTypeTag, int kHeadDim, int kQuant>
int decode_split_blocks_per_sm(int rows, const DeviceInfo& dev, int* blocks);

int launch_decode_plan(const DecodeParams& params, cudaStream_t stream);
// pdl: launch with programmatic dependent launch (compute capability 9.0+).
template <typename DTypeTag>
int launch_decode_combine(const DecodeParams& params, bool pdl, cudaStream_t stream);
int launch_decode_append(const AppendParams& params, int num_sms, cudaStream_t stream);
// Quantize-on-append: k_new/v_new (DTypeTag) into int8 (kQuant 1) or fp8 e4m3 (2) caches.
template <typename DTypeTag, int kQuant>
int launch_decode_append_quant(const AppendParams& params, int num_sms, cudaStream_t stream);

}  // namespace flashkit
