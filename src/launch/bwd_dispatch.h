// Host dispatch of the dense attention backward: (dtype, head dim) -> the compiled
// launcher (bwd_launch.h): the portable family, or the Hopper one on compute capability 9.0.
#pragma once

#include <string>
#include <vector>

#include "flashkit/tensor.h"
#include "kernels/bwd_params.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashkit {

// Launches the backward for already-validated params: NotCompiled when the variant is not
// in this build, Unsupported below sm_80 or without code for the device, Cuda on a launch
// error.
Status run_attention_bwd(const BwdParams& params, DType dtype, cudaStream_t stream);

bool bwd_variant_compiled(DType dtype, int head_dim);
std::vector<std::string> bwd_variants();
// "sm90", "sm80" or "" (see flashkit::bwd_kernel_family).
std::string bwd_family(DType dtype, int head_dim);

}  // namespace flashkit
