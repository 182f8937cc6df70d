// The chained block hash of the prefix cache (plain C++, no CUDA).
//
// A full block is named by hash(prefix hash, its block_size token ids), where the prefix
// hash is the previous block's name (or a root value for the first block). Equal names
// mean, up to a 64-bit collision, equal token prefixes, so equal KV. The manager also
// stores each cached block's tokens and prefix hash and compares them on a hit, so a
// collision can only matter between two different prefixes whose 64-bit names collide
// and whose next blocks are equal: with N cached prefixes about N^2 / 2^65.
#pragma once

#include <cstdint>

namespace flashkit {
namespace kvcache {

// A bijective 64-bit mixer (the finalizer of the splitmix64 generator): every input bit
// affects every output bit.
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

inline constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;  // 2^64 / golden ratio

// Name of the empty prefix for a given block size (blocks of different sizes never match).
inline uint64_t root_hash(int32_t block_size) {
  return mix64(static_cast<uint64_t>(block_size) * kGolden + 0x6b76636163686521ULL);
}

// Name of a block of `n` tokens following the prefix named `parent`. Sequential mixing
// makes it depend on the order of the tokens.
inline uint64_t block_hash(uint64_t parent, const int32_t* tokens, int32_t n) {
  uint64_t h = mix64(parent + kGolden);
  for (int32_t i = 0; i < n; ++i) {
    h = mix64((h ^ static_cast<uint64_t>(static_cast<uint32_t>(tokens[i]))) + kGolden);
  }
  return h;
}

}  // namespace kvcache
}  // namespace flashkit
