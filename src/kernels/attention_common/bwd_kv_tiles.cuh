// The backward CTA's own key block in global memory: K and V read into shared tiles at the
// start, dK and dV written back from shared tiles at the end (16-byte copies, rows past the
// sequence zero-filled on the way in and not written on the way out), addressed by the CTA's
// batch or varlen start (BwdCta::k_side_offset), its KV head and its first key n0. Used by the
// Hopper kernels (bwd_sm90; the pair kernel writes through it, its K load shares the head
// pointer with the partner's rows). The portable kernel (bwd_sm80) keeps its own copy of the
// same addressing: written through these helpers its SASS changes (232 registers instead of
// 231 at D 64, compiled 2026-11-27), which would need a GPU A/B.
#pragma once

#include <cstdint>

#include "kernels/attention_common/bwd_cta.cuh"
#include "kernels/bwd_params.h"
#include "tiles/tile_copy.cuh"

namespace flashkit::attn {

// Starts the cp.async copies of the CTA's K and V rows into sK / sV (the caller commits and
// waits for them with its other copies).
template <class KTile, int kThreads, class T>
__device__ __forceinline__ void load_kv_tiles(const BwdParams& p, const BwdCta& cta, T* sK, T* sV, int tid) {
  const int64_t k_off = cta.k_side_offset(p.k_row_stride, p.k_batch_stride);
  const int64_t v_off = cta.k_side_offset(p.v_row_stride, p.v_batch_stride);
  tiles::load_tile_async<KTile, kThreads>(
      sK, static_cast<const T*>(p.k) + k_off + cta.head_kv * p.k_head_stride + int64_t(cta.n0) * p.k_row_stride,
      p.k_row_stride, cta.keys_here, tid);
  tiles::load_tile_async<KTile, kThreads>(
      sV, static_cast<const T*>(p.v) + v_off + cta.head_kv * p.v_head_stride + int64_t(cta.n0) * p.v_row_stride,
      p.v_row_stride, cta.keys_here, tid);
}

// Writes the CTA's dK / dV rows from the staged tiles sdK / sdV (the caller synchronized the
// threads that staged them).
template <class KTile, int kThreads, class T>
__device__ __forceinline__ void store_dkdv_tiles(const BwdParams& p, const BwdCta& cta, const T* sdK, const T* sdV,
                                                 int tid) {
  const int64_t dk_off = cta.k_side_offset(p.dk_row_stride, p.dk_batch_stride);
  const int64_t dv_off = cta.k_side_offset(p.dv_row_stride, p.dv_batch_stride);
  tiles::store_tile<KTile, kThreads>(
      static_cast<T*>(p.dk) + dk_off + cta.head_kv * p.dk_head_stride + int64_t(cta.n0) * p.dk_row_stride,
      p.dk_row_stride, sdK, cta.keys_here, tid);
  tiles::store_tile<KTile, kThreads>(
      static_cast<T*>(p.dv) + dv_off + cta.head_kv * p.dv_head_stride + int64_t(cta.n0) * p.dv_row_stride,
      p.dv_row_stride, sdV, cta.keys_here, tid);
}

}  // namespace flashkit::attn
