// Launcher of the portable forward kernel: the tile configuration of each head dim and
// the grid. Included only by the per-variant instantiation files in
// src/kernels/fwd_sm80/inst/, which each define one launch_fwd_sm80<dtype, head_dim>.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "kernels/fwd_sm80/kernel.cuh"
#include "launch/fwd_launch.h"

namespace flashkit {

template <typename Tag> struct ElementOf;
template <> struct ElementOf<fp16_t> { using type = __half; };
template <> struct ElementOf<bf16_t> { using type = __nv_bfloat16; };

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

// Raises a kernel's dynamic shared-memory limit once per device (the attribute belongs
// to the device's context; devices 0..63 are tracked, others set it on every launch).
template <class Tr>
cudaError_t prepare(int device) {
  static std::atomic<uint64_t> done{0};
  const uint64_t bit = device < 64 ? (uint64_t{1} << device) : 0;
  if (bit != 0 && (done.load(std::memory_order_acquire) & bit)) return cudaSuccess;
  const cudaError_t err =
      cudaFuncSetAttribute(&fwd_kernel<Tr>, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (err == cudaSuccess && bit != 0) done.fetch_or(bit, std::memory_order_acq_rel);
  return err;
}

// (batch, head) pairs per scheduling group. Causal: as many as keep their K and V within
// the L2, at least one, split into groups of equal size (a small last group would put its
// heaviest row blocks at the very end, in the tail); measured +6-27% over per-head order
// on the causal sweeps. Non-causal: every tile costs the same, so one pair per group
// (head-major order) keeps the row blocks sharing a K/V in flight together.
inline int64_t sched_group(const FwdParams& p, int64_t l2_bytes, int elem_bytes) {
  const int64_t num_bh = int64_t(p.batch) * p.h_q;
  if (!p.causal) return 1;
  const int64_t kv_bytes = int64_t(p.seqlen_k) * p.head_dim * elem_bytes * 2;
  int64_t group = kv_bytes > 0 ? l2_bytes / kv_bytes : num_bh;
  group = std::max<int64_t>(1, std::min(group, num_bh));
  const int64_t groups = (num_bh + group - 1) / group;
  return (num_bh + groups - 1) / groups;
}

template <class Tr>
cudaError_t launch(const FwdParams& params, cudaStream_t stream, int device, int l2_bytes) {
  auto kernel = &fwd_kernel<Tr>;
  cudaError_t err = prepare<Tr>(device);
  if (err != cudaSuccess) return err;
  FwdParams p = params;
  const int64_t num_bh = int64_t(p.batch) * p.h_q;
  const int64_t num_m_blocks = (p.seqlen_q + Tr::kBlockM - 1) / Tr::kBlockM;
  // grid.z (groups) is limited to 65535: widen the groups when there are more pairs.
  int64_t group = std::max<int64_t>(sched_group(p, l2_bytes, int(sizeof(typename Tr::T))),
                                    (num_bh + 65534) / 65535);
  if (num_m_blocks > 65535) return cudaErrorInvalidConfiguration;  // > 8M query rows
  p.sched_group = int(group);
  p.num_m_blocks = int(num_m_blocks);
  const dim3 grid(unsigned(group), unsigned(num_m_blocks), unsigned((num_bh + group - 1) / group));
  kernel<<<grid, Tr::kThreads, Tr::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

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
  if (force_small || dev.smem_optin < Main::kSmemBytes) {
    return fwd_sm80::launch<Small>(p, stream, dev.device, dev.l2_bytes);
  }
  return fwd_sm80::launch<Main>(p, stream, dev.device, dev.l2_bytes);
}

}  // namespace flashkit

// Defines launch_fwd_sm80<TAG, D> in an instantiation file.
#define FLASHKIT_INSTANTIATE_FWD_SM80(TAG, D)                                                  \
  template int flashkit::launch_fwd_sm80<flashkit::TAG, D>(const flashkit::FwdParams&,          \
                                                           const flashkit::DeviceInfo&, cudaStream_t);
