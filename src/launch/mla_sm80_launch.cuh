// Launcher of the portable MLA split kernel (kernels/mla/sm80_kernel.cuh); instantiated per
// dtype in src/kernels/mla/inst/mla_sm80_<dtype>.cu, with its FP8-cache variant
// (p.kv_fp8).
#pragma once

#include <cuda_runtime.h>

#include "kernels/mla/sm80_kernel.cuh"
#include "launch/element_type.cuh"
#include "launch/family_dispatch.h"
#include "launch/mla_dispatch.h"
#include "launch/mla_launch.h"

namespace flashkit {

static_assert(mla::kSm80SmemBytes == kMlaSm80SmemBytes, "mla_dispatch.h: kMlaSm80SmemBytes");

template <typename Tag>
int launch_mla_split_sm80(const MlaParams& p, const DeviceInfo& dev, cudaStream_t stream) {
  using T = typename ElementOf<Tag>::type;
  if (p.batch <= 0 || p.num_parts <= 0 || p.m_blocks <= 0) return cudaSuccess;
  if (dev.smem_optin < mla::kSm80SmemBytes) return cudaErrorInvalidConfiguration;
  // FP8 cache: the variant that stages the raw tokens one block ahead where its shared
  // memory fits (Hopper), else the one that dequantizes straight from global memory
  // (FLASHKIT_MLA_FP8_SYNC=1, read once, forces it: tests on Hopper).
  static const bool force_sync = dispatch::env_flag("FLASHKIT_MLA_FP8_SYNC");
  const bool fp8_async = p.kv_fp8 && !force_sync && dev.smem_optin >= mla::kSm80Fp8AsyncSmemBytes;
  auto kernel = !p.kv_fp8   ? &mla::mla_split_sm80_kernel<T, false>
                : fp8_async ? &mla::mla_split_sm80_kernel<T, true, true>
                            : &mla::mla_split_sm80_kernel<T, true, false>;
  const int smem = fp8_async ? mla::kSm80Fp8AsyncSmemBytes : mla::kSm80SmemBytes;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  kernel<<<dim3(p.m_blocks, p.h_kv, p.num_parts), mla::kSm80Threads, smem, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace flashkit

#define FLASHKIT_INSTANTIATE_MLA_SM80(tag)                                              \
  namespace flashkit {                                                                  \
  template int launch_mla_split_sm80<tag>(const MlaParams&, const DeviceInfo&, cudaStream_t); \
  }
