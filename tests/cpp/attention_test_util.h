// Helpers shared by the C++ API tests: argument sets that pass validation, built on
// fake (never dereferenced) device pointers. Validation reads descriptors only.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "flashkit/attention.h"
#include "flashkit/tensor.h"

namespace flashkit_test {

using flashkit::AttentionFwdArgs;
using flashkit::DType;
using flashkit::Status;
using flashkit::TensorRef;

// Distinct, 256-byte aligned fake device addresses.
inline void* fake_ptr(int i) { return reinterpret_cast<void*>(uintptr_t{0x7f0000000000} + uintptr_t(i) * 0x10000000); }

// An InvalidArgument whose message starts with the argument's name (the API's convention) and
// mentions `what`.
inline void expect_invalid(const Status& st, const std::string& name, const std::string& what) {
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.message();
  EXPECT_EQ(st.message().rfind(name, 0), 0u) << "should start with '" << name << "': " << st.message();
  EXPECT_NE(st.message().find(what), std::string::npos) << "should mention '" << what << "': " << st.message();
}

// Dense: B=2, S_q=128, S_k=256, H_q=8, H_kv=2 (GQA 4), D=128, bf16, with lse.
inline AttentionFwdArgs dense_args(DType dt = DType::kBFloat16, int64_t d = 128) {
  AttentionFwdArgs a;
  a.q = TensorRef::cuda(fake_ptr(1), dt, {2, 128, 8, d});
  a.k = TensorRef::cuda(fake_ptr(2), dt, {2, 256, 2, d});
  a.v = TensorRef::cuda(fake_ptr(3), dt, {2, 256, 2, d});
  a.out = TensorRef::cuda(fake_ptr(4), dt, {2, 128, 8, d});
  a.lse = TensorRef::cuda(fake_ptr(5), DType::kFloat32, {2, 8, 128});
  return a;
}

// Varlen: B=2, total_q=300, total_k=500, H_q=8, H_kv=2, D=128, bf16, with lse [H_q, total_q].
inline AttentionFwdArgs varlen_args(DType dt = DType::kBFloat16, int64_t d = 128) {
  AttentionFwdArgs a;
  a.q = TensorRef::cuda(fake_ptr(1), dt, {300, 8, d});
  a.k = TensorRef::cuda(fake_ptr(2), dt, {500, 2, d});
  a.v = TensorRef::cuda(fake_ptr(3), dt, {500, 2, d});
  a.out = TensorRef::cuda(fake_ptr(4), dt, {300, 8, d});
  a.lse = TensorRef::cuda(fake_ptr(5), DType::kFloat32, {8, 300});
  a.cu_seqlens_q = TensorRef::cuda(fake_ptr(6), DType::kInt32, {3});
  a.cu_seqlens_k = TensorRef::cuda(fake_ptr(7), DType::kInt32, {3});
  a.max_seqlen_q = 200;
  a.max_seqlen_k = 300;
  return a;
}

inline int head_dim_of(const AttentionFwdArgs& a) {
  return static_cast<int>(a.q.shape[a.q.ndim - 1]);
}

// Arguments that pass every shape check give Ok when the variant is compiled in, else
// NotCompiled (never InvalidArgument).
inline void expect_valid(const AttentionFwdArgs& a) {
  const Status s = flashkit::validate_attention_fwd(a);
  if (flashkit::is_fwd_variant_compiled(a.q.dtype, head_dim_of(a))) {
    EXPECT_TRUE(s.ok()) << s.message();
  } else {
    EXPECT_EQ(s.code(), Status::Code::kNotCompiled) << s.message();
  }
}

}  // namespace flashkit_test
