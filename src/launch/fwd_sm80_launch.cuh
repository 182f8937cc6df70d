// Launcher of the portable forward kernel: the tile configuration of each head dim and
// the grid. Included only by the per-variant instantiation files in
// src/kernels/fwd_sm80/inst/, which each define one launch_fwd_sm80<dtype, head_dim>.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdlib>

#include "kernels/fwd_sm80/kernel.cuh"
#include "launch/element_type.cuh"
#include "launch/fwd_launch.h"
#include "launch/launch_common.cuh"

namespace flashkit {

namespace fwd_sm80 {

// Tile configuration per head dim: FwdTraits<T, D, kBlockM, kBlockN, kNWarps,
// kConditionalRescale>. Chosen by measurement on an H200 (docs/kernels/fwd_sm80.md has
// the sweeps): d64 and d128 want 2 row tiles per warp (4 warps x 32 rows), with 128- and
// 64-key tiles; d256 can't hold 2 row tiles of O in registers, so 8 warps x 16 rows. Double
// buffering K/V measured no faster; conditional rescaling pays at d64/d128
// (+5-10%) and costs at d256 (-8%).
template <typename T, int D> struct Config;
template <typename T> struct Config<T, 64>  { using Tr = FwdTraits<T, 64, 128, 128, 4, true>; };
template <typename T> struct Config<T, 96>  { using Tr = FwdTraits<T, 96, 128, 64, 4, true>; };
template <typename T> struct Config<T, 128> { using Tr = FwdTraits<T, 128, 128, 64, 4, true>; };
template <typename T> struct Config<T, 192> { using Tr = FwdTraits<T, 192, 128, 64, 8, false>; };
template <typename T> struct Config<T, 256> { using Tr = FwdTraits<T, 256, 128, 64, 8, false>; };

// Fallback for GPUs whose per-block shared memory (99 KB on sm_86/89) can't hold the main
// configuration's tiles: 64-row blocks, 32-key tiles.
template <typename T, int D> struct SmallSmemConfig { using Tr = FwdTraits<T, D, 64, 32, 4>; };

}  // namespace fwd_sm80

template <typename Tag, int kHeadDim>
int launch_fwd_sm80(const FwdParams& p, const DeviceInfo& dev, cudaStream_t stream) {
  using T = typename ElementOf<Tag>::type;
  using Main = typename fwd_sm80::Config<T, kHeadDim>::Tr;
  using Small = typename fwd_sm80::SmallSmemConfig<T, kHeadDim>::Tr;
  // FLASHKIT_FWD_SMALL_TILES=1 forces the fallback so tests can cover it on any GPU.
  static const bool force_small = [] {
    const char* e = std::getenv("FLASHKIT_FWD_SMALL_TILES");
    return e != nullptr && e[0] == '1';
  }();
  const bool mods = launch_util::fwd_needs_mods(p);
  if (force_small || dev.smem_optin < Main::kSmemBytes) {
    return mods ? launch_util::launch_fwd<&fwd_sm80::fwd_kernel<Small, true>, Small>(p, stream, dev.device, dev.l2_bytes)
                : launch_util::launch_fwd<&fwd_sm80::fwd_kernel<Small>, Small>(p, stream, dev.device, dev.l2_bytes);
  }
  return mods ? launch_util::launch_fwd<&fwd_sm80::fwd_kernel<Main, true>, Main>(p, stream, dev.device, dev.l2_bytes)
              : launch_util::launch_fwd<&fwd_sm80::fwd_kernel<Main>, Main>(p, stream, dev.device, dev.l2_bytes);
}

}  // namespace flashkit

// Defines launch_fwd_sm80<TAG, D> in an instantiation file.
#define FLASHKIT_INSTANTIATE_FWD_SM80(TAG, D)                                                  \
  template int flashkit::launch_fwd_sm80<flashkit::TAG, D>(const flashkit::FwdParams&,          \
                                                           const flashkit::DeviceInfo&, cudaStream_t);
