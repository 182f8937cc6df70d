// Launcher of the Hopper (sm_90a, wgmma) forward kernel: the tile configuration of each
// head dim and the grid. Included only by the per-variant instantiation files in
// src/kernels/fwd_sm90/inst/, which each define one launch_fwd_sm90<dtype, head_dim>.
#pragma once

#include <cuda_runtime.h>

#include "kernels/fwd_sm90/kernel.cuh"
#include "launch/element_type.cuh"
#include "launch/fwd_launch.h"
#include "launch/launch_common.cuh"

namespace flashkit {

namespace fwd_sm90 {

// Tile configuration per head dim: FwdTraits<T, D, kBlockN, kKStages, kMinBlocks>
// (kBlockM = 128, two warpgroups). See docs/kernels/fwd_sm90.md for the measurements.
// d64 runs 2 CTAs per SM (registers capped at 128: 44 bytes of spills, still 10-20%
// faster than 1 CTA at 184 registers). d192 (three swizzle atom columns) takes d256's
// shape. d96 runs d128's tiles with 32 zero columns (Tr::kPadded): a third more MMA work
// for Q K^T and P V than the data needs, still on wgmma.
template <typename T, int D> struct Config;
template <typename T> struct Config<T, 64>  { using Tr = FwdTraits<T, 64, 128, 3, 2>; };
template <typename T> struct Config<T, 96>  { using Tr = FwdTraits<T, 96, 128, 3>; };  // padded to 128
template <typename T> struct Config<T, 128> { using Tr = FwdTraits<T, 128, 128, 3>; };
template <typename T> struct Config<T, 192> { using Tr = FwdTraits<T, 192, 64, 3>; };
template <typename T> struct Config<T, 256> { using Tr = FwdTraits<T, 256, 64, 3>; };

}  // namespace fwd_sm90

template <typename Tag, int kHeadDim>
int launch_fwd_sm90(const FwdParams& p, const DeviceInfo& dev, cudaStream_t stream) {
  using Tr = typename fwd_sm90::Config<typename ElementOf<Tag>::type, kHeadDim>::Tr;
  if (launch_util::fwd_needs_mods(p)) {
    return launch_util::launch_fwd<&fwd_sm90::fwd_kernel<Tr, true>, Tr>(p, stream, dev.device, dev.l2_bytes);
  }
  return launch_util::launch_fwd<&fwd_sm90::fwd_kernel<Tr>, Tr>(p, stream, dev.device, dev.l2_bytes);
}

}  // namespace flashkit

// Defines launch_fwd_sm90<TAG, D> in an instantiation file.
#define FLASHKIT_INSTANTIATE_FWD_SM90(TAG, D)                                                  \
  template int flashkit::launch_fwd_sm90<flashkit::TAG, D>(const flashkit::FwdParams&,          \
                                                           const flashkit::DeviceInfo&, cudaStream_t);
