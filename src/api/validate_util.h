// Argument checks shared by the validation functions of every op (validate_attention.cpp,
// validate_decode.cpp, ...). Host-only; messages name the argument.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "flashkit/tensor.h"

namespace flashkit {
namespace vutil {

constexpr int64_t kMaxSize = (int64_t{1} << 31) - 1;  // every size must be < 2^31
constexpr int64_t kStrideAlignElems = 8;               // 8 x 2 bytes = one 128-bit load
constexpr uintptr_t kDataAlignBytes = 16;

std::string str(int64_t v);

std::string strides_str(const TensorRef& t);

std::string shape_of(std::initializer_list<int64_t> dims);

Status invalid(const char* name, const std::string& what);

bool has_zero_size(const TensorRef& t);

Status check_device(const char* name, const TensorRef& t, int32_t device_id);

// An op's tensor arguments, in the order their errors are reported.
struct NamedTensor {
  const char* name;
  const TensorRef& t;
  bool required = true;
};
// Every descriptor representable (0..kMaxDims dims) and every required one present, then
// the first one (the anchor, e.g. q) on a valid device and every present one, except those
// named in `skip_device` (nullptr: none), on the anchor's device.
Status check_present_on_device(const NamedTensor* all, int count, const char* skip_device = nullptr);
template <int N>
Status check_present_on_device(const NamedTensor (&all)[N], const char* skip_device = nullptr) {
  return check_present_on_device(all, N, skip_device);
}

Status check_dtype(const char* name, const TensorRef& t, DType expected, const char* why);

Status check_ndim(const char* name, const TensorRef& t, int ndim, const char* layout);

Status check_sizes(const char* name, const TensorRef& t);

// Largest byte offset the view can reach must fit in int64 (strides are validated >= 0).
Status check_span(const char* name, const TensorRef& t);

Status check_data_ptr(const char* name, const TensorRef& t, uintptr_t align);

// q/k/v/out: last dim contiguous, other strides (of dims with size > 1; a size-1 dim's
// stride is never used) non-negative multiples of 8 elements, 16-byte aligned pointer.
Status check_qkvo_layout(const char* name, const TensorRef& t, bool is_output);

Status check_contiguous(const char* name, const TensorRef& t);

// block_table [B, max_pages] int32 (paged decode, MLA): last dim contiguous, non-negative
// row stride, span within int64, 4-byte aligned pointer. Messages name "block_table".
Status check_block_table_layout(const TensorRef& t);

// Strides of `t` with every size-<=1 dim given the stride a contiguous tensor would have
// there (DLPack exporters may put anything in those), into out[0..ndim).
void effective_strides(const TensorRef& t, int64_t* out);

#define FK_RETURN_IF_ERROR(expr)     \
  do {                               \
    ::flashkit::Status _fk_s = (expr); \
    if (!_fk_s.ok()) return _fk_s;   \
  } while (0)

}  // namespace vutil
}  // namespace flashkit
