// Argument checks of the MLA decode (validate_mla_decode, validate_mla_metadata) and its size
// helpers. Validation reads descriptors only, so fake device addresses do (no GPU needed).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "attention_test_util.h"
#include "flashkit/mla.h"

namespace {

using flashkit::DType;
using flashkit::MlaDecodeArgs;
using flashkit::MlaMetadataArgs;
using flashkit::Status;
using flashkit::TensorRef;
using flashkit_test::expect_invalid;
using flashkit_test::fake_ptr;

struct Sizes {
  int64_t B = 2, s_q = 1, h_q = 16, h_kv = 1, pages = 10, page = 64, max_pages = 4, parts = 8;
  DType dt = DType::kBFloat16;
};

MlaDecodeArgs make(const Sizes& s) {
  MlaDecodeArgs a;
  a.q = TensorRef::cuda(fake_ptr(1), s.dt, {s.B, s.s_q, s.h_q, 576});
  a.kv_cache = TensorRef::cuda(fake_ptr(2), s.dt, {s.pages, s.page, s.h_kv, 576});
  a.block_table = TensorRef::cuda(fake_ptr(3), DType::kInt32, {s.B, s.max_pages});
  a.seqlens_k = TensorRef::cuda(fake_ptr(4), DType::kInt32, {s.B});
  a.tile_scheduler_metadata = TensorRef::cuda(fake_ptr(5), DType::kInt32, {s.parts, 8});
  a.num_splits = TensorRef::cuda(fake_ptr(6), DType::kInt32, {s.B + 1});
  a.out = TensorRef::cuda(fake_ptr(7), s.dt, {s.B, s.s_q, s.h_q, 512});
  a.lse = TensorRef::cuda(fake_ptr(8), DType::kFloat32, {s.B, s.h_q, s.s_q});
  a.workspace = TensorRef::cuda(fake_ptr(9), DType::kUInt8,
                                {flashkit::mla_workspace_size(s.B, s.s_q, s.h_q, s.parts)});
  return a;
}

TEST(ValidateMla, ValidArgumentsPass) {
  EXPECT_TRUE(flashkit::validate_mla_decode(make(Sizes{})).ok());
  Sizes s;
  s.s_q = 4, s.h_q = 128, s.page = 1, s.dt = DType::kFloat16;
  const Status st = flashkit::validate_mla_decode(make(s));
  // (MLA is compiled for every dtype of FLASHKIT_DTYPES, the forward's: fp16 is in the build iff a forward variant is)
  bool fp16_built = false;
  for (int d : {64, 96, 128, 192, 256}) {
    fp16_built = fp16_built || flashkit::is_fwd_variant_compiled(DType::kFloat16, d);
  }
  if (fp16_built) {
    EXPECT_TRUE(st.ok()) << st.message();
  } else {
    EXPECT_EQ(st.code(), Status::Code::kNotCompiled) << st.message();
  }
  s = Sizes{};
  s.h_q = 144, s.h_kv = 2, s.s_q = 3, s.page = 48;  // ratio 72
  EXPECT_TRUE(flashkit::validate_mla_decode(make(s)).ok());
}

TEST(ValidateMla, HeadDims) {
  MlaDecodeArgs a = make(Sizes{});
  a.q.shape[3] = 128;
  expect_invalid(flashkit::validate_mla_decode(a), "q", "576");
  a = make(Sizes{});
  a.kv_cache.shape[3] = 512;
  expect_invalid(flashkit::validate_mla_decode(a), "kv_cache", "576");
  a = make(Sizes{});
  a.head_dim_v = 576;
  expect_invalid(flashkit::validate_mla_decode(a), "head_dim_v", "512");
}

TEST(ValidateMla, HeadsAndTokens) {
  Sizes s;
  s.h_kv = 3;
  expect_invalid(flashkit::validate_mla_decode(make(s)), "q, kv_cache", "multiple of h_kv");
  s = Sizes{};
  s.h_q = 256;
  expect_invalid(flashkit::validate_mla_decode(make(s)), "q, kv_cache", "1..128");
  s = Sizes{};
  s.s_q = 5;
  expect_invalid(flashkit::validate_mla_decode(make(s)), "q", "s_q");
}

// A page size of 0 is refused with a message naming the cache (issue 7: bad page size -> clear error).
TEST(ValidateMla, PageSize) {
  Sizes s;
  s.page = 0;
  expect_invalid(flashkit::validate_mla_decode(make(s)), "kv_cache", "page_size >= 1");
}

TEST(ValidateMla, Dtypes) {
  MlaDecodeArgs a = make(Sizes{});
  a.q.dtype = DType::kFloat32;
  expect_invalid(flashkit::validate_mla_decode(a), "q", "float16 or bfloat16, got float32");
  a = make(Sizes{});
  a.kv_cache.dtype = DType::kFloat16;
  expect_invalid(flashkit::validate_mla_decode(a), "kv_cache", "same as q");
  a = make(Sizes{});
  a.block_table.dtype = DType::kInt64;
  expect_invalid(flashkit::validate_mla_decode(a), "block_table", "int32");
  a = make(Sizes{});
  a.num_splits.dtype = DType::kInt64;
  expect_invalid(flashkit::validate_mla_decode(a), "num_splits", "int32");
  a = make(Sizes{});
  a.lse.dtype = DType::kBFloat16;
  expect_invalid(flashkit::validate_mla_decode(a), "lse", "float32");
  a = make(Sizes{});
  a.workspace.dtype = DType::kFloat32;
  expect_invalid(flashkit::validate_mla_decode(a), "workspace", "uint8 or int32");
}

TEST(ValidateMla, Fp8Cache) {
  // FlashMLA's FP8 layout: uint8 or float8_e4m3fn, 656 bytes per token, q bf16 or fp16.
  for (DType cache : {DType::kUInt8, DType::kFloat8E4M3FN}) {
    MlaDecodeArgs a = make(Sizes{});
    a.kv_cache = TensorRef::cuda(fake_ptr(2), cache, {10, 64, 1, 656});
    EXPECT_TRUE(flashkit::validate_mla_decode(a).ok()) << flashkit::validate_mla_decode(a).message();
    a.kv_cache.shape[3] = 576;  // the 16-bit layout's size in bytes is not the FP8 one
    expect_invalid(flashkit::validate_mla_decode(a), "kv_cache", "656 bytes per token");
  }
  MlaDecodeArgs a = make(Sizes{});
  a.kv_cache = TensorRef::cuda(fake_ptr(2), DType::kInt8, {10, 64, 1, 656});
  expect_invalid(flashkit::validate_mla_decode(a), "kv_cache", "uint8 / float8_e4m3fn");
  a = make(Sizes{});  // token slots 664 bytes apart: 8-byte but not 16-byte aligned rows
  a.kv_cache = TensorRef::cuda_strided(fake_ptr(2), DType::kUInt8, {10, 64, 1, 656}, {64 * 664, 664, 664, 1});
  expect_invalid(flashkit::validate_mla_decode(a), "kv_cache", "multiple of 16");
  a = make(Sizes{});  // a padded slot stride that keeps 16-byte alignment is fine
  a.kv_cache = TensorRef::cuda_strided(fake_ptr(2), DType::kUInt8, {10, 64, 1, 656}, {64 * 672, 672, 672, 1});
  EXPECT_TRUE(flashkit::validate_mla_decode(a).ok()) << flashkit::validate_mla_decode(a).message();
  a = make(Sizes{});
  a.kv_cache = TensorRef::cuda(fake_ptr(2), DType::kUInt8, {10, 64, 656});
  expect_invalid(flashkit::validate_mla_decode(a), "kv_cache", "656] (FP8 layout)");
}

TEST(ValidateMla, ShapesAndLayouts) {
  MlaDecodeArgs a = make(Sizes{});
  a.tile_scheduler_metadata = TensorRef::cuda(fake_ptr(5), DType::kInt32, {8, 4});
  expect_invalid(flashkit::validate_mla_decode(a), "tile_scheduler_metadata", "[num_parts, 8]");
  a = make(Sizes{});
  a.num_splits = TensorRef::cuda(fake_ptr(6), DType::kInt32, {2});
  expect_invalid(flashkit::validate_mla_decode(a), "num_splits", "[3]");
  a = make(Sizes{});
  a.workspace.shape[0] -= 1;
  expect_invalid(flashkit::validate_mla_decode(a), "workspace", "mla_workspace_size");
  a = make(Sizes{});
  a.out.shape[3] = 576;
  expect_invalid(flashkit::validate_mla_decode(a), "out", "shape");
  a = make(Sizes{});
  a.lse = TensorRef::cuda(fake_ptr(8), DType::kFloat32, {2, 1, 16});
  expect_invalid(flashkit::validate_mla_decode(a), "lse", "[B, h_q, s_q]");
  a = make(Sizes{});
  a.q = TensorRef::cuda_strided(fake_ptr(1), DType::kBFloat16, {2, 1, 16, 576}, {9216, 9216, 576, 2});
  expect_invalid(flashkit::validate_mla_decode(a), "q", "contiguous");
  a = make(Sizes{});
  a.block_table = TensorRef::cuda(fake_ptr(3), DType::kInt32, {3, 4});
  expect_invalid(flashkit::validate_mla_decode(a), "block_table", "rows");
  a = make(Sizes{});
  a.lse = TensorRef{};
  expect_invalid(flashkit::validate_mla_decode(a), "lse", "missing");
}

TEST(ValidateMla, Metadata) {
  MlaMetadataArgs m;
  m.seqlens_k = TensorRef::cuda(fake_ptr(1), DType::kInt32, {4});
  m.tile_scheduler_metadata = TensorRef::cuda(fake_ptr(2), DType::kInt32, {16, 8});
  m.num_splits = TensorRef::cuda(fake_ptr(3), DType::kInt32, {5});
  EXPECT_TRUE(flashkit::validate_mla_metadata(m).ok());
  m.num_splits.shape[0] = 4;
  expect_invalid(flashkit::validate_mla_metadata(m), "num_splits", "B + 1");
  m.num_splits.shape[0] = 5;
  m.seqlens_k.dtype = DType::kInt64;
  expect_invalid(flashkit::validate_mla_metadata(m), "seqlens_k", "int32");
}

TEST(MlaSizes, PartsAndWorkspace) {
  EXPECT_EQ(flashkit::mla_num_parts(132, 128, 1), 66);
  EXPECT_EQ(flashkit::mla_num_parts(132, 512, 1), 16);
  EXPECT_EQ(flashkit::mla_num_parts(132, 64, 2), 66);
  EXPECT_EQ(flashkit::mla_num_parts(1, 512, 4), 1);
  const int64_t ws = flashkit::mla_workspace_size(128, 2, 128, 33);
  EXPECT_EQ(ws % 256, 0);
  EXPECT_GE(ws, (128 + 33) * 2 * 128 * 513 * 4);
  EXPECT_LT(ws, (128 + 33) * 2 * 128 * 513 * 4 + 512);
}

}  // namespace
