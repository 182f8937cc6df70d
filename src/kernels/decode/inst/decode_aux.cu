// Paged-decode kernels that do not depend on the head dim: plan (one CTA), combine (per
// dtype) and append (dtype-agnostic byte copies).
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/decode/append_kernel.cuh"
#include "kernels/decode/combine_kernel.cuh"
#include "kernels/decode/plan_kernel.cuh"
#include "launch/decode_launch.h"
#include "launch/element_type.cuh"
#include "launch/pdl_launch.cuh"

namespace flashkit {

int launch_decode_plan(const DecodeParams& p, cudaStream_t stream) {
  decode::decode_plan_kernel<<<1, decode::kPlanThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

template <typename Tag>
int launch_decode_combine(const DecodeParams& p, bool pdl, cudaStream_t stream) {
  using T = typename ElementOf<Tag>::type;
  if (p.max_combines <= 0) return cudaSuccess;
  // Persistent grid: a few CTAs per SM loop over (entry, column group) pairs, so a launch
  // sized for the worst case does not cost thousands of idle CTAs.
  const int64_t col_groups = (p.head_dim_v + decode::kCombineCols - 1) / decode::kCombineCols;
  const int64_t pairs = int64_t(p.max_combines) * col_groups;
  const unsigned grid = unsigned(std::max<int64_t>(1, std::min<int64_t>(pairs, int64_t(p.target_ctas) * 2)));
  return launch_util::launch_pdl(&decode::decode_combine_kernel<T>, dim3(grid),
                                 dim3(decode::kCombineThreads), 0, stream, pdl, p);
}
template int launch_decode_combine<fp16_t>(const DecodeParams&, bool, cudaStream_t);
template int launch_decode_combine<bf16_t>(const DecodeParams&, bool, cudaStream_t);

int launch_decode_append(const AppendParams& p, int num_sms, cudaStream_t stream) {
  const int64_t chunks = int64_t(p.batch) * p.s_new * p.h_kv *
                         ((p.head_dim + p.head_dim_v) * int64_t(p.elem_bytes) / 16);
  if (chunks == 0) return cudaSuccess;
  const int64_t want = (chunks + decode::kAppendThreads - 1) / decode::kAppendThreads;
  const int blocks = int(std::min<int64_t>(want, int64_t(std::max(num_sms, 1)) * 8));
  decode::decode_append_kernel<<<blocks, decode::kAppendThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

template <typename Tag, int kQuant>
int launch_decode_append_quant(const AppendParams& p, int num_sms, cudaStream_t stream) {
  using T = typename ElementOf<Tag>::type;
  const int64_t rows = int64_t(p.batch) * p.s_new * p.h_kv * 2;
  if (rows == 0) return cudaSuccess;
  const int64_t want = (rows + decode::kAppendQuantWarps - 1) / decode::kAppendQuantWarps;
  const int blocks = int(std::min<int64_t>(want, int64_t(std::max(num_sms, 1)) * 8));
  decode::decode_append_quant_kernel<T, kQuant><<<blocks, decode::kAppendQuantWarps * 32, 0, stream>>>(p);
  return cudaGetLastError();
}
template int launch_decode_append_quant<fp16_t, 1>(const AppendParams&, int, cudaStream_t);
template int launch_decode_append_quant<fp16_t, 2>(const AppendParams&, int, cudaStream_t);
template int launch_decode_append_quant<bf16_t, 1>(const AppendParams&, int, cudaStream_t);
template int launch_decode_append_quant<bf16_t, 2>(const AppendParams&, int, cudaStream_t);

}  // namespace flashkit
