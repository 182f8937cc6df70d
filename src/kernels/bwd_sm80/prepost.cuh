// The backward's small kernels around the main one (any architecture, sm_80+):
//  - bwd_pre_kernel: delta = rowsum(dO * O) per (row, head), computed once here and read
//    by every key block (never recomputed in the main loop); clears the fp32 dq
//    accumulator and the deterministic-mode counters (the workspace is scratch on entry).
//    With dq_fixed (deterministic mode in fixed point, bwd_params.h) it also writes each
//    row's exponent dq_exp from ||dO_i||_2 and the KV bounds of bwd_kvbound_kernel.
//  - bwd_kvbound_kernel (dq_fixed only, after a memset of dq_kvbound): max |K| and
//    max_j ||V_j||_2 per KV head, by atomicMax on the bits of non-negative floats.
//  - bwd_post_kernel: dq = dq_accum * softmax_scale in the input dtype (dq_fixed: the int32
//    sums times 2^-dq_exp).
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

// Row exponent of the fixed-point dQ. |dq_accum_i,d| = |sum_j dS_ij K_jd| with dS_ij = P_ij (dP_ij -
// delta_i), sum_j P_ij = 1, |dP_ij| = |dO_i . V_j| <= ||dO_i|| vmax and |delta_i| = |dO_i . O_i| <=
// ||dO_i|| vmax (O_i is a convex combination of the V_j), so every partial sum of row i's adds is
// at most 2 ||dO_i|| vmax kmax = bound; the factor 1 + 2^-4 covers the roundings (P and dS in 16
// bits, the norms in fp32). Scaled by 2^k with bound < 2^(30 - k), every partial sum stays below
// 2^30 and the int32 sum cannot overflow (2^31 leaves room for the roundings of 2^20 adds).
// A bound of 0 (dO_i = 0, or K or V all zero: every add is 0) gives k = 30 (frexpf's exponent of 0).
// The product in double precision: finite inputs always give a finite bound (at most ~2^386), and
// a bound past 2^156 clamps k to -126 (such a row's adds, fp32 values below 2^128, stay below 4).
__device__ __forceinline__ int32_t dq_row_exp(float dnorm, float kmax, float vmax) {
  const double bound = 2.0625 * double(dnorm) * double(vmax) * double(kmax);
  if (!(bound <= 1.0e300)) return kDqExpNonFinite;  // inf or NaN somewhere in dO, K or V
  int e = 0;
  (void)frexp(bound, &e);  // bound < 2^e (bound = 0: e = 0)
  const int k = 30 - e;
  return k > 126 ? 126 : (k < -126 ? -126 : k);
}

// Index of (row r, head h) in delta / dq_exp, laid out like lse: dense [B, H, S] (b = r / S),
// varlen [H, total].
__device__ __forceinline__ int64_t stat_index(const BwdParams& p, int64_t r, int h, bool varlen) {
  return varlen ? h * p.lse_head_stride + r
                : (r / p.seqlen_q) * p.lse_batch_stride + h * p.lse_head_stride + r % p.seqlen_q;
}

template <typename T, int kD>
__global__ void __launch_bounds__(kPrePostThreads) bwd_kvbound_kernel(const BwdParams p) {
  using G = RowGroup<kD>;
  // blockIdx.y = KV head; rows of K / V in a grid-stride walk; one atomicMax per block and value.
  const int h = blockIdx.y;
  const int lg = threadIdx.x % G::kGroup;
  const bool varlen = p.cu_seqlens_k != nullptr;
  int64_t rows = varlen ? int64_t(p.total_k) : int64_t(p.batch) * p.seqlen_k;
  if (varlen) {  // rows no sequence covers are never read by the main kernel: not bounded either
    const int64_t end = p.cu_seqlens_k[p.batch];
    rows = end < 0 ? 0 : (end < rows ? end : rows);
  }
  float kmax = 0.f, vss = 0.f;
  for (int64_t r = (int64_t(blockIdx.x) * kPrePostThreads + threadIdx.x) / G::kGroup; r < rows;
       r += int64_t(gridDim.x) * kPrePostThreads / G::kGroup) {
    float k_abs = 0.f, v_sq = 0.f;
    if (lg < G::kChunks) {
      const int64_t k_off = row_offset(r, h, p.seqlen_k, varlen, p.k_batch_stride, p.k_row_stride, p.k_head_stride);
      const int64_t v_off = row_offset(r, h, p.seqlen_k, varlen, p.v_batch_stride, p.v_row_stride, p.v_head_stride);
      const uint4 kc = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.k) + k_off + lg * 8);
      const uint4 vc = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.v) + v_off + lg * 8);
      const T* kx = reinterpret_cast<const T*>(&kc);
      const T* vx = reinterpret_cast<const T*>(&vc);
      // Maxima on the bits of |x|: non-negative floats order as integers, and a NaN's bits
      // (sign cleared) lie above inf's, so a NaN anywhere wins (fmaxf would drop it).
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        k_abs = __int_as_float(max(__float_as_int(k_abs), __float_as_int(fabsf(float(kx[i])))));
        v_sq += float(vx[i]) * float(vx[i]);
      }
    }
#pragma unroll
    for (int off = G::kGroup / 2; off > 0; off /= 2) v_sq += __shfl_xor_sync(0xffffffffu, v_sq, off);
    kmax = __int_as_float(max(__float_as_int(kmax), __float_as_int(k_abs)));
    vss = __int_as_float(max(__float_as_int(vss), __float_as_int(fabsf(v_sq))));
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    kmax = __int_as_float(max(__float_as_int(kmax), __shfl_xor_sync(0xffffffffu, __float_as_int(kmax), off)));
    vss = __int_as_float(max(__float_as_int(vss), __shfl_xor_sync(0xffffffffu, __float_as_int(vss), off)));
  }
  if (threadIdx.x % 32 == 0) {
    int* dst = reinterpret_cast<int*>(p.dq_kvbound + 2 * h);
    atomicMax(dst, __float_as_int(kmax));
    atomicMax(dst + 1, __float_as_int(fabsf(sqrtf(vss))));  // (a NaN stays a NaN, above inf)
  }
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
  float sum = 0.f, dsq = 0.f;
  if (valid && lg < G::kChunks) {
    const int64_t o_off = row_offset(r, h, p.seqlen_q, varlen, p.o_batch_stride, p.o_row_stride, p.o_head_stride);
    const int64_t d_off = row_offset(r, h, p.seqlen_q, varlen, p.do_batch_stride, p.do_row_stride, p.do_head_stride);
    const uint4 o = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.o) + o_off + lg * 8);
    const uint4 d = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.dout) + d_off + lg * 8);
    sum = dot8<T>(o, d);
    if (p.dq_fixed) dsq = dot8<T>(d, d);
    float4* acc = reinterpret_cast<float4*>(p.dq_accum + (r * p.h_q + h) * kD + lg * 8);
    acc[0] = make_float4(0.f, 0.f, 0.f, 0.f);
    acc[1] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int off = G::kGroup / 2; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (p.dq_fixed) {
#pragma unroll
    for (int off = G::kGroup / 2; off > 0; off /= 2) dsq += __shfl_xor_sync(0xffffffffu, dsq, off);
  }
  if (valid && lg == 0) {
    const int64_t idx = stat_index(p, r, h, varlen);
    p.delta[idx] = sum;
    if (p.dq_fixed) {
      // A varlen row after the last sequence (the padding of q) gets nothing from the main
      // kernel, so its dq is 0 whatever its dout holds (NaN included): the exponent of a zero row.
      bool covered = true;
      if (varlen) {
        const int64_t end = p.cu_seqlens_q[p.batch];  // (untrusted: clamped)
        covered = r < (end < 0 ? 0 : (end < p.rows_q ? end : p.rows_q));
      }
      const float* kv = p.dq_kvbound + 2 * (h / p.h_ratio);
      p.dq_exp[idx] = covered ? dq_row_exp(sqrtf(dsq), kv[0], kv[1]) : dq_row_exp(0.f, 0.f, 0.f);
    }
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
  float4 a = acc[0], b = acc[1];
  float s = p.softmax_scale;
  if (p.dq_fixed) {  // int32 sums of dQ * 2^k: back to float, times 2^-k (NaN where the bound was not finite)
    const int32_t k = p.dq_exp[stat_index(p, r, h, varlen)];
    s = k == kDqExpNonFinite ? __int_as_float(0x7fffffff) : s * prims::exp2_int(-k);
    auto f = [](float x) { return __int2float_rn(__float_as_int(x)); };
    a = make_float4(f(a.x), f(a.y), f(a.z), f(a.w));
    b = make_float4(f(b.x), f(b.y), f(b.z), f(b.w));
  }
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
