// Launcher of the paged-decode split kernel: the tile configuration of each head dim.
// Included only by the instantiation files src/kernels/decode/inst/decode_<dt>_hd<D>.cu.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/decode/split_kernel.cuh"
#include "launch/decode_launch.h"
#include "launch/element_type.cuh"
#include "launch/family_dispatch.h"
#include "launch/launch_common.cuh"
#include "launch/pdl_launch.cuh"

namespace flashkit {
namespace decode {

// DecodeTraits<T, D, kMTiles, kStages, kBlockN>: K/V stages so that 2 CTAs fit per SM at
// D = 128 (3 x 34 KB of K/V each) and the ring keeps >= 64 KB in flight per SM at every D.
// (The FLASHKIT_DECODE_* macros exist for tuning sweeps; see docs/kernels/decode.md.)
#ifndef FLASHKIT_DECODE_BLOCKN
#define FLASHKIT_DECODE_BLOCKN 64
#endif
#ifndef FLASHKIT_DECODE_STAGES_64
#define FLASHKIT_DECODE_STAGES_64 4
#endif
#ifndef FLASHKIT_DECODE_STAGES_128
#define FLASHKIT_DECODE_STAGES_128 3
#endif
// 32-row items at D = 128: 2 stages, so that 2 CTAs fit per SM (3 stages need 118 KB each:
// 1 CTA/SM, measured 1.36x slower; docs/kernels/decode.md v5).
#ifndef FLASHKIT_DECODE_STAGES_128_M2
#define FLASHKIT_DECODE_STAGES_128_M2 2
#endif
#ifndef FLASHKIT_DECODE_STAGES_256
#define FLASHKIT_DECODE_STAGES_256 2
#endif
template <typename T, int D, int kMTiles> struct Config;
template <typename T, int M> struct Config<T, 64, M> {
  using Tr = DecodeTraits<T, 64, M, FLASHKIT_DECODE_STAGES_64, FLASHKIT_DECODE_BLOCKN>;
};
template <typename T> struct Config<T, 128, 1> {
  using Tr = DecodeTraits<T, 128, 1, FLASHKIT_DECODE_STAGES_128, FLASHKIT_DECODE_BLOCKN>;
};
template <typename T> struct Config<T, 128, 2> {
  using Tr = DecodeTraits<T, 128, 2, FLASHKIT_DECODE_STAGES_128_M2, FLASHKIT_DECODE_BLOCKN>;
};
template <typename T, int M> struct Config<T, 256, M> {
  using Tr = DecodeTraits<T, 256, 1, FLASHKIT_DECODE_STAGES_256, 64>;
};

// Quantized (one byte per value) caches: twice the 64-token tiles in flight for about the
// same shared memory (the tiles are half the bytes).
#ifndef FLASHKIT_DECODE_QSTAGES_128
#define FLASHKIT_DECODE_QSTAGES_128 2  // 2: fp8 1.19x, int8 1.11x bf16 at B=64 8k; 3: 1.05x; 5: 0.99x (decode.md)
#endif
#ifndef FLASHKIT_DECODE_QBLOCKN_128
#define FLASHKIT_DECODE_QBLOCKN_128 64
#endif
template <typename T, int D, int kMTiles, int kQuant> struct QConfig;
template <typename T, int M, int Q> struct QConfig<T, 64, M, Q> { using Tr = DecodeTraits<T, 64, M, 8, 64, Q>; };
template <typename T, int Q> struct QConfig<T, 128, 1, Q> { using Tr = DecodeTraits<T, 128, 1, FLASHKIT_DECODE_QSTAGES_128, FLASHKIT_DECODE_QBLOCKN_128, Q>; };
template <typename T, int Q> struct QConfig<T, 128, 2, Q> { using Tr = DecodeTraits<T, 128, 2, 4, 64, Q>; };
template <typename T, int M, int Q> struct QConfig<T, 256, M, Q> { using Tr = DecodeTraits<T, 256, 1, 3, 64, Q>; };

// The narrow form of the 8-bit kernels (traits.cuh kNarrow; decode.md "The narrow form of the 8-bit kernels"):
// the 16-row kernel's ring and tile, keys as the MMAs' M dimension. Taken when every item holds at most 8 rows
// (ratio * s_q <= 8); FLASHKIT_DECODE_NARROW=0 in the environment keeps the 16-row form (A/B runs).
template <typename T, int D, int Q> struct QNarrowConfig {
  using Wide = typename QConfig<T, D, 1, Q>::Tr;
  using Tr = DecodeTraits<T, D, 1, Wide::kStages, Wide::kBlockN, Q, true>;
};
inline bool narrow_enabled() {
  static const bool off = dispatch::env_off("FLASHKIT_DECODE_NARROW");
  return !off;
}
// The narrow form for the 16-bit caches (decode.md "The narrow form for the 16-bit caches"): the same tile, ring and
// rule; half the MMAs, no byte permutes (K and V^T by the 16-row form's ldmatrix, registers reordered). The macro
// FLASHKIT_DECODE_NARROW16 is the default (1 since 2026-11-29: -1.1 % time geomean on H200, no row slower); the environment's FLASHKIT_DECODE_NARROW16=1 / =0
// (read once) turns it on / off, and FLASHKIT_DECODE_NARROW=0 keeps every cache on the 16-row form.
#ifndef FLASHKIT_DECODE_NARROW16
#define FLASHKIT_DECODE_NARROW16 1
#endif
template <typename T, int D> struct NarrowConfig {
  using Wide = typename Config<T, D, 1>::Tr;
  using Tr = DecodeTraits<T, D, 1, Wide::kStages, Wide::kBlockN, 0, true>;
};
inline bool narrow16_enabled() {
  static const bool on = narrow_enabled() && (FLASHKIT_DECODE_NARROW16 != 0 ? !dispatch::env_off("FLASHKIT_DECODE_NARROW16")
                                                                           : dispatch::env_flag("FLASHKIT_DECODE_NARROW16"));
  return on;
}

template <class Tr>
cudaError_t launch_split(const DecodeParams& p, const DeviceInfo& dev, cudaStream_t stream) {
  constexpr auto kernel = &decode_split_kernel<Tr>;
  cudaError_t err = launch_util::raise_smem_limit<kernel>(dev.device, Tr::kSmemBytes);
  if (err != cudaSuccess) return err;
  if (p.max_items <= 0) return cudaSuccess;
  return launch_util::launch_pdl(kernel, dim3(p.max_items), dim3(Tr::kThreads), Tr::kSmemBytes, stream,
                                 dev.cc_major >= 9, p);
}

template <class Tr>
cudaError_t blocks_per_sm(const DeviceInfo& dev, int* blocks) {
  constexpr auto kernel = &decode_split_kernel<Tr>;
  cudaError_t err = launch_util::raise_smem_limit<kernel>(dev.device, Tr::kSmemBytes);
  if (err != cudaSuccess) return err;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, Tr::kThreads, Tr::kSmemBytes);
}

// kQuant 0: 16-bit cache (Config); 1: int8, 2: fp8 e4m3 (QConfig).
template <typename T, int D, int M, int kQuant>
using TraitsFor = std::conditional_t<kQuant == 0, typename Config<T, D, M>::Tr, typename QConfig<T, D, M, kQuant>::Tr>;

}  // namespace decode

template <typename Tag, int D, int kQuant>
int launch_decode_split(const DecodeParams& p, const DeviceInfo& dev, cudaStream_t stream) {
  using T = typename ElementOf<Tag>::type;
  if (p.rows == 32 && D <= 128) {
    return decode::launch_split<decode::TraitsFor<T, D, 2, kQuant>>(p, dev, stream);
  }
  if constexpr (kQuant != 0) {
    using NarrowTr = typename decode::QNarrowConfig<T, D, kQuant>::Tr;
    if (p.rows == 16 && p.ratio * p.s_q <= 8 && decode::narrow_enabled() && (!NarrowTr::kOff32 || p.off32 != 0)) {
      return decode::launch_split<NarrowTr>(p, dev, stream);
    }
  } else {
    if (p.rows == 16 && p.ratio * p.s_q <= 8 && decode::narrow16_enabled()) {
      return decode::launch_split<typename decode::NarrowConfig<T, D>::Tr>(p, dev, stream);
    }
  }
  return decode::launch_split<decode::TraitsFor<T, D, 1, kQuant>>(p, dev, stream);
}

template <typename Tag, int D, int kQuant>
int decode_split_blocks_per_sm(int rows, const DeviceInfo& dev, int* blocks) {
  using T = typename ElementOf<Tag>::type;
  if (rows == 32 && D <= 128) return decode::blocks_per_sm<decode::TraitsFor<T, D, 2, kQuant>>(dev, blocks);
  return decode::blocks_per_sm<decode::TraitsFor<T, D, 1, kQuant>>(dev, blocks);
}

}  // namespace flashkit

#define FLASHKIT_INSTANTIATE_DECODE_Q(TAG, D, Q)                                                \
  template int flashkit::launch_decode_split<flashkit::TAG, D, Q>(                              \
      const flashkit::DecodeParams&, const flashkit::DeviceInfo&, cudaStream_t);                \
  template int flashkit::decode_split_blocks_per_sm<flashkit::TAG, D, Q>(int, const flashkit::DeviceInfo&, \
                                                                         int*);
#define FLASHKIT_INSTANTIATE_DECODE(TAG, D) FLASHKIT_INSTANTIATE_DECODE_Q(TAG, D, 0)
