// FlashKit public API: the device-side error flag.
//
// Kernels never trust index data that lives in device memory (cu_seqlens, and later block
// tables, sequence lengths, append slots): reading it on the host would cost a sync per
// call. Instead every kernel clamps what it reads to the extents of its tensors, so no
// index array, however wrong, makes a kernel read or write outside them, and records what
// it found in ONE sticky 32-bit word per device, shared by all FlashKit kernels: each
// problem sets a bit (atomicOr) and the bits stay set until read with clear = true.
//
// What a kernel writes for a sequence whose indices are bad is documented with each bit.
// To get an error at the call instead (with the argument and position named), enable the
// check mode (AttentionFwdArgs::check_inputs, or FLASHKIT_CHECK_INPUTS=1), which
// validates the index arrays on the GPU before the launch at the cost of a sync.
#pragma once

#include <cstdint>
#include <string>

#include "flashkit/tensor.h"

namespace flashkit {

// Bits of the device error word. Values are stable.
enum DeviceError : uint32_t {
  // A cu_seqlens_q/k entry is out of order, negative or past the end of q/k, or
  // cu_seqlens[0] != 0 or cu_seqlens[B] != the rows of q/k. A sequence whose q range is
  // not inside q writes nothing; one whose k range is not inside k gets out = 0 and
  // lse = -inf for its q rows; the rows no sequence covers are not written.
  kDeviceErrorCuSeqlens = 1u << 0,
  // A sequence is longer than max_seqlen_q (its rows past the grid, which covers
  // max_seqlen_q rows rounded up to the kernel's row block, are not written) or longer
  // than max_seqlen_k (its results are still exact).
  kDeviceErrorSeqlenAboveMax = 1u << 1,
  // Paged decode: a block id a sequence uses is outside [0, num_pages). It is never
  // dereferenced; its tokens are left out of the attention.
  kDeviceErrorBlockId = 1u << 2,
  // Paged decode: a seqlens_k entry is negative or beyond what the block table can hold
  // (max_pages * page_size); it is clamped to [0, max_pages * page_size].
  kDeviceErrorSeqlensK = 1u << 3,
  // append_kv: a new token's position is negative or beyond the block table, or its block
  // id is out of range; that token is not written.
  kDeviceErrorAppendSlot = 1u << 4,
  // Paged decode: the workspace was not planned (decode_plan) for this call's sizes; the
  // run did nothing with it (out is not written).
  kDeviceErrorDecodePlan = 1u << 5,
  // Deterministic backward (Hopper, D 64/128/256, no mask): the CTAs of one (batch, KV head)
  // wait on each other's dq turns in a cycle, which needs them all resident at once. When
  // they were not (another kernel held SMs for a long time, or an SM limit such as MPS's
  // applies), a CTA that had waited 0.2 s for its turn added its dq without it, so
  // the call never hangs: its dq is correct, but its last bits may differ from another
  // run's. FLASHKIT_BWD_DET_ROTATE=0 selects an order that never needs co-residency.
  kDeviceErrorDetOrder = 1u << 6,
};

// Reads the error word of CUDA device `device` (-1: the calling thread's current device)
// into *bits and, when `clear` is true, clears the bits it read (bits set in between stay
// set). SYNCHRONIZING: waits for all work on the device first (cudaDeviceSynchronize), so
// the bits cover every kernel launched before the call; not usable during CUDA-graph
// capture. Returns Unsupported when there is no such device, Cuda on a CUDA error (for
// instance a sticky error of an earlier kernel).
Status read_device_errors(int device, bool clear, uint32_t* bits);

// A readable description of `bits`, one clause per bit ("cu_seqlens invalid (bit 0x1):
// ..."), "no device errors" for 0, and the unknown bits as hex.
std::string describe_device_errors(uint32_t bits);

}  // namespace flashkit
