// Internal pieces of the attention API that tests (and the launch layer) use directly.
// Not installed; include with src/ on the include path.
#pragma once

#include "export.h"
#include "flashkit/attention.h"
#include "flashkit/tensor.h"
#include "kernels/attention_params.h"

namespace flashkit {
namespace detail {

// True when validated `args` describe no work: B == 0, S_q == 0 (dense) or total_q == 0
// (varlen). attention_fwd then returns Ok without touching the GPU.
FLASHKIT_EXPORT bool fwd_is_empty(const AttentionFwdArgs& args);

// Converts validated `args` into the kernels' FwdParams:
//  - q/k/v/out strides (elements) from the TensorRefs; a dim of size <= 1 gets the
//    stride a contiguous tensor would have there (its stride is never multiplied by a
//    non-zero index, and callers such as DLPack exporters may put any value there);
//  - varlen: batch strides 0, rows from cu_seqlens; batch = len(cu_seqlens_q) - 1;
//    seqlen_q/k = max_seqlen_q/k, clamped to total_q/total_k (both are upper bounds);
//  - total_q/total_k = the rows of q/k (dense: S_q/S_k); error_flag = nullptr (attention_fwd
//    sets it to the device's error word);
//  - lse: dense [B, H_q, S_q] -> batch stride H_q*S_q, head stride S_q;
//         varlen [H_q, total_q] -> batch stride 0, head stride total_q; absent -> nullptr;
//  - softmax_scale: 1/sqrt(D) when args.softmax_scale <= 0 or NaN;
//    softmax_scale_log2 = softmax_scale * log2(e).
// Precondition: validate_attention_fwd(args) did not return InvalidArgument.
FLASHKIT_EXPORT FwdParams make_fwd_params(const AttentionFwdArgs& args);

// Check mode of a varlen call: cu_seqlens_q/k validated on the GPU (current device = q's),
// with a sync of `stream`. Refused (Invalid) under graph capture when args.check_inputs
// asks for it explicitly; skipped under capture when only FLASHKIT_CHECK_INPUTS does.
Status check_varlen_indices(const AttentionFwdArgs& args, cudaStream_t stream);

}  // namespace detail
}  // namespace flashkit
