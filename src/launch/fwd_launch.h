// Declaration of the per-variant forward launchers. Each is defined (explicitly
// instantiated) in its own small file under src/kernels/fwd_sm80/inst/.
#pragma once

#include "kernels/attention_params.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashkit {

struct fp16_t {};  // tags naming the element type without pulling in cuda_fp16.h
struct bf16_t {};

// Returns the cudaError_t of the launch (as int, 0 = success).
template <typename DTypeTag, int kHeadDim>
int launch_fwd_sm80(const FwdParams& params, cudaStream_t stream);

}  // namespace flashkit
