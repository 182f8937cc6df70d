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

enum class DType : int32_t {
  kInvalid = 0,
  kFloat16 = 1,
  kBFloat16 = 2,
  kFloat32 = 3,
  kInt32 = 4,
};

// Where a tensor lives. C++ callers that pass raw cudaMalloc pointers use kCUDA.
enum class Device : int32_t {
  kCPU = 0,
  kCUDA = 1,
  kOther = 2,  // any other DLPack device (ROCm, Metal, CUDA host-pinned, ...)
};

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
