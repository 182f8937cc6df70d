// Masking of one S tile: keys past the end of the sequence, and (causal) keys after the
// bottom-right aligned diagonal, i.e. key j is visible to query row i iff
// j < seqlen_k && (!causal || j <= i + seqlen_k - seqlen_q).
#pragma once

#include <cmath>

namespace flashkit::attn {

struct Mask {
  int seqlen_q;
  int seqlen_k;
  bool causal;

  // Whether key tile [n0, n0 + block_n) needs any masking for query rows [m0, m0 + block_m).
  // Monotone in n0: walking key tiles from last to first, once false it stays false.
  __device__ __forceinline__ bool tile_needs_mask(int n0, int block_n, int m0) const {
    return n0 + block_n > seqlen_k || (causal && n0 + block_n - 1 > m0 + seqlen_k - seqlen_q);
  }

  // Number of key tiles any row of [m0, m0 + block_m) can see (0: none).
  __device__ __forceinline__ int num_key_tiles(int m0, int block_m, int block_n) const {
    int keys = seqlen_k;
    if (causal) {
      const int last_row = min(m0 + block_m, seqlen_q) - 1;
      keys = min(keys, max(0, last_row + 1 + seqlen_k - seqlen_q));
    }
    return (keys + block_n - 1) / block_n;
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
        const int limit = causal ? min(seqlen_k, row + 1 + seqlen_k - seqlen_q) : seqlen_k;
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int col = col0 + nt * 8 + 2 * t + e;
            if (col >= limit) s[mt][nt][half * 2 + e] = -INFINITY;
          }
        }
      }
    }
  }
};

}  // namespace flashkit::attn
