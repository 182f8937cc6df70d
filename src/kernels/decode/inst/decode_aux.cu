// Paged-decode kernels that do not depend on the head dim: plan (one CTA) and append
// (dtype-agnostic byte copies). The combine runs inside the split kernel.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/decode/append_kernel.cuh"
#include "kernels/decode/plan_kernel.cuh"
#include "launch/decode_launch.h"
#include "launch/element_type.cuh"

namespace flashkit {

int launch_decode_plan(const DecodeParams& p, cudaStream_t stream) {
  decode::decode_plan_kernel<<<1, decode::kPlanThreads, 0, stream>>>(p);
  return cudaGetLastError();
}


int launch_decode_append(const AppendParams& p, int num_sms, cudaStream_t stream) {
  const int64_t chunks = int64_t(p.batch) * p.s_new * p.h_kv *
                         ((p.head_dim + p.head_dim_v) * int64_t(p.elem_bytes) / 16);
  if (chunks == 0) return cudaSuccess;
  const int64_t want = (chunks + decode::kAppendThreads - 1) / decode::kAppendThreads;
  const int blocks = int(std::min<int64_t>(want, int64_t(std::max(num_sms, 1)) * 8));
  decode::decode_append_kernel<<<blocks, decode::kAppendThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace flashkit
