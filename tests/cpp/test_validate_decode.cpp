// Argument checks of the paged decode (validate_decode, validate_decode_plan, validate_append_kv):
// every rejected input names its argument at the start of the message, valid inputs pass (Ok, or
// NotCompiled when the variant is not in this build). Validation reads descriptors only, so fake
// device addresses do (no GPU needed).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "attention_test_util.h"
#include "flashkit/decode.h"

namespace {

using flashkit::AppendKVArgs;
using flashkit::DecodeArgs;
using flashkit::DecodePlanArgs;
using flashkit::DType;
using flashkit::Status;
using flashkit::TensorRef;
using flashkit_test::expect_invalid;
using flashkit_test::fake_ptr;

struct Sizes {
  int64_t B = 3, s_q = 1, h_q = 32, h_kv = 8, d = 128, pages = 40, page = 16, max_pages = 8;
  DType dt = DType::kBFloat16;
  DType cache = DType::kInvalid;  // kInvalid: the cache in q's dtype
};

DecodeArgs make(const Sizes& s) {
  const DType c = s.cache == DType::kInvalid ? s.dt : s.cache;
  DecodeArgs a;
  a.q = TensorRef::cuda(fake_ptr(1), s.dt, {s.B, s.s_q, s.h_q, s.d});
  a.k_cache = TensorRef::cuda(fake_ptr(2), c, {s.pages, s.page, s.h_kv, s.d});
  a.v_cache = TensorRef::cuda(fake_ptr(3), c, {s.pages, s.page, s.h_kv, s.d});
  a.block_table = TensorRef::cuda(fake_ptr(4), DType::kInt32, {s.B, s.max_pages});
  a.seqlens_k = TensorRef::cuda(fake_ptr(5), DType::kInt32, {s.B});
  a.out = TensorRef::cuda(fake_ptr(6), s.dt, {s.B, s.s_q, s.h_q, s.d});
  a.lse = TensorRef::cuda(fake_ptr(7), DType::kFloat32, {s.B, s.h_q, s.s_q});
  if (s.cache == DType::kInt8 || s.cache == DType::kFloat8E4M3FN) {
    a.k_scale = TensorRef::cuda(fake_ptr(8), DType::kFloat32, {s.pages, s.page, s.h_kv});
    a.v_scale = TensorRef::cuda(fake_ptr(9), DType::kFloat32, {s.pages, s.page, s.h_kv});
  }
  return a;
}

// Ok where the build has the variant, else NotCompiled (never InvalidArgument). Decode is compiled for the dtypes and
// head dims of FLASHKIT_DTYPES x FLASHKIT_HEAD_DIMS among 64 / 128 / 256, the forward's selection
// (cmake/flashkit_sources.cmake), so the forward's list says which (these sizes use those head dims only).
void expect_valid(const DecodeArgs& a) {
  const Status st = flashkit::validate_decode(a);
  const int d = static_cast<int>(a.q.shape[3]);
  ASSERT_TRUE(d == 64 || d == 128 || d == 256) << d;
  if (flashkit::is_fwd_variant_compiled(a.q.dtype, d)) {
    EXPECT_TRUE(st.ok()) << st.message();
  } else {
    EXPECT_EQ(st.code(), Status::Code::kNotCompiled) << st.message();
  }
}

TEST(ValidateDecode, ValidArgumentsPass) {
  expect_valid(make(Sizes{}));
  Sizes s;
  s.s_q = 16, s.h_q = 8, s.h_kv = 1, s.page = 1, s.dt = DType::kFloat16, s.d = 64;  // MQA, page 1
  expect_valid(make(s));
  s = Sizes{};
  s.d = 256, s.page = 256, s.max_pages = 2;
  expect_valid(make(s));
  DecodeArgs a = make(Sizes{});
  a.lse = TensorRef{};  // optional
  expect_valid(a);
  for (DType c : {DType::kInt8, DType::kFloat8E4M3FN}) {
    s = Sizes{};
    s.cache = c;
    expect_valid(make(s));
  }
  // The HND page layout: [num_pages, H_kv, page_size, D] permuted to [num_pages, page_size, H_kv, D].
  s = Sizes{};
  a = make(s);
  a.k_cache = TensorRef::cuda_strided(fake_ptr(2), s.dt, {s.pages, s.page, s.h_kv, s.d},
                                      {s.h_kv * s.page * s.d, s.d, s.page * s.d, 1});
  a.v_cache = TensorRef::cuda_strided(fake_ptr(3), s.dt, {s.pages, s.page, s.h_kv, s.d},
                                      {s.h_kv * s.page * s.d, s.d, s.page * s.d, 1});
  expect_valid(a);
}

TEST(ValidateDecode, Dtypes) {
  Sizes s;
  s.dt = DType::kFloat32;
  expect_invalid(flashkit::validate_decode(make(s)), "q", "float16 or bfloat16");
  s = Sizes{};
  s.cache = DType::kFloat16;  // q is bf16
  expect_invalid(flashkit::validate_decode(make(s)), "k_cache", "int8 or float8_e4m3fn");
  DecodeArgs a = make(Sizes{});
  a.v_cache.dtype = DType::kFloat16;
  expect_invalid(flashkit::validate_decode(a), "v_cache", "same as k_cache");
  a = make(Sizes{});
  a.block_table.dtype = DType::kInt64;
  expect_invalid(flashkit::validate_decode(a), "block_table", "int32");
  a = make(Sizes{});
  a.seqlens_k.dtype = DType::kInt64;
  expect_invalid(flashkit::validate_decode(a), "seqlens_k", "int32");
  a = make(Sizes{});
  a.lse.dtype = DType::kBFloat16;
  expect_invalid(flashkit::validate_decode(a), "lse", "float32");
}

TEST(ValidateDecode, HeadsTokensAndHeadDims) {
  Sizes s;
  s.h_kv = 5;
  expect_invalid(flashkit::validate_decode(make(s)), "q, k_cache", "multiple of H_kv");
  s = Sizes{};
  s.s_q = 17;
  expect_invalid(flashkit::validate_decode(make(s)), "q", "s_q");
  s = Sizes{};
  s.d = 96;
  expect_invalid(flashkit::validate_decode(make(s)), "q", "64, 128, 256");
  DecodeArgs a = make(Sizes{});
  a.v_cache.shape[3] = 64;
  a.out.shape[3] = 64;
  expect_invalid(flashkit::validate_decode(a), "v_cache", "D_v");
}

TEST(ValidateDecode, ShapesAgree) {
  DecodeArgs a = make(Sizes{});
  a.k_cache.shape[1] = 0;  // page size 0
  a.v_cache.shape[1] = 0;
  EXPECT_FALSE(flashkit::validate_decode(a).ok());
  a = make(Sizes{});
  a.v_cache.shape[0] = 39;
  expect_invalid(flashkit::validate_decode(a), "v_cache", "from k_cache");
  a = make(Sizes{});
  a.block_table.shape[0] = 2;
  expect_invalid(flashkit::validate_decode(a), "block_table", "rows");
  a = make(Sizes{});
  a.seqlens_k.shape[0] = 4;
  expect_invalid(flashkit::validate_decode(a), "seqlens_k", "B from q");
  a = make(Sizes{});
  a.out.shape[2] = 16;
  expect_invalid(flashkit::validate_decode(a), "out", "expected shape");
  a = make(Sizes{});
  a.lse.shape[2] = 2;
  expect_invalid(flashkit::validate_decode(a), "lse", "[B, H_q, s_q]");
  a = make(Sizes{});
  a.block_table.shape[1] = int64_t{1} << 28;  // x page 16 > 2^31 tokens
  expect_invalid(flashkit::validate_decode(a), "block_table", "2^31");
}

TEST(ValidateDecode, QuantizedCaches) {
  Sizes s;
  s.cache = DType::kInt8;
  DecodeArgs a = make(s);
  a.k_scale = TensorRef{};
  expect_invalid(flashkit::validate_decode(a), "k_scale", "required");
  a = make(s);
  a.v_scale.shape[2] = 4;
  expect_invalid(flashkit::validate_decode(a), "v_scale", "the cache's");
  a = make(Sizes{});  // a 16-bit cache with scales
  a.k_scale = TensorRef::cuda(fake_ptr(8), DType::kFloat32, {40, 16, 8});
  expect_invalid(flashkit::validate_decode(a), "k_scale", "not quantized");
  s.cache = DType::kFloat8E4M3FN;
  a = make(s);  // one-byte cache rows must be 16-byte multiples apart
  a.k_cache = TensorRef::cuda_strided(fake_ptr(2), DType::kFloat8E4M3FN, {s.pages, s.page, s.h_kv, s.d},
                                      {s.page * s.h_kv * 136, s.h_kv * 136, 136, 1});
  expect_invalid(flashkit::validate_decode(a), "k_cache", "multiple of 16");
}

TEST(ValidateDecode, SplitSizeAndScale) {
  DecodeArgs a = make(Sizes{});
  a.split_size = 100;
  expect_invalid(flashkit::validate_decode(a), "split_size", "multiple of 64");
  a = make(Sizes{});
  a.split_size = 256;  // max_seqlen_k 0: the block table's capacity bounds the lengths
  expect_valid(a);
  a = make(Sizes{});
  a.softmax_scale = std::numeric_limits<float>::infinity();
  expect_invalid(flashkit::validate_decode(a), "softmax_scale", "finite");
}

TEST(ValidateDecodePlan, SizesAndTensors) {
  DecodePlanArgs p;
  p.batch = 3, p.s_q = 1, p.num_heads_q = 32, p.num_heads_kv = 8, p.head_dim = 128;
  p.seqlens_k = TensorRef::cuda(fake_ptr(5), DType::kInt32, {3});
  p.workspace = TensorRef::cuda(fake_ptr(10), DType::kInt32, {1 << 20});
  EXPECT_TRUE(flashkit::validate_decode_plan(p).ok());
  DecodePlanArgs b = p;
  b.kv_dtype = DType::kFloat16;
  expect_invalid(flashkit::validate_decode_plan(b), "kv_dtype", "int8");
  b = p;
  b.num_heads_kv = 0;
  expect_invalid(flashkit::validate_decode_plan(b), "num_heads_kv", ">= 1");
  b = p;
  b.split_size = 64;  // fixed splits need an upper bound of the lengths
  expect_invalid(flashkit::validate_decode_plan(b), "max_seqlen_k", "upper bound");
  b = p;
  b.seqlens_k = TensorRef::cuda(fake_ptr(5), DType::kInt32, {4});
  expect_invalid(flashkit::validate_decode_plan(b), "seqlens_k", "batch");
  b = p;
  b.workspace = TensorRef{};
  expect_invalid(flashkit::validate_decode_plan(b), "workspace", "missing");
  b = p;
  b.workspace.dtype = DType::kFloat32;
  expect_invalid(flashkit::validate_decode_plan(b), "workspace", "int32");
}

TEST(ValidateAppendKV, Arguments) {
  AppendKVArgs a;
  a.k_new = TensorRef::cuda(fake_ptr(1), DType::kBFloat16, {3, 2, 8, 128});
  a.v_new = TensorRef::cuda(fake_ptr(2), DType::kBFloat16, {3, 2, 8, 128});
  a.k_cache = TensorRef::cuda(fake_ptr(3), DType::kBFloat16, {40, 16, 8, 128});
  a.v_cache = TensorRef::cuda(fake_ptr(4), DType::kBFloat16, {40, 16, 8, 128});
  a.block_table = TensorRef::cuda(fake_ptr(5), DType::kInt32, {3, 8});
  a.seqlens_k = TensorRef::cuda(fake_ptr(6), DType::kInt32, {3});
  EXPECT_TRUE(flashkit::validate_append_kv(a).ok());
  AppendKVArgs b = a;
  b.k_new.shape[2] = 4;
  expect_invalid(flashkit::validate_append_kv(b), "k_new", "expected shape");
  b = a;
  b.v_new.dtype = DType::kFloat16;
  expect_invalid(flashkit::validate_append_kv(b), "v_new", "same as k_new");
  b = a;
  b.seqlens_k.shape[0] = 2;
  expect_invalid(flashkit::validate_append_kv(b), "seqlens_k", "B from k_new");
  b = a;
  b.k_cache.dtype = b.v_cache.dtype = DType::kInt8;  // quantized without scales
  expect_invalid(flashkit::validate_append_kv(b), "k_scale", "required");
}

}  // namespace
