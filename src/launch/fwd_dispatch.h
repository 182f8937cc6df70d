// Host dispatch of the dense attention forward: the only place where runtime values
// (dtype, head dim, device architecture) become template arguments.
#pragma once

#include <string>
#include <vector>

#include "flashkit/tensor.h"
#include "kernels/attention_params.h"
#include "launch/fwd_launch.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashkit {

// Launches the forward kernel for already-validated params. Returns NotCompiled when the
// (dtype, head_dim) variant is not in this build, Unsupported when the current device is
// older than sm_80 or the binary has no code for it, Cuda on a launch error.
Status run_attention_fwd(const FwdParams& params, DType dtype, cudaStream_t stream);

bool fwd_variant_compiled(DType dtype, int head_dim);

// The current device's attributes, read once per device (int: cudaError_t).
int cached_device_info_status(DeviceInfo* info);
std::vector<std::string> fwd_variants();
// Every compiled kernel as "<family>/<dtype>/<head_dim>", e.g. "sm90/bfloat16/128".
std::vector<std::string> fwd_kernels();
// "sm90", "sm80" or "" (see flashkit::fwd_kernel_family).
std::string fwd_family(DType dtype, int head_dim);

}  // namespace flashkit
