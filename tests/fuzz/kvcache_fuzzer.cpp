// libFuzzer target over the KV-cache manager's operations.
//
// The first 4 bytes choose a small configuration (1..48 blocks of 1, 2, 3, 4, 8 or 16
// tokens, 1..10 rows, 1..12 blocks per row, prefix caching on or off); the rest drive
// kvtest::run_ops (creates with shared prompt prefixes, appends, forks, frees, step
// boundaries, bad calls), which checks the manager's invariants, the reference model and
// the simulated device after every operation and frees everything at the end (no leak).
// A violation prints its description and aborts, so libFuzzer keeps the input.
//
// Build and run: see docs/kvcache.md ("Fuzzing").
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "kvcache_harness.h"

namespace {

struct Bytes : kvtest::Source {
  Bytes(const uint8_t* d, size_t n) : data(d), size(n) {}
  uint32_t next(uint32_t n) override {
    if (n <= 1 || pos >= size) return 0;
    uint32_t v = data[pos++];
    if (n > 256 && pos < size) v |= static_cast<uint32_t>(data[pos++]) << 8;
    return v % n;
  }
  bool done() const override { return pos >= size; }
  const uint8_t* data;
  size_t size;
  size_t pos = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  static const int32_t kBlockSizes[] = {1, 2, 3, 4, 8, 16};
  flashkit::KVCacheConfig c;
  c.num_blocks = 1 + data[0] % 48;
  c.block_size = kBlockSizes[data[1] % 6];
  c.prefix_caching = (data[1] & 0x80) == 0;
  c.max_batch = 1 + data[2] % 10;
  c.max_blocks_per_seq = 1 + data[3] % 12;
  kvtest::Harness h(c);
  if (!h.init_error().empty()) {
    std::fprintf(stderr, "config refused: %s\n", h.init_error().c_str());
    std::abort();
  }
  Bytes src(data + 4, size - 4);
  const std::string e = kvtest::run_ops(h, src, 1 << 20);
  if (!e.empty()) {
    std::fprintf(stderr, "KV-cache manager violation: %s\n", e.c_str());
    std::abort();
  }
  return 0;
}
