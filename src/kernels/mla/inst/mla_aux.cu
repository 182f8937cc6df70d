// MLA kernels that do not depend on the split kernel: the scheduler (one CTA) and the
// combine (per dtype).
#include <cuda_runtime.h>

#include "kernels/mla/combine_kernel.cuh"
#include "kernels/mla/metadata_kernel.cuh"
#include "launch/element_type.cuh"
#include "launch/mla_launch.h"
#include "launch/pdl_launch.cuh"

namespace flashkit {

int launch_mla_metadata(const MlaMetadataParams& p, cudaStream_t stream) {
  if (p.num_parts <= 0) return cudaErrorInvalidValue;
  // Fewer threads for small batches (the scan is over the threads, not the batch).
  int threads = 32;
  while (threads < mla::kMetaThreads && threads < p.batch) threads *= 2;
  mla::mla_metadata_kernel<<<1, threads, 0, stream>>>(p);
  return cudaGetLastError();
}

template <typename Tag>
int launch_mla_combine(const MlaParams& p, bool pdl, cudaStream_t stream) {
  using T = typename ElementOf<Tag>::type;
  if (p.batch <= 0 || p.m_blocks <= 0) return cudaSuccess;
  return launch_util::launch_pdl(&mla::mla_combine_kernel<T>, dim3(p.batch, p.h_kv, (p.rows_per_kv + mla::kCombineRows - 1) / mla::kCombineRows),
                                 dim3(mla::kCombineThreads), 0, stream, pdl, p);
}
template int launch_mla_combine<fp16_t>(const MlaParams&, bool, cudaStream_t);
template int launch_mla_combine<bf16_t>(const MlaParams&, bool, cudaStream_t);

}  // namespace flashkit
