// Public side of the device error word (include/flashkit/errors.h).
#include "flashkit/errors.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

#include "export.h"
#include "launch/device_errors.h"

namespace flashkit {

FLASHKIT_EXPORT std::string describe_device_errors(uint32_t bits) {
  if (bits == 0) return "no device errors";
  struct Bit {
    uint32_t bit;
    const char* text;
  };
  static const Bit kBits[] = {
      {kDeviceErrorCuSeqlens,
       "cu_seqlens invalid (bit 0x1): an entry of cu_seqlens_q/k is out of order, negative or "
       "past the end of q/k, or the array does not start at 0 and end at the rows of q/k; "
       "those sequences were skipped (bad q range) or got out = 0 and lse = -inf (bad k "
       "range)"},
      {kDeviceErrorSeqlenAboveMax,
       "sequence longer than max_seqlen (bit 0x2): a sequence is longer than max_seqlen_q "
       "(its rows past the grid were not written) or max_seqlen_k"},
      {kDeviceErrorBlockId,
       "block id out of range (bit 0x4): a block table entry in use is outside [0, num_pages)"},
      {kDeviceErrorSeqlensK,
       "seqlens_k out of range (bit 0x8): a length is negative or more than the block table "
       "holds (max_pages * page_size)"},
      {kDeviceErrorAppendSlot,
       "append slot invalid (bit 0x10): append_kv met a new token with no valid slot (negative "
       "position, beyond the block table, or an out-of-range block id); it was not written"},
      {kDeviceErrorDecodePlan,
       "decode plan mismatch (bit 0x20): decode_run got a workspace not planned for its sizes; "
       "it wrote nothing (call decode_plan with the same sizes first)"},
      {kDeviceErrorDetOrder,
       "deterministic order given up (bit 0x40): a deterministic backward's CTAs could not all be "
       "resident at once (another kernel held SMs, or an SM limit applies), so some dq adds were "
       "made out of turn: dq is correct but may not be bitwise reproducible "
       "(FLASHKIT_BWD_DET_ROTATE=0 avoids the need)"},
  };
  std::string s;
  uint32_t known = 0;
  for (const Bit& b : kBits) {
    known |= b.bit;
    if (bits & b.bit) s += (s.empty() ? "" : "; ") + std::string(b.text);
  }
  if (bits & ~known) {
    char buf[48];
    std::snprintf(buf, sizeof(buf), "unknown bits 0x%x", static_cast<unsigned>(bits & ~known));
    s += (s.empty() ? "" : "; ") + std::string(buf);
  }
  return s;
}

FLASHKIT_EXPORT Status read_device_errors(int device, bool clear, uint32_t* bits) {
  if (bits == nullptr) return Status::Invalid("bits: expected a non-null pointer");
  *bits = 0;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    return Status::Unsupported(std::string("no usable CUDA device: ") +
                               (err != cudaSuccess ? cudaGetErrorString(err) : "no device found"));
  }
  int prev = 0;
  if ((err = cudaGetDevice(&prev)) != cudaSuccess) {
    return Status::Unsupported(std::string("no usable CUDA device: ") + cudaGetErrorString(err));
  }
  if (device < 0) device = prev;
  if (device >= count) {
    return Status::Invalid("device: expected a CUDA device in [0, " + std::to_string(count) +
                           "), got " + std::to_string(device));
  }
  if (device != prev && (err = cudaSetDevice(device)) != cudaSuccess) {
    return Status::Unsupported("cannot make CUDA device " + std::to_string(device) +
                               " current: " + cudaGetErrorString(err));
  }
  err = static_cast<cudaError_t>(read_device_error_word(device, clear, bits));
  if (device != prev) cudaSetDevice(prev);
  if (err != cudaSuccess) {
    return Status::Cuda("reading the device error word of device " + std::to_string(device) +
                        " failed: " + cudaGetErrorString(err));
  }
  return Status::Ok();
}

}  // namespace flashkit
