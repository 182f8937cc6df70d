// TensorRef helpers, dtype/device names and the library version.
#include "flashkit/tensor.h"

#include <string>

#include "api/attention_internal.h"  // FLASHKIT_EXPORT
#include "flashkit/attention.h"

#ifndef FLASHKIT_VERSION_STRING
#define FLASHKIT_VERSION_STRING "0.1.0"  // keep in sync with project(VERSION) in CMakeLists.txt
#endif

namespace flashkit {

FLASHKIT_EXPORT const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat64: return "float64";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kBool: return "bool";
    case DType::kFloat8E4M3FN: return "float8_e4m3fn";
    case DType::kFloat8E5M2: return "float8_e5m2";
    case DType::kUInt16: return "uint16";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kInvalid: break;
  }
  return "invalid";
}

FLASHKIT_EXPORT int dtype_size(DType t) {
  switch (t) {
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kBool:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2: return 1;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16:
    case DType::kUInt16: return 2;
    case DType::kFloat32:
    case DType::kInt32:
    case DType::kUInt32: return 4;
    case DType::kInt64:
    case DType::kFloat64:
    case DType::kUInt64: return 8;
    case DType::kInvalid: break;
  }
  return 0;
}

FLASHKIT_EXPORT const char* device_name(Device d) {
  switch (d) {
    case Device::kCPU: return "cpu";
    case Device::kCUDA: return "cuda";
    case Device::kOther: break;
  }
  return "other";
}

// PyTorch's rule: dims of size 1 place no constraint on their stride, and a tensor with
// no elements is contiguous.
FLASHKIT_EXPORT bool TensorRef::is_contiguous() const {
  if (ndim < 0 || ndim > kMaxDims) return false;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] == 0) return true;
  }
  int64_t expected = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    if (shape[i] == 1) continue;
    if (stride[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

FLASHKIT_EXPORT std::string TensorRef::shape_str() const {
  std::string s = "[";
  const int n = ndim < 0 ? 0 : (ndim > kMaxDims ? kMaxDims : ndim);
  for (int i = 0; i < n; ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (ndim > kMaxDims) s += ", ...";
  s += "]";
  return s;
}

// More than kMaxDims dims (or a stride list whose length differs from the shape's) cannot
// be represented: the view keeps the first kMaxDims dims and gets dtype kInvalid, so
// validation rejects it rather than reading a wrong layout.
FLASHKIT_EXPORT TensorRef TensorRef::cuda(void* data, DType dtype,
                                          std::initializer_list<int64_t> shape, int device_id) {
  TensorRef t;
  t.data = data;
  t.dtype = dtype;
  t.device = Device::kCUDA;
  t.device_id = device_id;
  if (shape.size() > static_cast<size_t>(kMaxDims)) t.dtype = DType::kInvalid;
  int n = 0;
  for (int64_t s : shape) {
    if (n == kMaxDims) break;
    t.shape[n++] = s;
  }
  t.ndim = n;
  int64_t st = 1;
  for (int i = n - 1; i >= 0; --i) {
    t.stride[i] = st;
    st *= (t.shape[i] > 1 ? t.shape[i] : 1);
  }
  return t;
}

FLASHKIT_EXPORT TensorRef TensorRef::cuda_strided(void* data, DType dtype,
                                                  std::initializer_list<int64_t> shape,
                                                  std::initializer_list<int64_t> stride,
                                                  int device_id) {
  TensorRef t = cuda(data, dtype, shape, device_id);
  if (stride.size() != shape.size()) t.dtype = DType::kInvalid;
  int i = 0;
  for (int64_t s : stride) {
    if (i == t.ndim) break;
    t.stride[i++] = s;
  }
  return t;
}

FLASHKIT_EXPORT const char* version() { return FLASHKIT_VERSION_STRING; }

}  // namespace flashkit
