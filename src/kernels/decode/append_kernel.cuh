// Paged KV append: writes the s_new new tokens of each sequence (k_new/v_new
// [B, s_new, H_kv, D]) into their page slots. seqlens_k counts the cached tokens with the
// new ones included, so new token t of sequence b goes to position seqlens_k[b] - s_new + t,
// page block_table[b][pos / page_size], slot pos % page_size. A token whose position is
// negative or beyond the block table, or whose block id is outside [0, num_pages), is not
// written and sets the append error bit. Dtype-agnostic: moves 16-byte chunks.
#pragma once

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
