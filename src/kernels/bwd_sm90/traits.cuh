// Tile shapes and shared-memory plan of the Hopper (sm_90a) backward kernel.
//
// A CTA owns kBlockN = 128 keys of one (batch, KV head); warpgroup w (of 2) owns keys
// [64w, 64w + 64): it computes S^T = K Q^T and dP^T = V dO^T for them as m64n64 wgmmas
// against a 64-row query block and accumulates their dK and dV (64 x D each) in registers.
// dQ = dS K is split over the warpgroups by output column chunk (D >= 128) or by key
// half (D = 64). D = 256 (kSplitD): 64 keys per CTA, both warpgroups on the same keys,
// dK/dV split by columns. Q and dO are double-buffered; every operand uses the 128-byte
// swizzle.
#pragma once

#include "tiles/smem_swizzle.cuh"

namespace flashkit::bwd_sm90 {

template <typename T_, int kHeadDim_>
struct BwdTraits {
  using T = T_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = 64;
  // D = 256: dK and dV of 64 keys (2 x 128 fp32 per thread) do not fit one warpgroup's
  // registers, so both warpgroups take the same 64 keys and split dK/dV by columns;
  // warpgroup 0 computes S^T and warpgroup 1 dP^T and they exchange P and dS^T through
  // shared memory (the kDupSdp / softcap instantiations compute both in each warpgroup: 7/5
  // of the MMA work). Otherwise each warpgroup owns its own 64 of 128 keys.
  static constexpr bool kSplitD = kHeadDim_ == 256;
  static constexpr int kBlockN = kSplitD ? 64 : 128;
  static constexpr int kWarpGroups = 2;
  static constexpr int kThreads = 128 * kWarpGroups;
  static constexpr int kMinBlocks = 1;
  static constexpr int kDChunks = kHeadDim / 64;  // n64 chunks of dK/dV/dQ columns
  static constexpr int kWgChunks = kSplitD ? kDChunks / 2 : kDChunks;  // dK/dV chunks per warpgroup
  static constexpr int kKSteps = kHeadDim / 16;   // k16 steps of S^T, dP^T
  static constexpr int kMSteps = kBlockM / 16;    // k16 steps of dV, dK (over query rows)
  // dQ: warpgroup w takes column chunks w, w + 2, ... when there are at least two; with one
  // (D = 64) each warpgroup multiplies its own 64 keys and both add into dq.
  static constexpr bool kDqSplitKeys = kDChunks == 1;
  static constexpr int kDqChunks = kDqSplitKeys ? 1 : kDChunks / 2;
  static constexpr int kDqKSteps = kDqSplitKeys ? 4 : kBlockN / 16;
  static_assert(kHeadDim % 64 == 0 && (kDChunks == 1 || kDChunks % 2 == 0), "D = 64, 128 or 256");
  static_assert(kDqKSteps * 16 <= kBlockN, "dQ's k-steps cover the block's keys");

  using QTile = tiles::Swizzle128Tile<T, kBlockM, kHeadDim>;  // also dO
  using KTile = tiles::Swizzle128Tile<T, kBlockN, kHeadDim>;  // also V, and dK/dV in the epilogue
  using DsTile = tiles::Swizzle128Tile<T, kBlockN, kBlockM>;  // dS^T [key][row]

  static constexpr int kSmemK = 0;
  static constexpr int kSmemV = kSmemK + KTile::kBytes;
  static constexpr int kSmemQ = kSmemV + KTile::kBytes;        // 2 stages
  static constexpr int kSmemDo = kSmemQ + 2 * QTile::kBytes;   // 2 stages
  static constexpr int kSmemDs = kSmemDo + 2 * QTile::kBytes;
  static constexpr int kSmemLse = kSmemDs + DsTile::kBytes;    // fp32 [2][kBlockM]
  static constexpr int kSmemDelta = kSmemLse + 2 * kBlockM * 4;
  // D = 256: warpgroup 0's fp32 P handed to warpgroup 1 ([8][128] float4 per thread).
  static constexpr int kSmemX = kSmemDelta + 2 * kBlockM * 4;
  static constexpr int kXBytes = kSplitD ? 8 * 128 * 16 : 0;
  static constexpr int kSmemBytes = kSmemX + kXBytes + 1024;  // + alignment slack
  static_assert(kSmemBytes <= 227 * 1024, "fits an H100/H200 SM's shared memory");
  static_assert(QTile::kBytes % 1024 == 0 && KTile::kBytes % 1024 == 0 && DsTile::kBytes % 1024 == 0,
                "1024-byte aligned tiles");
};

}  // namespace flashkit::bwd_sm90
