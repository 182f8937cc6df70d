// validate_attention_bwd: every rejected input names its argument at the start of the
// message ("dq: ...", "workspace: ..."); valid inputs pass (Ok, or NotCompiled when the
// variant is not in this build); attention_bwd reports the same errors without touching the
// GPU; attention_bwd_workspace_size. No GPU needed: only descriptors are read.
//
// The base arguments use a variant compiled into this build (the backward's validation
// reports NotCompiled before it looks at dout/dq/dk/dv/workspace), bf16/128 when there.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "attention_test_util.h"
#include "flashkit/attention.h"

namespace flashkit_test {
namespace {

using flashkit::AttentionBwdArgs;
using flashkit::Device;

// (dtype, head_dim) of a compiled variant, bf16/128 preferred; false when none is.
bool compiled_variant(DType* dt, int64_t* d) {
  if (flashkit::is_fwd_variant_compiled(DType::kBFloat16, 128)) {
    *dt = DType::kBFloat16, *d = 128;
    return true;
  }
  for (DType t : {DType::kBFloat16, DType::kFloat16}) {
    for (int hd : {64, 96, 128, 192, 256}) {
      if (flashkit::is_fwd_variant_compiled(t, hd)) {
        *dt = t, *d = hd;
        return true;
      }
    }
  }
  return false;
}

int64_t workspace_bytes(const AttentionBwdArgs& a) {
  const bool varlen = a.cu_seqlens_q.defined();
  const int64_t batch = varlen ? a.cu_seqlens_q.shape[0] - 1 : a.q.shape[0];
  const int64_t rows = varlen ? a.q.shape[0] : a.q.shape[0] * a.q.shape[1];
  const int64_t max_sq = varlen ? a.max_seqlen_q : a.q.shape[1];
  return flashkit::attention_bwd_workspace_size(batch, rows, max_sq, a.q.shape[a.q.ndim - 2],
                                                a.q.shape[a.q.ndim - 1], a.deterministic);
}

// The forward's arguments (attention_test_util.h) plus dout (like out), dq/dk/dv (like
// q/k/v) and a uint8 workspace of exactly the size asked for.
AttentionBwdArgs bwd_from(const AttentionFwdArgs& f, bool deterministic = false) {
  AttentionBwdArgs a;
  a.q = f.q, a.k = f.k, a.v = f.v, a.out = f.out, a.lse = f.lse;
  a.cu_seqlens_q = f.cu_seqlens_q, a.cu_seqlens_k = f.cu_seqlens_k;
  a.max_seqlen_q = f.max_seqlen_q, a.max_seqlen_k = f.max_seqlen_k;
  a.causal = f.causal;
  a.deterministic = deterministic;
  auto like = [](const TensorRef& t, int i) {
    TensorRef r = t;
    r.data = fake_ptr(i);
    return r;
  };
  a.dout = like(f.out, 11);
  a.dq = like(f.q, 12);
  a.dk = like(f.k, 13);
  a.dv = like(f.v, 14);
  a.workspace = TensorRef::cuda(fake_ptr(15), DType::kUInt8, {workspace_bytes(a)});
  return a;
}

AttentionBwdArgs dense_bwd(DType dt, int64_t d, bool deterministic = false) {
  return bwd_from(dense_args(dt, d), deterministic);
}

AttentionBwdArgs varlen_bwd(DType dt, int64_t d, bool deterministic = false) {
  return bwd_from(varlen_args(dt, d), deterministic);
}

void expect_valid(const AttentionBwdArgs& a) {
  const Status s = flashkit::validate_attention_bwd(a);
  if (flashkit::is_fwd_variant_compiled(a.q.dtype, static_cast<int>(a.q.shape[a.q.ndim - 1]))) {
    EXPECT_TRUE(s.ok()) << s.message();
  } else {
    EXPECT_EQ(s.code(), Status::Code::kNotCompiled) << s.message();
  }
}

void* offset_ptr(void* p, uintptr_t bytes) {
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) + bytes);
}

// ------------------------------------------------------------------------------------
// Rejected inputs.

using M = std::function<void(AttentionBwdArgs&)>;

struct InvalidCase {
  std::string name;
  bool varlen;
  M mutate;
  std::string prefix;                 // the message starts with this ("dq: ")
  std::vector<std::string> contains;  // ... and contains each of these
};

std::ostream& operator<<(std::ostream& os, const InvalidCase& c) { return os << c.name; }

std::vector<InvalidCase> invalid_cases() {
  const DType f16 = DType::kFloat16, f32 = DType::kFloat32, i32 = DType::kInt32,
              i64 = DType::kInt64, u8 = DType::kUInt8;
  std::vector<InvalidCase> c;
  auto add = [&](std::string name, bool varlen, M m, std::string prefix,
                 std::vector<std::string> contains = {}) {
    c.push_back({std::move(name), varlen, std::move(m), std::move(prefix), std::move(contains)});
  };
  // The element type of q in the base case ("the other" 16-bit type for mismatches).
  auto other = [=](const TensorRef& t) { return t.dtype == f16 ? DType::kBFloat16 : f16; };

  // --- missing tensors ---
  add("LseMissing", false, [](auto& a) { a.lse = TensorRef(); }, "lse: ", {"missing"});
  add("LseMissingVarlen", true, [](auto& a) { a.lse = TensorRef(); }, "lse: ", {"missing"});
  add("DoutMissing", false, [](auto& a) { a.dout = TensorRef(); }, "dout: ", {"missing"});
  add("DqMissing", false, [](auto& a) { a.dq = TensorRef(); }, "dq: ", {"missing"});
  add("DkMissing", false, [](auto& a) { a.dk = TensorRef(); }, "dk: ", {"missing"});
  add("DvMissing", false, [](auto& a) { a.dv = TensorRef(); }, "dv: ", {"missing"});
  add("WorkspaceMissing", false, [](auto& a) { a.workspace = TensorRef(); }, "workspace: ",
      {"missing"});
  add("OutMissing", false, [](auto& a) { a.out = TensorRef(); }, "out: ", {"missing"});

  // --- the forward's arguments keep the forward's rules ---
  add("QFloat32", false, [=](auto& a) { a.q.dtype = f32; }, "q: ", {"dtype", "float32"});
  add("KDtypeMismatch", false, [=](auto& a) { a.k.dtype = other(a.q); }, "k: ", {"dtype"});
  add("VDtypeMismatch", false, [=](auto& a) { a.v.dtype = other(a.q); }, "v: ", {"dtype"});
  add("OutDtypeMismatch", false, [=](auto& a) { a.out.dtype = other(a.q); }, "out: ", {"dtype"});
  add("OutShape", false, [](auto& a) { a.out.shape[1] -= 1; }, "out: ", {"shape"});
  add("LseShapeDense", false,
      [=](auto& a) {
        a.lse = TensorRef::cuda(fake_ptr(5), f32, {a.q.shape[0], a.q.shape[2], a.q.shape[1] - 1});
      },
      "lse: ", {"shape"});
  add("LseShapeVarlen", true,
      [=](auto& a) { a.lse = TensorRef::cuda(fake_ptr(5), f32, {a.q.shape[1], a.q.shape[0] + 1}); },
      "lse: ", {"shape"});
  add("LseNotFloat32", false, [=](auto& a) { a.lse.dtype = f16; }, "lse: ", {"float32"});
  add("LseNotContiguous", false, [](auto& a) { a.lse.stride[0] *= 2; }, "lse: ",
      {"contiguous"});
  add("LseWrongNdim", false,
      [=](auto& a) { a.lse = TensorRef::cuda(fake_ptr(5), f32, {a.q.shape[2], 256}); }, "lse: ",
      {"dims"});
  add("KOnCpu", false, [](auto& a) { a.k.device = Device::kCPU; }, "k: ", {"CUDA"});
  add("HqNotMultipleOfHkv", false,
      [](auto& a) {
        a.q.shape[2] = a.out.shape[2] = a.dout.shape[2] = a.dq.shape[2] = 6;
        a.k.shape[2] = a.v.shape[2] = a.dk.shape[2] = a.dv.shape[2] = 4;
      },
      "q, k: ", {"H_q = 6", "H_kv = 4"});
  add("HeadDimUnsupported", false,
      [](auto& a) {
        for (TensorRef* t : {&a.q, &a.k, &a.v, &a.out, &a.dout, &a.dq, &a.dk, &a.dv}) {
          t->shape[3] = 80;
          t->stride[0] = t->shape[1] * t->shape[2] * 80, t->stride[1] = t->shape[2] * 80;
          t->stride[2] = 80;
        }
      },
      "q: ", {"head_dim D = 80"});
  add("DvDiffersFromD", false,
      [](auto& a) {
        for (TensorRef* t : {&a.v, &a.out, &a.dout, &a.dv}) {
          t->shape[3] /= 2;
          t->stride[0] /= 2, t->stride[1] /= 2, t->stride[2] /= 2;
        }
      },
      "v: ", {"D_v"});
  add("CuSeqlensKMissing", true, [](auto& a) { a.cu_seqlens_k = TensorRef(); }, "cu_seqlens_k: ",
      {"missing"});
  add("CuSeqlensQMissing", true, [](auto& a) { a.cu_seqlens_q = TensorRef(); }, "cu_seqlens_q: ",
      {"missing"});
  add("CuSeqlensNotInt32", true, [=](auto& a) { a.cu_seqlens_q.dtype = i64; }, "cu_seqlens_q: ",
      {"int32"});
  add("CuSeqlensLengthMismatch", true, [](auto& a) { a.cu_seqlens_k.shape[0] += 1; },
      "cu_seqlens_k: ");
  add("MaxSeqlenQZeroWithTokens", true, [](auto& a) { a.max_seqlen_q = 0; }, "max_seqlen_q: ");
  add("SoftmaxScaleInf", false,
      [](auto& a) { a.softmax_scale = std::numeric_limits<float>::infinity(); }, "softmax_scale: ");

  // --- dout: like out ---
  add("DoutShapeRows", false, [](auto& a) { a.dout.shape[1] -= 1; }, "dout: ", {"shape"});
  add("DoutShapeHeads", false, [](auto& a) { a.dout.shape[2] /= 2; }, "dout: ", {"shape"});
  add("DoutWrongNdim", false, [](auto& a) { a.dout.ndim = 3; }, "dout: ", {"shape"});
  add("DoutShapeVarlen", true, [](auto& a) { a.dout.shape[0] -= 1; }, "dout: ", {"shape"});
  add("DoutDtypeMismatch", false, [=](auto& a) { a.dout.dtype = other(a.q); }, "dout: ",
      {"dtype"});
  add("DoutFloat32", false, [=](auto& a) { a.dout.dtype = f32; }, "dout: ", {"float32"});
  add("DoutOnCpu", false, [](auto& a) { a.dout.device = Device::kCPU; }, "dout: ", {"CUDA"});
  add("DoutOtherDevice", false, [](auto& a) { a.dout.device_id = 1; }, "dout: ", {"device 1"});
  add("DoutLastDimStrided", false, [](auto& a) { a.dout.stride[3] = 2; }, "dout: ",
      {"stride 1"});
  add("DoutRowStrideUnaligned", false, [](auto& a) { a.dout.stride[1] += 4; }, "dout: ",
      {"multiple of 8"});
  add("DoutMisaligned", false, [](auto& a) { a.dout.data = offset_ptr(a.dout.data, 2); },
      "dout: ", {"aligned"});
  add("DoutNullData", false, [](auto& a) { a.dout.data = nullptr; }, "dout: ", {"null"});
  add("DoutNegativeStride", false, [](auto& a) { a.dout.stride[1] = -a.dout.stride[1]; }, "dout: ",
      {"negative"});

  // --- dq, dk, dv: like q, k, v, and written (no overlapping rows) ---
  add("DqShape", false, [](auto& a) { a.dq.shape[1] -= 1; }, "dq: ", {"shape"});
  add("DqShapeVarlen", true, [](auto& a) { a.dq.shape[0] += 1; }, "dq: ", {"shape"});
  add("DqDtypeMismatch", false, [=](auto& a) { a.dq.dtype = other(a.q); }, "dq: ", {"dtype"});
  add("DqFloat32", false, [=](auto& a) { a.dq.dtype = f32; }, "dq: ", {"float32"});
  add("DqOnCpu", false, [](auto& a) { a.dq.device = Device::kCPU; }, "dq: ", {"CUDA"});
  add("DqLastDimStrided", false, [](auto& a) { a.dq.stride[3] = 4; }, "dq: ", {"stride 1"});
  add("DqRowsOverlap", false, [](auto& a) { a.dq.stride[1] = 0; }, "dq: ", {"overlap"});
  add("DqMisaligned", false, [](auto& a) { a.dq.data = offset_ptr(a.dq.data, 8); }, "dq: ",
      {"aligned"});
  add("DkShape", false, [](auto& a) { a.dk.shape[1] -= 1; }, "dk: ", {"shape"});
  add("DkHeads", false, [](auto& a) { a.dk.shape[2] += 1; }, "dk: ", {"shape"});
  add("DkShapeVarlen", true, [](auto& a) { a.dk.shape[0] -= 1; }, "dk: ", {"shape"});
  add("DkDtypeMismatch", false, [=](auto& a) { a.dk.dtype = other(a.q); }, "dk: ", {"dtype"});
  add("DkOtherDevice", false, [](auto& a) { a.dk.device_id = 2; }, "dk: ", {"device 2"});
  add("DkBatchStrideZero", false, [](auto& a) { a.dk.stride[0] = 0; }, "dk: ", {"overlap"});
  add("DkHeadStrideUnaligned", false, [](auto& a) { a.dk.stride[2] += 2; }, "dk: ",
      {"multiple of 8"});
  add("DvShape", false, [](auto& a) { a.dv.shape[3] /= 2; }, "dv: ", {"shape"});
  add("DvShapeVarlen", true, [](auto& a) { a.dv.shape[1] += 1; }, "dv: ", {"shape"});
  add("DvDtypeMismatch", false, [=](auto& a) { a.dv.dtype = other(a.q); }, "dv: ", {"dtype"});
  add("DvOnOther", false, [](auto& a) { a.dv.device = Device::kOther; }, "dv: ", {"CUDA"});
  add("DvNullData", false, [](auto& a) { a.dv.data = nullptr; }, "dv: ", {"null"});
  add("DvMisaligned", false, [](auto& a) { a.dv.data = offset_ptr(a.dv.data, 4); }, "dv: ",
      {"aligned"});

  // --- workspace ---
  add("WorkspaceTooSmall", false, [](auto& a) { a.workspace.shape[0] -= 1; }, "workspace: ",
      {"bytes", "attention_bwd_workspace_size"});
  add("WorkspaceTooSmallVarlen", true, [](auto& a) { a.workspace.shape[0] /= 2; },
      "workspace: ", {"bytes"});
  add("WorkspaceTooSmallForDeterministic", false,
      [](auto& a) { a.deterministic = true; }, "workspace: ", {"bytes"});
  add("WorkspaceEmpty", false,
      [=](auto& a) { a.workspace = TensorRef::cuda(nullptr, u8, {0}); }, "workspace: ");
  add("WorkspaceFloat32", false, [=](auto& a) { a.workspace.dtype = f32; }, "workspace: ",
      {"dtype", "float32"});
  add("WorkspaceFloat16", false, [=](auto& a) { a.workspace.dtype = f16; }, "workspace: ",
      {"dtype"});
  add("WorkspaceInt64", false, [=](auto& a) { a.workspace.dtype = i64; }, "workspace: ",
      {"dtype", "int64"});
  add("Workspace2d", false,
      [=](auto& a) {
        a.workspace = TensorRef::cuda(fake_ptr(15), u8, {2, a.workspace.shape[0]});
      },
      "workspace: ");
  add("WorkspaceNotContiguous", false,
      [=](auto& a) {
        a.workspace = TensorRef::cuda_strided(fake_ptr(15), u8, {a.workspace.shape[0]}, {2});
      },
      "workspace: ", {"contiguous"});
  add("WorkspaceOnCpu", false, [](auto& a) { a.workspace.device = Device::kCPU; },
      "workspace: ", {"CUDA"});
  add("WorkspaceOtherDevice", false, [](auto& a) { a.workspace.device_id = 1; }, "workspace: ",
      {"device 1"});
  add("WorkspaceMisaligned", false,
      [](auto& a) { a.workspace.data = offset_ptr(a.workspace.data, 4); }, "workspace: ",
      {"aligned"});
  add("WorkspaceNullData", false, [](auto& a) { a.workspace.data = nullptr; }, "workspace: ",
      {"null"});
  add("WorkspaceInt32TooSmall", false,
      [=](auto& a) {  // int32 elements count 4 bytes each: one element short
        a.workspace = TensorRef::cuda(fake_ptr(15), i32, {a.workspace.shape[0] / 4 - 1});
      },
      "workspace: ", {"bytes"});
  return c;
}

class InvalidBwdArgs : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidBwdArgs, RejectedWithNamedArgument) {
  DType dt;
  int64_t d;
  if (!compiled_variant(&dt, &d)) GTEST_SKIP() << "no variant is compiled into this build";
  const InvalidCase& c = GetParam();
  AttentionBwdArgs a = c.varlen ? varlen_bwd(dt, d) : dense_bwd(dt, d);
  ASSERT_TRUE(flashkit::validate_attention_bwd(a).ok())
      << "the base case must be valid: " << flashkit::validate_attention_bwd(a).message();
  c.mutate(a);
  const Status s = flashkit::validate_attention_bwd(a);
  ASSERT_EQ(s.code(), Status::Code::kInvalidArgument) << s.message();
  EXPECT_EQ(s.message().rfind(c.prefix, 0), 0u)
      << "message should start with '" << c.prefix << "': " << s.message();
  for (const std::string& sub : c.contains) {
    EXPECT_NE(s.message().find(sub), std::string::npos)
        << "message lacks '" << sub << "': " << s.message();
  }
  // attention_bwd reports the same error without touching the GPU.
  const Status launched = flashkit::attention_bwd(a, nullptr);
  EXPECT_EQ(launched.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(launched.message(), s.message());
}

INSTANTIATE_TEST_SUITE_P(ValidateBwd, InvalidBwdArgs, ::testing::ValuesIn(invalid_cases()),
                         [](const ::testing::TestParamInfo<InvalidCase>& p) {
                           return p.param.name;
                         });

// Every tensor argument that has a fixed dtype names the dtype actually given.
TEST(ValidateBwdDtypeNames, GradientsAndDoutNameTheGivenDtype) {
  DType dt;
  int64_t d;
  if (!compiled_variant(&dt, &d)) GTEST_SKIP() << "no variant is compiled into this build";
  struct Arg {
    const char* name;
    TensorRef AttentionBwdArgs::*member;
    const char* like;
  };
  const Arg args[] = {{"dout", &AttentionBwdArgs::dout, "out"},
                      {"dq", &AttentionBwdArgs::dq, "q"},
                      {"dk", &AttentionBwdArgs::dk, "k"},
                      {"dv", &AttentionBwdArgs::dv, "v"}};
  for (const Arg& arg : args) {
    for (DType given : {DType::kFloat32, DType::kInt8, DType::kFloat64, DType::kUInt16}) {
      AttentionBwdArgs a = varlen_bwd(dt, d);
      (a.*(arg.member)).dtype = given;
      const Status s = flashkit::validate_attention_bwd(a);
      SCOPED_TRACE(std::string(arg.name) + " " + flashkit::dtype_name(given));
      ASSERT_EQ(s.code(), Status::Code::kInvalidArgument) << s.message();
      EXPECT_EQ(s.message().rfind(std::string(arg.name) + ": ", 0), 0u) << s.message();
      EXPECT_NE(s.message().find(std::string("got ") + flashkit::dtype_name(given)),
                std::string::npos)
          << s.message();
      EXPECT_NE(s.message().find(std::string("same as ") + arg.like), std::string::npos)
          << s.message();
    }
  }
}

// ------------------------------------------------------------------------------------
// Valid inputs.

TEST(ValidateBwdValid, DenseAndVarlenEveryDtypeAndHeadDim) {
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    for (int d : {64, 96, 128, 192, 256}) {
      SCOPED_TRACE(std::string(flashkit::dtype_name(dt)) + "/" + std::to_string(d));
      expect_valid(dense_bwd(dt, d));
      expect_valid(varlen_bwd(dt, d));
      expect_valid(dense_bwd(dt, d, /*deterministic=*/true));
      expect_valid(varlen_bwd(dt, d, /*deterministic=*/true));
    }
  }
}

class ValidateBwdCompiled : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!compiled_variant(&dt_, &d_)) GTEST_SKIP() << "no variant is compiled into this build";
  }
  DType dt_ = DType::kInvalid;
  int64_t d_ = 0;
};

TEST_F(ValidateBwdCompiled, CausalScaleAndMqa) {
  AttentionBwdArgs a = dense_bwd(dt_, d_);
  a.causal = true;
  a.softmax_scale = 0.3f;
  EXPECT_TRUE(flashkit::validate_attention_bwd(a).ok());
  AttentionFwdArgs f = dense_args(dt_, d_);
  f.k.shape[2] = f.v.shape[2] = 1;  // MQA: strides of a contiguous [2, 256, 1, d]
  f.k.stride[0] = f.v.stride[0] = 256 * d_;
  f.k.stride[1] = f.v.stride[1] = d_;
  AttentionBwdArgs mqa = bwd_from(f);
  EXPECT_TRUE(flashkit::validate_attention_bwd(mqa).ok())
      << flashkit::validate_attention_bwd(mqa).message();
}

TEST_F(ValidateBwdCompiled, StridedDoutAndGradients) {
  AttentionBwdArgs a = dense_bwd(dt_, d_);
  const int64_t B = a.q.shape[0], S = a.q.shape[1], H = a.q.shape[2];
  // dout: a BHSD tensor viewed as BSHD; dq: head dim padded by 8; dk: every other head of
  // a tensor with twice the heads; dout broadcast over the batch (stride 0, read only).
  a.dout = TensorRef::cuda_strided(fake_ptr(11), dt_, {B, S, H, d_}, {H * S * d_, d_, S * d_, 1});
  a.dq = TensorRef::cuda_strided(fake_ptr(12), dt_, {B, S, H, d_},
                                 {S * H * (d_ + 8), H * (d_ + 8), d_ + 8, 1});
  const int64_t S_k = a.k.shape[1], H_kv = a.k.shape[2];
  a.dk = TensorRef::cuda_strided(fake_ptr(13), dt_, {B, S_k, H_kv, d_},
                                 {S_k * 2 * H_kv * d_, 2 * H_kv * d_, 2 * d_, 1});
  EXPECT_TRUE(flashkit::validate_attention_bwd(a).ok())
      << flashkit::validate_attention_bwd(a).message();
  a.dout.stride[0] = 0;
  EXPECT_TRUE(flashkit::validate_attention_bwd(a).ok())
      << flashkit::validate_attention_bwd(a).message();
}

TEST_F(ValidateBwdCompiled, WorkspaceInt32AndLarger) {
  AttentionBwdArgs a = dense_bwd(dt_, d_);
  const int64_t bytes = a.workspace.shape[0];
  a.workspace = TensorRef::cuda(fake_ptr(15), DType::kInt32, {(bytes + 3) / 4});
  EXPECT_TRUE(flashkit::validate_attention_bwd(a).ok())
      << flashkit::validate_attention_bwd(a).message();
  a.workspace = TensorRef::cuda(fake_ptr(15), DType::kUInt8, {bytes + 12345});
  EXPECT_TRUE(flashkit::validate_attention_bwd(a).ok());
  // The deterministic mode's size serves the fast mode too.
  AttentionBwdArgs det = varlen_bwd(dt_, d_, /*deterministic=*/true);
  det.deterministic = false;
  EXPECT_TRUE(flashkit::validate_attention_bwd(det).ok());
}

TEST_F(ValidateBwdCompiled, VarlenLooseMaxSeqlen) {
  // max_seqlen_q is an upper bound; a workspace sized with it is enough.
  AttentionBwdArgs a = varlen_bwd(dt_, d_, /*deterministic=*/true);
  a.max_seqlen_q = 250;
  a.workspace.shape[0] = workspace_bytes(a);
  EXPECT_TRUE(flashkit::validate_attention_bwd(a).ok())
      << flashkit::validate_attention_bwd(a).message();
}

TEST_F(ValidateBwdCompiled, EmptyProblems) {
  // S_k = 0: every row sees no key (zero gradients); S_q = 0: nothing flows back.
  AttentionBwdArgs a = dense_bwd(dt_, d_);
  a.k.shape[1] = a.v.shape[1] = a.dk.shape[1] = a.dv.shape[1] = 0;
  a.k.data = a.v.data = a.dk.data = a.dv.data = nullptr;
  EXPECT_TRUE(flashkit::validate_attention_bwd(a).ok())
      << flashkit::validate_attention_bwd(a).message();

  AttentionBwdArgs z = bwd_from(dense_args(dt_, d_));
  for (TensorRef* t : {&z.q, &z.k, &z.v, &z.out, &z.dout, &z.dq, &z.dk, &z.dv}) {
    t->shape[0] = 0;
    t->data = nullptr;
  }
  z.lse = TensorRef::cuda(nullptr, DType::kFloat32, {0, z.q.shape[2], z.q.shape[1]});
  z.workspace = TensorRef::cuda(nullptr, DType::kUInt8, {0});
  EXPECT_EQ(workspace_bytes(z), 0);
  EXPECT_TRUE(flashkit::validate_attention_bwd(z).ok())
      << flashkit::validate_attention_bwd(z).message();
  // B == 0: nothing to do, so attention_bwd returns without touching the GPU.
  EXPECT_TRUE(flashkit::attention_bwd(z, nullptr).ok());
}

TEST_F(ValidateBwdCompiled, DeviceIdOtherThanZero) {
  AttentionBwdArgs a = varlen_bwd(dt_, d_);
  for (TensorRef* t : {&a.q, &a.k, &a.v, &a.out, &a.lse, &a.dout, &a.dq, &a.dk, &a.dv,
                       &a.workspace, &a.cu_seqlens_q, &a.cu_seqlens_k}) {
    t->device_id = 3;
  }
  EXPECT_TRUE(flashkit::validate_attention_bwd(a).ok())
      << flashkit::validate_attention_bwd(a).message();
}

TEST_F(ValidateBwdCompiled, NothingIsWrittenOnInvalidInput) {
  // A host buffer marked as CUDA would crash if anything wrote to it through the GPU; here
  // it is poisoned and must stay untouched after a rejected call.
  AttentionBwdArgs a = dense_bwd(dt_, d_);
  static std::vector<uint16_t> dq_host;
  dq_host.assign(static_cast<size_t>(a.dq.numel() + 8), 0xFFFF);
  a.dq.data = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(dq_host.data()) + 15) &
                                      ~uintptr_t{15});
  a.dv.shape[3] = d_ / 2;  // bad: not v's shape
  const Status s = flashkit::attention_bwd(a, nullptr);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("dv: ", 0), 0u) << s.message();
  for (uint16_t x : dq_host) ASSERT_EQ(x, 0xFFFF);
}

// ------------------------------------------------------------------------------------
// attention_bwd_workspace_size.

TEST(BwdWorkspaceSize, CoversTheFp32AccumulatorAndRowSums) {
  for (bool det : {false, true}) {
    const int64_t rows = 300, h = 8, d = 128;
    const int64_t bytes = flashkit::attention_bwd_workspace_size(2, rows, 200, h, d, det);
    EXPECT_GE(bytes, rows * h * d * 4 + rows * h * 4) << "deterministic=" << det;
  }
}

TEST(BwdWorkspaceSize, DeterministicNeedsAtLeastAsMuch) {
  for (int64_t b : {1, 2, 16}) {
    for (int64_t s : {1, 64, 1000}) {
      const int64_t fast = flashkit::attention_bwd_workspace_size(b, b * s, s, 8, 64, false);
      const int64_t det = flashkit::attention_bwd_workspace_size(b, b * s, s, 8, 64, true);
      EXPECT_GE(det, fast) << b << " x " << s;
      EXPECT_GT(fast, 0);
    }
  }
}

// Deterministic mode also holds the fixed-point dQ's row exponents (int32 per row and head, like the
// row sums) and two floats of bounds per head (bwd_params.h: dq_exp, dq_kvbound).
TEST(BwdWorkspaceSize, DeterministicHoldsTheRowExponentsAndBounds) {
  for (int64_t b : {1, 3}) {
    for (int64_t s : {1, 100, 4096}) {
      const int64_t h = 8, rows = b * s;
      const int64_t fast = flashkit::attention_bwd_workspace_size(b, rows, s, h, 128, false);
      const int64_t det = flashkit::attention_bwd_workspace_size(b, rows, s, h, 128, true);
      EXPECT_GE(det, fast + rows * h * 4 + h * 2 * 4) << b << " x " << s;
    }
  }
}

TEST(BwdWorkspaceSize, GrowsWithTheProblem) {
  const int64_t base = flashkit::attention_bwd_workspace_size(2, 256, 128, 8, 64, true);
  EXPECT_GT(flashkit::attention_bwd_workspace_size(2, 512, 256, 8, 64, true), base);
  EXPECT_GT(flashkit::attention_bwd_workspace_size(2, 256, 128, 16, 64, true), base);
  EXPECT_GT(flashkit::attention_bwd_workspace_size(2, 256, 128, 8, 128, true), base);
}

TEST(BwdWorkspaceSize, NothingForNoRowsAndNoNegativeSizes) {
  EXPECT_EQ(flashkit::attention_bwd_workspace_size(0, 0, 0, 8, 128, false), 0);
  EXPECT_EQ(flashkit::attention_bwd_workspace_size(0, 0, 0, 8, 128, true), 0);
  EXPECT_GE(flashkit::attention_bwd_workspace_size(-1, 10, 10, 8, 128, true), 0);
  EXPECT_GE(flashkit::attention_bwd_workspace_size(1, -10, 10, 8, 128, false), 0);
}

// ------------------------------------------------------------------------------------
// Variants not in the build (run in the minimal build of not_compiled_build.cmake).

TEST(ValidateNotCompiled, BackwardReportsDtypeAndHeadDim) {
  DType dt = DType::kInvalid;
  int d = 0;
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    for (int hd : {64, 96, 128, 192, 256}) {
      if (dt == DType::kInvalid && !flashkit::is_fwd_variant_compiled(t, hd)) dt = t, d = hd;
    }
  }
  if (dt == DType::kInvalid) GTEST_SKIP() << "every variant is compiled in";
  for (const AttentionBwdArgs& a : {dense_bwd(dt, d), varlen_bwd(dt, d, true)}) {
    const Status s = flashkit::validate_attention_bwd(a);
    ASSERT_EQ(s.code(), Status::Code::kNotCompiled) << s.message();
    EXPECT_NE(s.message().find("backward"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(flashkit::dtype_name(dt)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("head_dim " + std::to_string(d)), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("not compiled"), std::string::npos) << s.message();
    EXPECT_EQ(flashkit::attention_bwd(a, nullptr).code(), Status::Code::kNotCompiled);
    EXPECT_EQ(flashkit::bwd_kernel_family(dt, d), "");
  }
  // The forward's shape errors still come first.
  AttentionBwdArgs a = dense_bwd(dt, d);
  a.out.shape[1] = 7;
  EXPECT_EQ(flashkit::validate_attention_bwd(a).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace flashkit_test
