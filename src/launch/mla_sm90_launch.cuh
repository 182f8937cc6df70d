// Launcher of the Hopper MLA split kernel. Included only by the instantiation files
// src/kernels/mla/inst/mla_sm90_<dtype>.cu.
#pragma once

#include <cuda_runtime.h>

#include "kernels/mla/sm90_kernel.cuh"
#include "launch/element_type.cuh"
#include "launch/launch_common.cuh"
#include "launch/mla_launch.h"
#include "launch/pdl_launch.cuh"

namespace flashkit {

template <typename Tag>
int launch_mla_split_sm90(const MlaParams& p, const DeviceInfo& dev, cudaStream_t stream) {
  using Tr = mla_sm90::Traits<typename ElementOf<Tag>::type>;
  constexpr auto kernel = &mla_sm90::mla_split_kernel<Tr>;
  cudaError_t err = launch_util::raise_smem_limit<kernel>(dev.device, Tr::kSmemBytes);
  if (err != cudaSuccess) return err;
  if (p.batch <= 0 || p.num_parts <= 0) return cudaSuccess;
  // Programmatic dependent launch: the kernel waits (griddepcontrol.wait) before it reads
  // anything, so its prologue overlaps the previous kernel's tail.
  return launch_util::launch_pdl(kernel, dim3(p.m_blocks, p.h_kv, p.num_parts), dim3(Tr::kThreads),
                                 Tr::kSmemBytes, stream, true, p);
}

}  // namespace flashkit

#define FLASHKIT_INSTANTIATE_MLA_SM90(TAG)                                                  \
  template int flashkit::launch_mla_split_sm90<flashkit::TAG>(const flashkit::MlaParams&,   \
                                                              const flashkit::DeviceInfo&, cudaStream_t);
