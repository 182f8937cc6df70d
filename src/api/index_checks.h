// Internal C++ API of the opt-in index checks ("check mode"): validate index arrays that
// live on the GPU before a launch, with a small kernel and a sync, and turn the first
// violation into a Status::Invalid message naming the argument and the position, e.g.
//   "cu_seqlens_k: not non-decreasing at index 2 (cu_seqlens_k[1] = 40 > cu_seqlens_k[2] = 30)".
// Used by attention_fwd (cu_seqlens_q/k, when AttentionFwdArgs::check_inputs or
// FLASHKIT_CHECK_INPUTS=1); the block-table check is for the paged-decode ops to come.
// The current device must be the arrays' device. They synchronize `stream`, so they
// refuse to run while it is being captured into a CUDA graph (Status::Invalid).
#pragma once

#include <string>

#include "export.h"
#include "flashkit/tensor.h"
#include "kernels/checks/index_check_types.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashkit::checks {

struct CuSeqlensCheck {
  const char* name;         // "cu_seqlens_q"
  const char* tensor_name;  // "q": the packed tensor the entries index
  const char* rows_name;    // "total_q": its rows
  const char* max_name;     // "max_seqlen_q"
  CuSeqlensIndex index;
};

struct BlockTableCheck {
  const char* table_name;    // "block_table"
  const char* lengths_name;  // "seqlens_k"
  BlockTableIndex index;     // page_size must be >= 1
};

// The message of violation `v` (v.position >= 0), starting with the argument's name.
FLASHKIT_EXPORT std::string describe_violation(const CuSeqlensCheck& check, const IndexViolation& v);
FLASHKIT_EXPORT std::string describe_violation(const BlockTableCheck& check, const IndexViolation& v);

// Ok, Invalid(describe_violation(...)), Invalid when `stream` is capturing, or Cuda.
FLASHKIT_EXPORT Status check_index(const CuSeqlensCheck& check, cudaStream_t stream);
FLASHKIT_EXPORT Status check_index(const BlockTableCheck& check, cudaStream_t stream);

// The block-table check on TensorRefs, as the paged-decode ops will call it: validates the
// descriptors (block_table int32 [B, max_pages] with a contiguous last dim, seqlens_k int32
// [B] contiguous, both CUDA tensors on one device, num_pages >= 0, page_size >= 1), makes
// their device current for the check (restoring the caller's), then check_index. Messages
// name the arguments "block_table" and "seqlens_k".
FLASHKIT_EXPORT Status check_block_table(const TensorRef& block_table, const TensorRef& seqlens_k,
                                         int64_t num_pages, int64_t page_size, cudaStream_t stream);

// FLASHKIT_CHECK_INPUTS=1 in the environment (read once): check mode for every call.
bool check_inputs_from_env();
// Whether the check should run: an explicit request always does (check_index refuses it
// during capture); the environment switch skips calls being captured into a CUDA graph.
bool check_requested(bool explicit_request, cudaStream_t stream);

// The message for a check requested while `stream` is being captured (naming `what`, the
// caller's switch, e.g. "check_inputs").
FLASHKIT_EXPORT std::string capture_refusal(const char* what);

}  // namespace flashkit::checks
