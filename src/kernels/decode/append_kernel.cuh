// Paged KV append: writes the s_new new tokens of each sequence (k_new/v_new
// [B, s_new, H_kv, D]) into their page slots. seqlens_k counts the cached tokens with the
// new ones included, so new token t of sequence b goes to position seqlens_k[b] - s_new + t,
// page block_table[b][pos / page_size], slot pos % page_size. A token whose position is
// negative or beyond the block table, or whose block id is outside [0, num_pages), is not
// written and sets the append error bit. Dtype-agnostic: moves 16-byte chunks.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/decode_params.h"

namespace flashkit::decode {

constexpr int kAppendThreads = 256;

// One thread per 16-byte chunk of one (b, t, head) row of K or V.
__global__ void __launch_bounds__(kAppendThreads) decode_append_kernel(const AppendParams p) {
  const int k_chunks = p.head_dim * p.elem_bytes / 16;
  const int v_chunks = p.head_dim_v * p.elem_bytes / 16;
  const int row_chunks = k_chunks + v_chunks;
  const int64_t rows = int64_t(p.batch) * p.s_new * p.h_kv;
  const int64_t total = rows * row_chunks;
  for (int64_t i = int64_t(blockIdx.x) * kAppendThreads + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * kAppendThreads) {
    const int64_t row = i / row_chunks;
    const int c = int(i - row * row_chunks);
    const int h = int(row % p.h_kv);
    const int t = int((row / p.h_kv) % p.s_new);
    const int b = int(row / (int64_t(p.h_kv) * p.s_new));
    const int len = p.seqlens_k[b];
    const int64_t pos = int64_t(len) - p.s_new + t;
    bool ok = pos >= 0 && pos < int64_t(p.max_pages) * p.page_size;
    int page = -1;
    if (ok) {
      page = p.block_table[int64_t(b) * p.bt_row_stride + pos / p.page_size];
      ok = page >= 0 && page < p.num_pages;
    }
    if (!ok) {
      if (c == 0) atomicOr(p.errors, uint32_t(kDecodeErrAppend));
      continue;
    }
    const int64_t in_page = pos % p.page_size;
    const bool is_k = c < k_chunks;
    const int cc = is_k ? c : c - k_chunks;
    const char* src;
    char* dst;
    if (is_k) {
      src = static_cast<const char*>(p.k_new) +
            (int64_t(b) * p.kn_batch_stride + int64_t(t) * p.kn_tok_stride + int64_t(h) * p.kn_head_stride) *
                p.elem_bytes;
      dst = static_cast<char*>(p.k_cache) +
            (int64_t(page) * p.k_page_stride + in_page * p.k_slot_stride + int64_t(h) * p.k_head_stride) *
                p.elem_bytes;
    } else {
      src = static_cast<const char*>(p.v_new) +
            (int64_t(b) * p.vn_batch_stride + int64_t(t) * p.vn_tok_stride + int64_t(h) * p.vn_head_stride) *
                p.elem_bytes;
      dst = static_cast<char*>(p.v_cache) +
            (int64_t(page) * p.v_page_stride + in_page * p.v_slot_stride + int64_t(h) * p.v_head_stride) *
                p.elem_bytes;
    }
    *reinterpret_cast<uint4*>(dst + cc * 16) = *reinterpret_cast<const uint4*>(src + cc * 16);
  }
}

}  // namespace flashkit::decode

namespace flashkit::decode {

// Quantize-on-append: one warp per (b, t, head, K or V) row. The row's absolute maximum
// gives a symmetric per-token-per-head scale (amax / 127 for int8, amax / 448 for fp8 e4m3,
// 0 for an all-zero row); the values are stored as round(x / scale) (int8: to nearest,
// fp8: to nearest, saturating), the scale next to them. Same slot rules as the plain append.
constexpr int kAppendQuantWarps = 8;

template <typename T, int kQuant>
__global__ void __launch_bounds__(kAppendQuantWarps * 32) decode_append_quant_kernel(const AppendParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t rows = int64_t(p.batch) * p.s_new * p.h_kv * 2;
  for (int64_t row = int64_t(blockIdx.x) * kAppendQuantWarps + threadIdx.x / 32; row < rows;
       row += int64_t(gridDim.x) * kAppendQuantWarps) {
    const bool is_v = row % 2 == 1;
    const int64_t r = row / 2;
    const int h = int(r % p.h_kv);
    const int t = int((r / p.h_kv) % p.s_new);
    const int b = int(r / (int64_t(p.h_kv) * p.s_new));
    const int64_t pos = int64_t(p.seqlens_k[b]) - p.s_new + t;
    bool ok = pos >= 0 && pos < int64_t(p.max_pages) * p.page_size;
    int page = -1;
    if (ok) {
      page = p.block_table[int64_t(b) * p.bt_row_stride + pos / p.page_size];
      ok = page >= 0 && page < p.num_pages;
    }
    if (!ok) {
      if (lane == 0) atomicOr(p.errors, uint32_t(kDecodeErrAppend));
      continue;
    }
    const int64_t in_page = pos % p.page_size;
    const int d = is_v ? p.head_dim_v : p.head_dim;
    const T* src = static_cast<const T*>(is_v ? p.v_new : p.k_new) +
                   (is_v ? int64_t(b) * p.vn_batch_stride + int64_t(t) * p.vn_tok_stride + int64_t(h) * p.vn_head_stride
                         : int64_t(b) * p.kn_batch_stride + int64_t(t) * p.kn_tok_stride + int64_t(h) * p.kn_head_stride);
    uint8_t* dst = static_cast<uint8_t*>(is_v ? p.v_cache : p.k_cache) +
                   (is_v ? int64_t(page) * p.v_page_stride + in_page * p.v_slot_stride + int64_t(h) * p.v_head_stride
                         : int64_t(page) * p.k_page_stride + in_page * p.k_slot_stride + int64_t(h) * p.k_head_stride);
    float amax = 0.f;
    for (int i = lane; i < d; i += 32) amax = fmaxf(amax, fabsf(float(src[i])));
#pragma unroll
    for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    constexpr float kQMax = kQuant == 1 ? 127.f : 448.f;
    const float inv = amax > 0.f ? kQMax / amax : 0.f;
    for (int i = lane; i < d; i += 32) {
      const float x = float(src[i]) * inv;
      if constexpr (kQuant == 1) {
        dst[i] = uint8_t(int8_t(max(-127, min(127, __float2int_rn(x)))));
      } else {
        dst[i] = uint8_t(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
      }
    }
    if (lane == 0) {
      float* sc = is_v ? p.v_scale + int64_t(page) * p.vs_page_stride + in_page * p.vs_slot_stride + int64_t(h) * p.vs_head_stride
                       : p.k_scale + int64_t(page) * p.ks_page_stride + in_page * p.ks_slot_stride + int64_t(h) * p.ks_head_stride;
      *sc = amax / kQMax;
    }
  }
}

}  // namespace flashkit::decode
