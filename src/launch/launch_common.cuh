// Host-side pieces shared by the forward launchers: the per-device shared-memory opt-in
// and the grid (tile order) that attn::BlockInfo decodes.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "kernels/attention_params.h"
#include "launch/fwd_sched.h"

namespace flashkit::launch_util {

// Raises `Kernel`'s dynamic shared-memory limit to `bytes` once per device (the attribute
// belongs to the device's context; devices 0..63 are tracked, others set it every launch).
template <auto Kernel>
cudaError_t raise_smem_limit(int device, int bytes) {
  static std::atomic<uint64_t> done{0};
  const uint64_t bit = device < 64 ? (uint64_t{1} << device) : 0;
  if (bit != 0 && (done.load(std::memory_order_acquire) & bit)) return cudaSuccess;
  const cudaError_t err = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err == cudaSuccess && bit != 0) done.fetch_or(bit, std::memory_order_acq_rel);
  return err;
}

// Raises Kernel's shared-memory limit (once per device) and launches it; a cudaError_t as
// int (the launchers' convention).
template <auto Kernel, class Params>
int launch_with_smem(const Params& p, dim3 grid, int threads, int smem, cudaStream_t stream, int device) {
  const cudaError_t err = raise_smem_limit<Kernel>(device, smem);
  if (err != cudaSuccess) return int(err);
  Kernel<<<grid, threads, smem, stream>>>(p);
  return int(cudaGetLastError());
}

// (batch, head) pairs per scheduling group: launch/fwd_sched.h (the rule, its measurements and
// the FLASHKIT_FWD_SCHED_GROUP override, read once here).
inline int64_t sched_group(const FwdParams& p, int64_t l2_bytes, int elem_bytes, bool persistent) {
  static const FwdSchedOverride ovr = parse_fwd_sched_override(std::getenv("FLASHKIT_FWD_SCHED_GROUP"));
  const int64_t kv_bytes = int64_t(p.seqlen_k) * p.head_dim * elem_bytes * 2;
  return fwd_sched_group(int64_t(p.batch) * p.h_q, p.causal, kv_bytes, l2_bytes, persistent, ovr);
}

// Fills p.sched_group / p.num_m_blocks and returns the grid (sched_group, m blocks,
// groups) for row blocks of `block_m`; false if the problem exceeds the grid limits.
// `persistent`: the tile order of kernel_persistent.cuh's walk (the grid itself is not launched).
inline bool make_grid(FwdParams& p, int block_m, int64_t l2_bytes, int elem_bytes, dim3* grid,
                      bool persistent = false) {
  const int64_t num_bh = int64_t(p.batch) * p.h_q;
  const int64_t num_m_blocks = (p.seqlen_q + block_m - 1) / block_m;
  if (num_m_blocks > 65535) return false;  // > 8M query rows
  // grid.z (groups) is limited to 65535: widen the groups when there are more pairs.
  const int64_t group =
      std::max<int64_t>(sched_group(p, l2_bytes, elem_bytes, persistent), (num_bh + 65534) / 65535);
  p.sched_group = int(group);
  p.num_m_blocks = int(num_m_blocks);
  *grid = dim3(unsigned(group), unsigned(num_m_blocks), unsigned((num_bh + group - 1) / group));
  return true;
}

// Whether a call needs the kMods instantiation of a forward kernel (sliding window, a
// right bound other than the causal diagonal, softcap).
inline bool fwd_needs_mods(const FwdParams& p) {
  return p.window_left >= 0 || (!p.causal && p.window_right >= 0) || p.softcap > 0.f;
}

// Launches a forward kernel with traits Tr (kBlockM, kThreads, kSmemBytes, T) on the grid
// above: raises its shared-memory limit once per device, fills the tile-order params.
template <auto Kernel, class Tr>
cudaError_t launch_fwd(const FwdParams& params, cudaStream_t stream, int device, int l2_bytes) {
  cudaError_t err = raise_smem_limit<Kernel>(device, Tr::kSmemBytes);
  if (err != cudaSuccess) return err;
  FwdParams p = params;
  dim3 grid;
  if (!make_grid(p, Tr::kBlockM, l2_bytes, int(sizeof(typename Tr::T)), &grid)) {
    return cudaErrorInvalidConfiguration;
  }
  Kernel<<<grid, Tr::kThreads, Tr::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace flashkit::launch_util
