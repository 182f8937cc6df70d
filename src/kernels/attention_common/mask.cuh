// Masking of one S tile: keys past the end of the sequence, (causal) keys after the
// bottom-right aligned diagonal, and (sliding window) keys outside the row's window.
// With d = seqlen_k - seqlen_q, key j is visible to query row i iff
//   j < seqlen_k  &&  (!causal || j <= i + d)  &&  (right < 0 || j <= i + d + right)
//                 &&  (left < 0 || j >= i + d - left).
// (The API sets right = 0 together with causal; right > 0 only without it.)
#pragma once

#include <cmath>

namespace flashkit::attn {

struct Mask {
  int seqlen_q;
  int seqlen_k;
  bool causal;
  int left = -1;   // sliding window: keys before i + d - left are masked (-1: none)
  int right = -1;  // keys after i + d + right are masked (-1: none; causal: 0)

  __device__ __forceinline__ bool has_right() const { return causal || right >= 0; }
  __device__ __forceinline__ int right_of(int row) const {  // last visible key of `row`
    return row + seqlen_k - seqlen_q + (causal ? 0 : right);
  }

  // Whether key tile [n0, n0 + block_n) needs masking on its right side (sequence end,
  // causal diagonal, window) for query rows from m0 on. Monotone in n0: walking key
  // tiles from last to first, once false it stays false.
  __device__ __forceinline__ bool tile_needs_mask(int n0, int block_n, int m0) const {
    return n0 + block_n > seqlen_k || (has_right() && n0 + block_n - 1 > right_of(m0));
  }

  // Whether the tile needs masking on its left side (window) for rows up to m_last.
  __device__ __forceinline__ bool tile_needs_left_mask(int n0, int m_last) const {
    return left >= 0 && n0 < m_last + seqlen_k - seqlen_q - left;
  }

  // Number of key tiles any row of [m0, m0 + block_m) can see on the right (0: none):
  // the walk covers key tiles [first_key_tile, num_key_tiles).
  __device__ __forceinline__ int num_key_tiles(int m0, int block_m, int block_n) const {
    int keys = seqlen_k;
    if (has_right()) {
      const int last_row = min(m0 + block_m, seqlen_q) - 1;
      keys = min(keys, max(0, right_of(last_row) + 1));
    }
    return (keys + block_n - 1) / block_n;
  }

  // First key tile any row from m0 on can see (the window's left edge of row m0).
  __device__ __forceinline__ int first_key_tile(int m0, int block_n) const {
    if (left < 0) return 0;
    return max(0, m0 + seqlen_k - seqlen_q - left) / block_n;
  }

  // Sets masked scores of a warp's S fragments to -inf. `row0`: the query row of
  // fragment row g = 0 of MMA tile 0; `col0`: the key index of column 0 of the tile.
  template <int kMTiles, int kNTiles>
  __device__ __forceinline__ void apply(float (&s)[kMTiles][kNTiles][4], int row0, int col0,
                                        int lane) const {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = row0 + mt * 16 + g + half * 8;
        const int limit = has_right() ? min(seqlen_k, right_of(row) + 1) : seqlen_k;
        const int first = left >= 0 ? row + seqlen_k - seqlen_q - left : 0;
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int col = col0 + nt * 8 + 2 * t + e;
            if (col >= limit || (left >= 0 && col < first)) s[mt][nt][half * 2 + e] = -INFINITY;
          }
        }
      }
    }
  }

  // Whether key `key` is visible to row `row` (the backward's per-element test).
  __device__ __forceinline__ bool visible(int row, int key) const {
    return key < seqlen_k && (!has_right() || key <= right_of(row)) &&
           (left < 0 || key >= row + seqlen_k - seqlen_q - left);
  }
};

}  // namespace flashkit::attn
