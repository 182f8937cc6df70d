// FlashKit public API: tensor descriptors, dtypes and the Status type.
//
// A TensorRef is a plain, non-owning view of device memory: a data pointer, a
// dtype, a shape and strides counted in elements (not bytes). It is what every
// FlashKit op takes, from C++ directly or from Python through DLPack, so a single
// validation function per op can check shapes, dtypes, strides and devices for
// every caller.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

namespace flashkit {

// Element types. Ops accept only some of them (attention: float16/bfloat16 inputs, float32
// LSE, int32 index arrays); the others exist so that a rejected tensor's message names
// the dtype actually given ("expected dtype int32, got int64"), and for the ops to come
// (fp8 KV caches). kInvalid: a type FlashKit has no name for (complex, fp4, vector lanes,
// ...): bindings reject those themselves with "unsupported dtype <what they can tell>".
// The values are stable (part of the ABI): new codes are only ever appended.
enum class DType : int32_t {
  kInvalid = 0,
  kFloat16 = 1,
  kBFloat16 = 2,
  kFloat32 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kUInt8 = 7,
  kInt8 = 8,
  kInt16 = 9,
  kBool = 10,
  kFloat8E4M3FN = 11,  // float8_e4m3fn (OCP FP8 E4M3: no inf, one NaN pattern)
  kFloat8E5M2 = 12,    // float8_e5m2
  kUInt16 = 13,
  kUInt32 = 14,
  kUInt64 = 15,
};

// Where a tensor lives. C++ callers that pass raw cudaMalloc pointers use kCUDA.
enum class Device : int32_t {
  kCPU = 0,
  kCUDA = 1,
  kOther = 2,  // any other DLPack device (ROCm, Metal, CUDA host-pinned, ...)
};

// "float16", "int64", "bool", "float8_e4m3fn", ... (PyTorch's spelling); "invalid" for
// kInvalid and for values outside the enum.
const char* dtype_name(DType t);
int dtype_size(DType t);  // bytes per element, 0 for kInvalid
const char* device_name(Device d);

inline constexpr int kMaxDims = 4;

struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::kInvalid;
  Device device = Device::kCUDA;
  int32_t device_id = 0;
  int32_t ndim = 0;                    // 0 means "absent" (optional tensors)
  int64_t shape[kMaxDims] = {0, 0, 0, 0};
  int64_t stride[kMaxDims] = {0, 0, 0, 0};  // in elements

  bool defined() const { return ndim > 0; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  bool is_contiguous() const;
  std::string shape_str() const;  // "[2, 128, 8, 64]"

  // Builds a view with row-major (contiguous) strides.
  static TensorRef cuda(void* data, DType dtype, std::initializer_list<int64_t> shape,
                        int device_id = 0);
  // Builds a view with explicit strides (elements).
  static TensorRef cuda_strided(void* data, DType dtype, std::initializer_list<int64_t> shape,
                                std::initializer_list<int64_t> stride, int device_id = 0);
};

// Result of validation and launch. `ok()` or a message that names the argument and
// what was expected, e.g. "q: expected dtype float16 or bfloat16, got float32".
class Status {
 public:
  enum class Code : int32_t {
    kOk = 0,
    kInvalidArgument = 1,  // bad shape/dtype/stride/device/alignment: nothing was written
    kNotCompiled = 2,      // the requested variant is not part of this build
    kUnsupportedDevice = 3,
    kCudaError = 4,
    kResourceExhausted = 5,  // a capacity ran out (e.g. KV-cache blocks): retry after freeing
  };
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Invalid(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status NotCompiled(std::string msg) { return Status(Code::kNotCompiled, std::move(msg)); }
  static Status Unsupported(std::string msg) { return Status(Code::kUnsupportedDevice, std::move(msg)); }
  static Status Cuda(std::string msg) { return Status(Code::kCudaError, std::move(msg)); }
  static Status Exhausted(std::string msg) {
    return Status(Code::kResourceExhausted, std::move(msg));
  }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Status(Code c, std::string m) : code_(c), message_(std::move(m)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

}  // namespace flashkit
