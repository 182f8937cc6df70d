// The backward's chunked launch order (BwdParams::order_chunk; docs/kernels/bwd.md "Chunked launch order"),
// host- and device-callable so that the CPU tests check the permutation the kernels use
// (tests/cpp/test_bwd_launch_order.cpp). A one-CTA-per-key-block grid of n_blocks key blocks x `groups`
// (batch, KV head) groups is launched in linear order lin = key block + n_blocks * group; read in chunks of
// `chunk` groups, lin covers chunk after chunk, and inside a chunk every group's key block 0, then every
// group's key block 1, ... (the last chunk may hold fewer groups).
#pragma once

#if defined(__CUDACC__)
#define FLASHKIT_BWD_ORDER_HD __host__ __device__ __forceinline__
#else
#define FLASHKIT_BWD_ORDER_HD inline
#endif

namespace flashkit::attn {

struct BwdBlockCoords {
  int key_block;
  int group;
};

// The key block and group of launch index lin (0 <= lin < n_blocks * groups; chunk >= 1; n_blocks * groups and
// chunk * n_blocks below 2^31).
FLASHKIT_BWD_ORDER_HD BwdBlockCoords bwd_chunked_coords(int lin, int n_blocks, int groups, int chunk) {
  const int c0 = lin / (chunk * n_blocks) * chunk;  // the chunk's first group
#if defined(__CUDA_ARCH__)
  const int cc = min(chunk, groups - c0);  // its groups (the last chunk may be short)
#else
  const int cc = chunk < groups - c0 ? chunk : groups - c0;
#endif
  const int r = lin - c0 * n_blocks;
  const int g = c0 + r % cc;
  return {r / cc, g};
}

}  // namespace flashkit::attn
