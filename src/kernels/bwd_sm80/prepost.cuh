// The backward's small kernels around the main one (any architecture, sm_80+):
//  - bwd_pre_kernel: delta = rowsum(dO * O) per (row, head), computed once here and read
//    by every key block (never recomputed in the main loop); clears the fp32 dq
//    accumulator and the deterministic-mode counters (the workspace is scratch on entry).
//  - bwd_post_kernel: dq = dq_accum * softmax_scale in the input dtype.
//  - bwd_zero_rows_kernel: zeros dk and dv (varlen only, before the main kernel): rows that
//    no sequence covers are still written, as the API promises.
// Each (row, head) is handled by a group of kGroup lanes (16-byte chunks of D, padded to a
// power of two); the sum is a shuffle tree inside the group.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/bwd_params.h"
#include "prims/numeric.cuh"

namespace flashkit::bwd_sm80 {

constexpr int kPrePostThreads = 256;

template <int kD>
struct RowGroup {
  static constexpr int kChunks = kD / 8;  // 16-byte chunks of a 16-bit row
  static constexpr int kGroup = kChunks <= 8 ? 8 : (kChunks <= 16 ? 16 : 32);
  static_assert(kChunks <= 32 && kD % 8 == 0, "one warp per row at most");
};

template <typename T>
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b) {
  const T* x = reinterpret_cast<const T*>(&a);
  const T* y = reinterpret_cast<const T*>(&b);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) s += float(x[i]) * float(y[i]);
  return s;
}

// Offset (elements) of row r, head h of a BSHD / packed tensor: dense r = b * S + i.
__device__ __forceinline__ int64_t row_offset(int64_t r, int h, int seqlen, bool varlen, int64_t batch_stride,
                                              int64_t row_stride, int64_t head_stride) {
  if (varlen) return r * row_stride + h * head_stride;
  const int64_t b = r / seqlen, i = r % seqlen;
  return b * batch_stride + i * row_stride + h * head_stride;
}

template <typename T, int kD>
__global__ void __launch_bounds__(kPrePostThreads) bwd_pre_kernel(const BwdParams p) {
  using G = RowGroup<kD>;
  const int64_t gtid = int64_t(blockIdx.x) * kPrePostThreads + threadIdx.x;
  const int64_t item = gtid / G::kGroup;
  const int lg = threadIdx.x % G::kGroup;
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t items = int64_t(p.rows_q) * p.h_q;
  const bool valid = item < items;
  const int64_t r = valid ? item / p.h_q : 0;
  const int h = valid ? int(item % p.h_q) : 0;
  float sum = 0.f;
  if (valid && lg < G::kChunks) {
    const int64_t o_off = row_offset(r, h, p.seqlen_q, varlen, p.o_batch_stride, p.o_row_stride, p.o_head_stride);
    const int64_t d_off = row_offset(r, h, p.seqlen_q, varlen, p.do_batch_stride, p.do_row_stride, p.do_head_stride);
    const uint4 o = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.o) + o_off + lg * 8);
    const uint4 d = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.dout) + d_off + lg * 8);
    sum = dot8<T>(o, d);
    float4* acc = reinterpret_cast<float4*>(p.dq_accum + (r * p.h_q + h) * kD + lg * 8);
    acc[0] = make_float4(0.f, 0.f, 0.f, 0.f);
    acc[1] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int off = G::kGroup / 2; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (valid && lg == 0) {
    // delta is laid out like lse: dense [B, H, S] (b = r / S), varlen [H, total].
    const int64_t idx = varlen ? h * p.lse_head_stride + r
                               : (r / p.seqlen_q) * p.lse_batch_stride + h * p.lse_head_stride + r % p.seqlen_q;
    p.delta[idx] = sum;
  }
  if (p.deterministic) {
    const int64_t sems = int64_t(p.batch) * p.h_q * p.sem_m_blocks;
    for (int64_t i = gtid; i < sems; i += int64_t(gridDim.x) * kPrePostThreads) p.dq_semaphore[i] = 0;
  }
}

template <typename T, int kD>
__global__ void __launch_bounds__(kPrePostThreads) bwd_post_kernel(const BwdParams p) {
  using G = RowGroup<kD>;
  const int64_t item = (int64_t(blockIdx.x) * kPrePostThreads + threadIdx.x) / G::kGroup;
  const int lg = threadIdx.x % G::kGroup;
  if (item >= int64_t(p.rows_q) * p.h_q || lg >= G::kChunks) return;
  const int64_t r = item / p.h_q;
  const int h = int(item % p.h_q);
  const bool varlen = p.cu_seqlens_q != nullptr;
  const float4* acc = reinterpret_cast<const float4*>(p.dq_accum + (r * p.h_q + h) * kD + lg * 8);
  const float4 a = acc[0], b = acc[1];
  const float s = p.softmax_scale;
  uint4 out;
  out.x = prims::pack2<T>(a.x * s, a.y * s);
  out.y = prims::pack2<T>(a.z * s, a.w * s);
  out.z = prims::pack2<T>(b.x * s, b.y * s);
  out.w = prims::pack2<T>(b.z * s, b.w * s);
  const int64_t off = row_offset(r, h, p.seqlen_q, varlen, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride);
  *reinterpret_cast<uint4*>(static_cast<T*>(p.dq) + off + lg * 8) = out;
}

// Varlen only (batch strides unused): dk[r, h, :] = dv[r, h, :] = 0 for every packed row.
template <typename T, int kD>
__global__ void __launch_bounds__(kPrePostThreads) bwd_zero_rows_kernel(const BwdParams p) {
  constexpr int kChunks = kD / 8;
  const int64_t i = int64_t(blockIdx.x) * kPrePostThreads + threadIdx.x;
  if (i >= int64_t(p.total_k) * p.h_kv * kChunks) return;
  const int c = int(i % kChunks);
  const int64_t rh = i / kChunks;
  const int64_t r = rh / p.h_kv;
  const int h = int(rh % p.h_kv);
  const uint4 z = make_uint4(0, 0, 0, 0);
  *reinterpret_cast<uint4*>(static_cast<T*>(p.dk) + r * p.dk_row_stride + h * p.dk_head_stride + c * 8) = z;
  *reinterpret_cast<uint4*>(static_cast<T*>(p.dv) + r * p.dv_row_stride + h * p.dv_head_stride + c * 8) = z;
}

}  // namespace flashkit::bwd_sm80
