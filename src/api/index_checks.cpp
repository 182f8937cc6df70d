#include "api/index_checks.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>

#include "launch/index_checks.h"

namespace flashkit::checks {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

std::string entry(const char* name, int64_t i) { return std::string(name) + "[" + str(i) + "]"; }

std::string entry2(const char* name, int64_t i, int64_t j) {
  return std::string(name) + "[" + str(i) + ", " + str(j) + "]";
}

template <class Check>
Status run_check(const Check& check, cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaError_t err = cudaStreamIsCapturing(stream, &capture);
  if (err != cudaSuccess) {
    return Status::Cuda(std::string("index check: cudaStreamIsCapturing failed: ") + cudaGetErrorString(err));
  }
  if (capture != cudaStreamCaptureStatusNone) return Status::Invalid(capture_refusal("check_inputs"));
  IndexViolation v;
  err = static_cast<cudaError_t>(find_violation(check.index, stream, &v));
  if (err != cudaSuccess) {
    return Status::Cuda(std::string("index check kernel failed: ") + cudaGetErrorString(err));
  }
  if (v.position < 0) return Status::Ok();
  return Status::Invalid(describe_violation(check, v));
}

}  // namespace

FLASHKIT_EXPORT std::string capture_refusal(const char* what) {
  return std::string(what) +
         ": the index checks synchronize the stream, which is not possible while it is being "
         "captured into a CUDA graph; turn " + what + " off for captured calls";
}

FLASHKIT_EXPORT std::string describe_violation(const CuSeqlensCheck& c, const IndexViolation& v) {
  const std::string name = c.name;
  const int64_t i = v.position;
  switch (v.kind) {
    case kCuSeqlensStartNotZero:
      return name + ": does not start at 0 (" + entry(c.name, 0) + " = " + str(v.value[0]) + ")";
    case kCuSeqlensDecreasing:
      return name + ": not non-decreasing at index " + str(i) + " (" + entry(c.name, i - 1) + " = " +
             str(v.value[0]) + " > " + entry(c.name, i) + " = " + str(v.value[1]) + ")";
    case kCuSeqlensPastEnd:
      return name + ": past the end of " + c.tensor_name + " at index " + str(i) + " (" +
             entry(c.name, i) + " = " + str(v.value[0]) + " > " + c.rows_name + " = " +
             str(c.index.rows) + ")";
    case kCuSeqlensTooLong:
      return name + ": sequence " + str(i - 1) + " is longer than " + c.max_name + " at index " +
             str(i) + " (" + entry(c.name, i) + " - " + entry(c.name, i - 1) + " = " +
             str(v.value[1]) + " - " + str(v.value[0]) + " = " + str(v.value[1] - v.value[0]) +
             " > " + c.max_name + " = " + str(c.index.max_len) + ")";
    case kCuSeqlensEndNotRows:
      return name + ": does not end at the rows of " + c.tensor_name + " at index " + str(i) +
             " (" + entry(c.name, i) + " = " + str(v.value[0]) + ", expected " + c.rows_name +
             " = " + str(c.index.rows) + ")";
    default:
      return name + ": invalid at index " + str(i) + " (problem code " + str(v.kind) + ")";
  }
}

FLASHKIT_EXPORT std::string describe_violation(const BlockTableCheck& c, const IndexViolation& v) {
  const int64_t b = v.value[0], j = v.value[1];
  const BlockTableIndex& x = c.index;
  switch (v.kind) {
    case kBlockTableLengthNegative:
      return std::string(c.lengths_name) + ": negative at index " + str(b) + " (" +
             entry(c.lengths_name, b) + " = " + str(v.value[2]) + ")";
    case kBlockTableLengthTooLong:
      return std::string(c.lengths_name) + ": more than the block table holds at index " + str(b) +
             " (" + entry(c.lengths_name, b) + " = " + str(v.value[2]) +
             " > max_pages * page_size = " + str(x.max_pages) + " * " + str(x.page_size) + " = " +
             str(x.max_pages * x.page_size) + ")";
    case kBlockTableIdOutOfRange: {
      const int64_t pages = (v.value[3] + x.page_size - 1) / x.page_size;
      return std::string(c.table_name) + ": block id out of range at [" + str(b) + ", " + str(j) +
             "] (" + entry2(c.table_name, b, j) + " = " + str(v.value[2]) +
             ", expected 0 <= id < num_pages = " + str(x.num_pages) + "; sequence " + str(b) +
             " uses its first " + str(pages) + (pages == 1 ? " entry: " : " entries: ") +
             entry(c.lengths_name, b) + " = " + str(v.value[3]) + ", page_size = " +
             str(x.page_size) + ")";
    }
    default:
      return std::string(c.table_name) + ": invalid at position " + str(v.position) +
             " (problem code " + str(v.kind) + ")";
  }
}

FLASHKIT_EXPORT Status check_index(const CuSeqlensCheck& check, cudaStream_t stream) {
  return run_check(check, stream);
}

FLASHKIT_EXPORT Status check_index(const BlockTableCheck& check, cudaStream_t stream) {
  if (check.index.page_size < 1) {
    return Status::Invalid("page_size: expected >= 1, got " + str(check.index.page_size));
  }
  if (check.index.max_pages < 0 || check.index.batch < 0 || check.index.num_pages < 0) {
    return Status::Invalid(std::string(check.table_name) + ": expected non-negative sizes");
  }
  return run_check(check, stream);
}

namespace {

Status bad(const char* name, const std::string& what) {
  return Status::Invalid(std::string(name) + ": " + what);
}

// An int32 CUDA tensor of `ndim` dims with non-negative sizes (`layout` for the message).
Status check_index_tensor(const char* name, const TensorRef& t, int ndim, const char* layout) {
  if (t.device != Device::kCUDA) {
    return bad(name, std::string("expected a CUDA tensor, got a ") + device_name(t.device) + " tensor");
  }
  if (t.dtype != DType::kInt32) {
    return bad(name, std::string("expected dtype int32, got ") + dtype_name(t.dtype));
  }
  if (t.ndim != ndim) {
    return bad(name, "expected " + str(ndim) + (ndim == 1 ? " dim " : " dims ") + layout + ", got " +
                         t.shape_str());
  }
  for (int i = 0; i < ndim; ++i) {
    if (t.shape[i] < 0) return bad(name, "expected non-negative sizes, got " + t.shape_str());
  }
  if (t.numel() > 0 && t.data == nullptr) return bad(name, "data pointer is null");
  return Status::Ok();
}

}  // namespace

FLASHKIT_EXPORT Status check_block_table(const TensorRef& block_table, const TensorRef& seqlens_k,
                                         int64_t num_pages, int64_t page_size, cudaStream_t stream) {
  Status s = check_index_tensor("block_table", block_table, 2, "[B, max_pages]");
  if (s.ok()) s = check_index_tensor("seqlens_k", seqlens_k, 1, "[B]");
  if (!s.ok()) return s;
  const int64_t B = block_table.shape[0], max_pages = block_table.shape[1];
  if (seqlens_k.device_id != block_table.device_id) {
    return bad("seqlens_k", "expected CUDA device " + str(block_table.device_id) +
                                " (the device of block_table), got " + str(seqlens_k.device_id));
  }
  if (seqlens_k.shape[0] != B) {
    return bad("seqlens_k", "expected length B = " + str(B) + " (from block_table), got " +
                                str(seqlens_k.shape[0]));
  }
  if (max_pages > 1 && block_table.stride[1] != 1) {
    return bad("block_table", "expected a contiguous last dimension (stride 1), got stride " +
                                  str(block_table.stride[1]));
  }
  const int64_t row_stride = B > 1 ? block_table.stride[0] : max_pages;
  if (row_stride < max_pages) {
    return bad("block_table", "expected a row stride >= max_pages = " + str(max_pages) + ", got " +
                                  str(row_stride));
  }
  if (!seqlens_k.is_contiguous()) return bad("seqlens_k", "expected a contiguous tensor");
  if (num_pages < 0) return bad("num_pages", "expected >= 0, got " + str(num_pages));
  if (page_size < 1) return bad("page_size", "expected >= 1, got " + str(page_size));
  if (B == 0) return Status::Ok();

  int prev = 0;
  cudaError_t err = cudaGetDevice(&prev);
  if (err != cudaSuccess) {
    return Status::Unsupported(std::string("no usable CUDA device: ") + cudaGetErrorString(err));
  }
  const int device = block_table.device_id;
  if (device != prev && (err = cudaSetDevice(device)) != cudaSuccess) {
    return Status::Unsupported("cannot make CUDA device " + str(device) + " current: " +
                               cudaGetErrorString(err));
  }
  const BlockTableCheck check{"block_table", "seqlens_k",
                              {static_cast<const int32_t*>(block_table.data), B, max_pages, row_stride,
                               static_cast<const int32_t*>(seqlens_k.data), num_pages, page_size}};
  s = check_index(check, stream);
  if (device != prev) cudaSetDevice(prev);
  return s;
}

bool check_inputs_from_env() {
  static const bool on = [] {
    const char* e = std::getenv("FLASHKIT_CHECK_INPUTS");
    return e != nullptr && e[0] == '1';
  }();
  return on;
}

bool check_requested(bool explicit_request, cudaStream_t stream) {
  if (explicit_request) return true;
  if (!check_inputs_from_env()) return false;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  return !(cudaStreamIsCapturing(stream, &capture) == cudaSuccess && capture != cudaStreamCaptureStatusNone);
}

}  // namespace flashkit::checks
