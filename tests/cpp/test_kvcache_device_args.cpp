// Argument checks of kvcache_apply_updates: every bad argument is refused before anything
// touches the GPU (these tests need no GPU), and no work at all is a successful no-op.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "flashkit/kvcache.h"

namespace {

using flashkit::KVCacheDeviceCaches;
using flashkit::KVCacheDeviceTables;
using flashkit::Status;

// Fake device addresses: validation never dereferences them.
const int32_t* kBuf = reinterpret_cast<const int32_t*>(uintptr_t{0x10000});
const uint64_t* kPtrs = reinterpret_cast<const uint64_t*>(uintptr_t{0x20000});
int32_t* kTable = reinterpret_cast<int32_t*>(uintptr_t{0x30000});
int32_t* kSeqlens = reinterpret_cast<int32_t*>(uintptr_t{0x40000});

KVCacheDeviceCaches caches() {
  KVCacheDeviceCaches c;
  c.cache_ptrs = kPtrs;
  c.num_caches = 4;
  c.num_blocks = 64;
  c.block_bytes = 32768;
  c.block_stride_bytes = 32768;
  return c;
}

KVCacheDeviceTables tables() {
  KVCacheDeviceTables t;
  t.block_table = kTable;
  t.seqlens = kSeqlens;
  t.max_batch = 8;
  t.max_blocks_per_seq = 16;
  t.row_stride = 16;
  return t;
}

void expect_invalid(const Status& st, const std::string& needle) {
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
}

TEST(KVCacheDeviceArgs, NoWorkIsANoOp) {
  EXPECT_TRUE(flashkit::kvcache_apply_updates(nullptr, 0, 0, 0, {}, {}, nullptr).ok());
}

TEST(KVCacheDeviceArgs, BadArgumentsAreNamed) {
  using flashkit::kvcache_apply_updates;
  expect_invalid(kvcache_apply_updates(kBuf, 10, -1, 0, caches(), tables(), nullptr), "num_copies");
  expect_invalid(kvcache_apply_updates(nullptr, 10, 1, 0, caches(), tables(), nullptr), "updates_device");
  expect_invalid(kvcache_apply_updates(kBuf, 6, 1, 1, caches(), tables(), nullptr), "length 6");
  KVCacheDeviceCaches c = caches();
  c.cache_ptrs = nullptr;
  expect_invalid(kvcache_apply_updates(kBuf, 2, 1, 0, c, tables(), nullptr), "cache_ptrs");
  c = caches();
  c.num_caches = 0;
  expect_invalid(kvcache_apply_updates(kBuf, 2, 1, 0, c, tables(), nullptr), "num_caches");
  c = caches();
  c.block_stride_bytes = 100;
  expect_invalid(kvcache_apply_updates(kBuf, 2, 1, 0, c, tables(), nullptr), "block_stride_bytes");
  c = caches();
  c.num_blocks = 0;
  expect_invalid(kvcache_apply_updates(kBuf, 2, 1, 0, c, tables(), nullptr), "num_blocks");
  KVCacheDeviceTables t = tables();
  t.seqlens = nullptr;
  expect_invalid(kvcache_apply_updates(kBuf, 5, 0, 1, caches(), t, nullptr), "seqlens");
  t = tables();
  t.row_stride = 8;
  expect_invalid(kvcache_apply_updates(kBuf, 5, 0, 1, caches(), t, nullptr), "row_stride");
  // Rows only: the caches are not needed (and not checked).
  t = tables();
  t.max_batch = 0;
  expect_invalid(kvcache_apply_updates(kBuf, 5, 0, 1, {}, t, nullptr), "max_batch");
}

}  // namespace
