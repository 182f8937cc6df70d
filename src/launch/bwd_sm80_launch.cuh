// Launcher of the portable backward: the tile configuration per head dim and its main
// kernel's launch (the shared pre/post launches: launch/bwd_prepost_launch.cuh). Included
// only by the instantiation files in src/kernels/bwd_sm80/inst/.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/bwd_sm80/kernel.cuh"
#include "launch/bwd_launch.h"
#include "launch/bwd_prepost_launch.cuh"
#include "launch/element_type.cuh"
#include "launch/launch_common.cuh"

namespace flashkit {

namespace bwd_sm80 {

// BwdTraits<T, D, kBlockM, kBlockN, kWarpsD>: kBlockN / 16 key slabs x kWarpsD column
// slices of warps. Every configuration fits the 99 KB of shared memory of sm_86/89, so one
// kernel per variant runs on every sm_80+ GPU. Register budget per thread: dK + dV take
// 2 * D / (2 kWarpsD) and S^T, dP^T kBlockM / 2 each; D >= 192 splits dK/dV columns over
// two warps (kWarpsD = 2) to stay within 255 registers. See docs/kernels/bwd.md.
template <typename T, int D> struct Config;
template <typename T> struct Config<T, 64>  { using Tr = BwdTraits<T, 64, 64, 128, 1>; };
template <typename T> struct Config<T, 96>  { using Tr = BwdTraits<T, 96, 64, 128, 1>; };
template <typename T> struct Config<T, 128> { using Tr = BwdTraits<T, 128, 64, 64, 1>; };
template <typename T> struct Config<T, 192> { using Tr = BwdTraits<T, 192, 32, 64, 2>; };
template <typename T> struct Config<T, 256> { using Tr = BwdTraits<T, 256, 32, 32, 2>; };

}  // namespace bwd_sm80

template <typename Tag, int kD>
int launch_bwd_sm80(const BwdParams& params, const DeviceInfo& dev, cudaStream_t stream) {
  BwdParams p = params;
  p.key_major = launch_util::bwd_key_major(params);
  using T = typename ElementOf<Tag>::type;
  using Tr = typename bwd_sm80::Config<T, kD>::Tr;
  static_assert(Tr::kBlockM % kBwdSemBlockM == 0, "dq counters are sized for 32-row blocks");
  return launch_util::launch_bwd_with_prepost<T, kD>(p, stream, [&]() -> int {
    const dim3 grid = launch_util::bwd_grid(p, (p.seqlen_k + Tr::kBlockN - 1) / Tr::kBlockN);
    return launch_util::launch_with_smem<&bwd_sm80::bwd_kernel<Tr>>(p, grid, Tr::kThreads, Tr::kSmemBytes, stream,
                                                                     dev.device);
  });
}

}  // namespace flashkit

// Defines launch_bwd_sm80<TAG, D> in an instantiation file.
#define FLASHKIT_INSTANTIATE_BWD_SM80(TAG, D)                                                  \
  template int flashkit::launch_bwd_sm80<flashkit::TAG, D>(const flashkit::BwdParams&,          \
                                                           const flashkit::DeviceInfo&, cudaStream_t);
