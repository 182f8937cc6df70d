// Argument checks shared by the validation functions of every op (host-only: they read
// TensorRef descriptors, never device memory). Each returns Status::Invalid with a
// message that names the argument, or Ok.
#include "api/validate_util.h"

#include <cstdio>
#include <string>

namespace flashkit {
namespace vutil {

std::string str(int64_t v) { return std::to_string(v); }

std::string strides_str(const TensorRef& t) {
  std::string s = "[";
  for (int i = 0; i < t.ndim; ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(t.stride[i]);
  }
  return s + "]";
}

std::string shape_of(std::initializer_list<int64_t> dims) {
  std::string s = "[";
  bool first = true;
  for (int64_t d : dims) {
    if (!first) s += ", ";
    s += std::to_string(d);
    first = false;
  }
  return s + "]";
}

Status invalid(const char* name, const std::string& what) {
  return Status::Invalid(std::string(name) + ": " + what);
}

bool has_zero_size(const TensorRef& t) {
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] == 0) return true;
  }
  return false;
}

Status check_device(const char* name, const TensorRef& t, int32_t device_id) {
  if (t.device != Device::kCUDA) {
    return invalid(name, std::string("expected a CUDA tensor (device cuda:") + str(device_id) +
                             "), got a " + device_name(t.device) + " tensor");
  }
  if (t.device_id != device_id) {
    return invalid(name, "expected CUDA device " + str(device_id) +
                             " (the device of q; all tensors must be on one device), got device " +
                             str(t.device_id));
  }
  return Status::Ok();
}

Status check_present_on_device(const NamedTensor* all, int count, const char* skip_device) {
  for (int i = 0; i < count; ++i) {
    const NamedTensor& n = all[i];
    if (n.t.ndim < 0 || n.t.ndim > kMaxDims) {
      return invalid(n.name, "expected 0.." + str(kMaxDims) + " dims, got ndim = " + str(n.t.ndim));
    }
    if (n.required && !n.t.defined()) return invalid(n.name, "required tensor is missing (ndim == 0)");
  }
  const NamedTensor& anchor = all[0];
  if (anchor.t.device == Device::kCUDA && anchor.t.device_id < 0) {
    return invalid(anchor.name, "expected a CUDA device id >= 0, got " + str(anchor.t.device_id));
  }
  for (int i = 0; i < count; ++i) {
    const NamedTensor& n = all[i];
    if (!n.t.defined() || (skip_device != nullptr && std::string(n.name) == skip_device)) continue;
    FK_RETURN_IF_ERROR(check_device(n.name, n.t, anchor.t.device_id));
  }
  return Status::Ok();
}

Status check_dtype(const char* name, const TensorRef& t, DType expected, const char* why) {
  if (t.dtype != expected) {
    return invalid(name, std::string("expected dtype ") + dtype_name(expected) + why + ", got " +
                             dtype_name(t.dtype));
  }
  return Status::Ok();
}

Status check_ndim(const char* name, const TensorRef& t, int ndim, const char* layout) {
  if (t.ndim != ndim) {
    return invalid(name, "expected " + str(ndim) + (ndim == 1 ? " dim " : " dims ") + layout +
                             ", got " + t.shape_str());
  }
  return Status::Ok();
}

Status check_sizes(const char* name, const TensorRef& t) {
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0) {
      return invalid(name, "expected non-negative sizes, got " + t.shape_str());
    }
    if (t.shape[i] > kMaxSize) {
      return invalid(name, "size of dim " + str(i) + " is " + str(t.shape[i]) +
                               ", expected < 2^31 (32-bit indexing), shape " + t.shape_str());
    }
  }
  return Status::Ok();
}

// Largest byte offset the view can reach must fit in int64 (strides are validated >= 0).
Status check_span(const char* name, const TensorRef& t) {
  if (has_zero_size(t)) return Status::Ok();
  int64_t span = 0;
  for (int i = 0; i < t.ndim; ++i) {
    int64_t term = 0;
    if (__builtin_mul_overflow(t.shape[i] - 1, t.stride[i], &term) ||
        __builtin_add_overflow(span, term, &span)) {
      return invalid(name, "strides " + strides_str(t) + " with shape " + t.shape_str() +
                               " address more than 2^63 elements");
    }
  }
  int64_t bytes = 0;
  if (__builtin_add_overflow(span, int64_t{1}, &span) ||
      __builtin_mul_overflow(span, int64_t{dtype_size(t.dtype)}, &bytes)) {
    return invalid(name, "strides " + strides_str(t) + " with shape " + t.shape_str() +
                             " address more than 2^63 bytes");
  }
  return Status::Ok();
}

Status check_data_ptr(const char* name, const TensorRef& t, uintptr_t align) {
  if (t.numel() == 0) return Status::Ok();  // nothing is read or written: data may be null
  if (t.data == nullptr) {
    return invalid(name, "data pointer is null but the tensor has " + str(t.numel()) +
                             " elements, shape " + t.shape_str());
  }
  const uintptr_t p = reinterpret_cast<uintptr_t>(t.data);
  if (p % align != 0) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(p));
    return invalid(name, std::string("data pointer ") + buf + " is not " + str(int64_t(align)) +
                             "-byte aligned");
  }
  return Status::Ok();
}

// q/k/v/out: last dim contiguous, other strides (of dims with size > 1; a size-1 dim's
// stride is never used) non-negative multiples of 8 elements, 16-byte aligned pointer.
Status check_qkvo_layout(const char* name, const TensorRef& t, bool is_output) {
  const int last = t.ndim - 1;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] <= 1) continue;
    if (t.stride[i] < 0) {
      return invalid(name, "expected non-negative strides, got " + strides_str(t));
    }
    if (i == last) {
      if (t.stride[i] != 1) {
        return invalid(name, "expected the last dimension to be contiguous (stride 1), got stride " +
                                 str(t.stride[i]) + " (strides " + strides_str(t) + ")");
      }
      continue;
    }
    if (t.stride[i] % kStrideAlignElems != 0) {
      return invalid(name, "stride of dim " + str(i) + " is " + str(t.stride[i]) +
                               " elements, expected a multiple of " + str(kStrideAlignElems) +
                               " (16-byte alignment for 128-bit loads); strides " + strides_str(t));
    }
    if (is_output && t.stride[i] == 0) {
      return invalid(name, "stride of dim " + str(i) +
                               " is 0 with size " + str(t.shape[i]) +
                               ", expected a non-zero stride (output elements must not overlap)");
    }
  }
  if (Status s = check_span(name, t); !s.ok()) return s;
  return check_data_ptr(name, t, kDataAlignBytes);
}

Status check_contiguous(const char* name, const TensorRef& t) {
  if (!t.is_contiguous()) {
    return invalid(name, "expected a contiguous tensor, got strides " + strides_str(t) +
                             " for shape " + t.shape_str());
  }
  return check_data_ptr(name, t, static_cast<uintptr_t>(dtype_size(t.dtype)));
}

void effective_strides(const TensorRef& t, int64_t* out) {
  int64_t contiguous = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    out[i] = t.shape[i] > 1 ? t.stride[i] : contiguous;
    contiguous = (t.shape[i] > 1 ? t.shape[i] : 1) * out[i];
  }
}

Status check_block_table_layout(const TensorRef& t) {
  if (t.shape[1] > 1 && t.stride[1] != 1) {
    return invalid("block_table", "expected the last dimension to be contiguous (stride 1), got strides " +
                                      strides_str(t));
  }
  if (t.shape[0] > 1 && t.stride[0] < 0) {
    return invalid("block_table", "expected non-negative strides, got " + strides_str(t));
  }
  FK_RETURN_IF_ERROR(check_span("block_table", t));
  return check_data_ptr("block_table", t, 4);
}

}  // namespace vutil
}  // namespace flashkit
