// Hopper (sm_90a) MLA decoding split kernel: wgmma, two warpgroups, the "seesaw" schedule.
//
// A CTA owns 64 query rows (one m-block of one KV head) and walks the pieces (sequence,
// 64-token block range) of its scheduler part (kernels/mla_params.h). Per piece:
//
//   shared memory: Q (64 x 576) | K buffer 0 (64 x 576) | K buffer 1 | P0 (64 x 64) | stats
//   (all 128-byte swizzled; V is the first 512 columns of K, read MN-major by the PV wgmmas)
//
// The 64 x 512 fp32 output tile is 128 registers per thread when split between the two
// warpgroups by columns: warpgroup 0 owns O_L = O[:, 0:256], warpgroup 1 O_R = O[:, 256:512].
// KV blocks go in pairs (A in buffer 0, B in buffer 1); warpgroup 0 computes S_A = Q K_A^T,
// warpgroup 1 S_B = Q K_B^T, each on the whole 64 rows, with one running max m shared
// through shared memory (FlashMLA's "seesaw", docs/20250422-new-kernel-deep-dive.md):
//
//   WG0: m0 = max(m, rowmax S_A), sc0 = 2^(m - m0), O_L *= sc0, P_A = 2^(S_A - m0)
//        O_L += P_A V_A[:, L]                      (P_A from registers)
//   WG1: m1 = max(m0, rowmax S_B), sc1 = 2^(m0 - m1), O_R *= sc0 sc1, P_B = 2^(S_B - m1)
//        O_R += P_B V_B[:, R]                      (P_B from registers, also stored to sP1)
//   WG0: P_A *= sc1 -> sP0,  O_L *= sc1,  O_L += sP1 V_B[:, L]
//   WG1: O_R += sP0 V_A[:, R]
//
// so one warpgroup's softmax runs while the other's GEMMs keep the tensor cores busy, and
// each half of a K buffer is reloaded (for the next pair) as soon as its last reader is
// done. The RoPE part of Q (columns 512..575) is kept in registers as the A operand of the
// last QK^T k-steps; its shared-memory slot holds sP1.
//
// Loads: warpgroup 0 loads columns 0..255 (chunks 0-3), warpgroup 1 columns 256..575
// (chunks 4-8) of each buffer; each 64-column chunk has an mbarrier. Page sizes that are
// multiples of 16: TMA boxes of 64 columns x gcd(page, 64) tokens from a tensor map the
// launcher encodes (one lane per box; a box past the end or with a bad block id gets an
// out-of-range page coordinate and arrives as zeros; V rows of a box straddling the end
// are cleared in shared memory before a P V reads them). Other page sizes: 16-byte
// cp.async copies, each thread resolving its row's page, zero-filled past the end. Tokens
// of pages with a bad block id are masked out of the softmax (a row mask published with
// the chunk-0 barrier) and set the error bit. docs/kernels/mla.md has the measured ladder.
//
// The kernel body exists only in the sm_90a compilation.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/device_errors.cuh"
#include "kernels/mla_params.h"
#include "prims/cp_async.cuh"
#include "prims/fp8.cuh"
#include "prims/ldmatrix.cuh"
#include "prims/mbarrier.cuh"
#include "prims/numeric.cuh"
#include "prims/opaque.cuh"
#include "prims/tma.cuh"
#include "prims/wgmma.cuh"
#include "tiles/smem_swizzle.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FLASHKIT_MLA_SM90_BODY 1
#else
#define FLASHKIT_MLA_SM90_BODY 0
#endif

// Compile-time switches; the defaults are the shipped kernel, the others are kept for A/B
// runs of scripts/dev/mla_sm90_check.cu (docs/kernels/mla.md, v13-v17):
// FLASHKIT_MLA_TRACE: lane 0 of each warpgroup of a few CTAs records clock64() at fixed
//   points of pairs 8..23 of its first piece into g_mla_trace, and %globaltimer points of
//   every CTA and of the traced CTAs' pieces (read by mla_sm90_trace_read*, launcher).
// FLASHKIT_MLA_ABL = 3 (timing only, results wrong): no waits for K chunks in Q K^T and no
//   K loads inside the block loop: the math alone. (Bit 0 alone faults.)
#ifndef FLASHKIT_MLA_TRACE
#define FLASHKIT_MLA_TRACE 0
#endif
#ifndef FLASHKIT_MLA_ABL
#define FLASHKIT_MLA_ABL 0
#endif
// FLASHKIT_MLA_STAGED_O: the epilogue writes O through shared memory with one bulk copy
//   per row (1) or with register stores (0).
#ifndef FLASHKIT_MLA_STAGED_O
#define FLASHKIT_MLA_STAGED_O 1
#endif
// FLASHKIT_MLA_ARRIVE_FIRST: the exponentials and the O rescale of a softmax wait for a shared
//   load issued after the scale barrier's arrival (1), so that ptxas cannot schedule them ahead of
//   it (0: it did, and the other warpgroup waited for them).
// FLASHKIT_MLA_SPIN_WAIT: the chunk waits of Q K^T spin (prims::mbarrier_wait, FlashMLA's form)
//   instead of suspending (0, v14: -1.5 % compute-bound on an H100, memory-bound neutral there).
// FLASHKIT_MLA_PV_SPLIT: warpgroup 0's last P V of a pair as two 128-column quarters, so that
//   at > 128 rows per KV head buffer 1's chunks 0-1 are reloaded after the first (0: one n256).
//   Pages of >= 64 tokens only.
#ifndef FLASHKIT_MLA_PV_SPLIT
#define FLASHKIT_MLA_PV_SPLIT 0
#endif
#ifndef FLASHKIT_MLA_SPIN_WAIT
#define FLASHKIT_MLA_SPIN_WAIT 0
#endif
#ifndef FLASHKIT_MLA_LATE_IDS
#define FLASHKIT_MLA_LATE_IDS 0
#endif
#ifndef FLASHKIT_MLA_ARRIVE_FIRST
#define FLASHKIT_MLA_ARRIVE_FIRST 1
#endif
// FLASHKIT_MLA_EXP_MIX (the page >= 64 kernel; FLASHKIT_MLA_EXP_MIX_PAGED: the page-16/32 one)
//   bit 0: a softmax's 32 exponentials per thread written interleaved with the O rescale (16
//   multiplies after each 4 exponentials) and the row sums added pairwise, as FlashMLA's SASS has
//   them, instead of all exponentials (32 MUFU.EX2 back to back in the SASS of both warpgroups'
//   pair loops) and then the 128 multiplies. Bit 2: each group's factors made to depend on its
//   exponentials (f + 0 * s), without which ptxas still issues warpgroup 1's exponentials back to
//   back. Bit 1: warpgroup 1 stores P_B after issuing its P V (ptxas otherwise sinks the rescale
//   below those stores and their fence). Measured (H200, mla.md "Exponentials interleaved"): 7 is
//   0.2-0.7 % faster at page 64; at page 16 +0.9 % (h_q 16) / -0.8 % (h_q 128), so off there.
#ifndef FLASHKIT_MLA_EXP_MIX
#define FLASHKIT_MLA_EXP_MIX 7
#endif
#ifndef FLASHKIT_MLA_EXP_MIX_PAGED
#define FLASHKIT_MLA_EXP_MIX_PAGED 0
#endif

namespace flashkit::mla_sm90 {

// mbarrier waits suspend rather than spin (prims::mbarrier_wait_sleep; v14 in mla.md): a
// warpgroup waiting for K chunks leaves its schedulers' issue slots to the other one.
#if FLASHKIT_MLA_TRACE
// [traced CTA 0..3][warpgroup][pair 0..15][point 0..7]
constexpr int kTraceCtas = 4, kTracePairs = 16, kTracePoints = 8, kTraceFirstPair = 8;
__device__ unsigned long long g_mla_trace[kTraceCtas * 2 * kTracePairs * kTracePoints];
// %globaltimer (ns): every CTA's start (after griddepcontrol.wait) and end, [cta][2] with
// cta = (part * h_kv + kvh) * m_blocks + m_block; and the traced CTAs' pieces (up to 8):
// [traced CTA][piece][start, first Q K^T done, block loop done, both warpgroups done,
// epilogue done, shared memory free (the previous piece's O copies read), Q landed, prologue
// barrier passed (RoPE registers loaded), O staged (after the staging barrier), O copies issued],
// + pairs. All points are thread 0's (warpgroup 0).
constexpr int kTraceMaxCtas = 2048, kTracePieces = 8, kTracePiecePoints = 12;
__device__ unsigned long long g_mla_cta[kTraceMaxCtas * 2];
__device__ unsigned long long g_mla_piece[kTraceCtas * kTracePieces * kTracePiecePoints];
__device__ int g_mla_piece_pairs[kTraceCtas * kTracePieces];
__device__ __forceinline__ unsigned long long mla_gtime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#define MLA_TR(pc, k)                                                \
  do {                                                               \
    if ((pc).tr != nullptr && (pc).lt == 0) (pc).tr[k] = clock64();  \
  } while (0)
#else
#define MLA_TR(pc, k) \
  do {                \
  } while (0)
#endif

// kTma: K blocks arrive by TMA (page sizes that are multiples of 16), else by cp.async.
// kWholeBox (TMA only): pages are multiples of 64 tokens, every chunk of a block is one box
// resolved by lane 0; the other load paths (one box per page, runs of pages) are compiled
// out, so the block loop's code holds only what runs (mla.md "One box per chunk at compile time").
// kFp8 (whole boxes, bf16 q): the cache is FlashMLA's FP8 layout (MlaParams::kv_fp8). The raw e4m3
// bytes and scales of a block land by TMA in the K buffer chunks they will be dequantized into, and
// a third warpgroup (the converters, fp8_convert_loop) turns them into the bf16 tile in place; the
// RoPE chunk (bf16 in the cache) lands by TMA as before. Everything after the chunk barriers is the
// bf16 kernel. (Earlier layouts, measured slower, are in mla.md "FP8 cache on the Hopper kernel":
// per-token-half converters, 24- or 40-register, and one raw-bytes barrier per chunk.)
template <typename T_, bool kTma_, bool kWholeBox_ = false, bool kFp8_ = false>
struct Traits {
  using T = T_;
  static constexpr bool kTma = kTma_;
  static constexpr bool kWholeBox = kWholeBox_;
  static constexpr bool kFp8 = kFp8_;
  static_assert(kTma || !kWholeBox, "whole-block boxes are TMA copies");
  static_assert(!kFp8 || (kWholeBox && std::is_same<T_, __nv_bfloat16>::value),
                "the FP8 cache: whole-block boxes and bf16 q (its RoPE part is bf16)");
  static constexpr int kExpMix = kWholeBox ? FLASHKIT_MLA_EXP_MIX : FLASHKIT_MLA_EXP_MIX_PAGED;
  static constexpr int kThreads = 256;  // the two MMA warpgroups (named barriers count these)
  static constexpr int kBlockThreads = kFp8 ? 384 : 256;  // + the converters' warpgroup
  // setmaxnreg split with the converters (launched at 65536 / 384 = 168 per thread):
  // 256 x 232 + 128 x 40 = 64512 (240 / 24 starved the converters: 14-16 % slower).
  static constexpr int kMmaRegs = 232, kConvRegs = 40;
  static_assert(!kFp8 || prims::setmaxnreg_split_fits(kBlockThreads, kConvRegs + 2 * kMmaRegs), "the split fits");
  static constexpr int kChunks = kMlaHeadDim / 64;   // 9 64-column chunks of K
  static constexpr int kVChunks = kMlaHeadDimV / 64;  // 8 of them are V
  using Tile = tiles::Swizzle128Tile<T, kMlaBlockM, kMlaHeadDim>;  // Q and each K buffer
  using PTile = tiles::Swizzle128Tile<T, kMlaBlockM, kMlaBlockN>;
  static constexpr int kChunkBytes = Tile::kBlockBytes;  // 64 rows x 128 bytes
  static_assert(kMlaBlockM == kMlaBlockN && kChunkBytes == 8192, "64 x 64 chunks");

  static constexpr int kSmemQ = 0;
  static constexpr int kSmemK0 = kSmemQ + Tile::kBytes;
  static constexpr int kSmemK1 = kSmemK0 + Tile::kBytes;
  static constexpr int kSmemP0 = kSmemK1 + Tile::kBytes;
  static constexpr int kSmemP1 = kSmemQ + (kChunks - 1) * kChunkBytes;  // Q's RoPE chunk
  static constexpr int kSmemM = kSmemP0 + PTile::kBytes;  // float[64]: running max (log2 units)
  static constexpr int kSmemScale0 = kSmemM + 256;        // float[64]
  static constexpr int kSmemScale1 = kSmemScale0 + 256;   // float[64]
  static constexpr int kSmemL = kSmemScale1 + 256;        // float[2][64]: row sums per warpgroup
  static constexpr int kSmemInv = kSmemL + 512;           // uint64[2]: rows of bad block ids
  static constexpr int kSmemBar = kSmemInv + 16;          // mbarriers: K0 chunks, K1 chunks, Q
  static constexpr int kNumBars = 2 * kChunks + 1;
  static constexpr int kSmemZero = kSmemBar + 8 * kNumBars;  // float 0 (see zero_after_arrive)
  // kFp8: mbarriers [buffer][half][converter warp of the half] for the raw bytes' arrival, then
  // one the MMA warpgroups arrive on when they are done (the converters then exit).
  static constexpr int kSmemLand = kSmemZero + 16;
  static constexpr int kNumLandBars = kFp8 ? 2 * 2 * 2 + 1 : 0;
  static constexpr int kLandDone = 2 * 2 * 2;  // index of the done barrier
  static constexpr int kSmemBytes = kSmemLand + 8 * kNumLandBars + 1024;  // + alignment slack
  static_assert(kSmemBytes <= 232448, "227 KB of shared memory per block");
  // Epilogue staging of O in the K buffers (free then): rows padded by 16 bytes so the
  // fragment stores of a warp's 8 rows hit distinct banks; every row start 16-byte aligned.
  static constexpr int kORowBytesOut = kMlaHeadDimV * int(sizeof(T)) + 16;  // q's dtype
  static constexpr int kORowBytesPart = kMlaHeadDimV * 4 + 32;              // fp32 partials
  static_assert(kMlaBlockM * kORowBytesPart <= 2 * Tile::kBytes && kSmemK1 == kSmemK0 + Tile::kBytes,
                "O staging fits the two K buffers");
  // kFp8 landing places. Converter warp (h, k) dequantizes NoPE chunks cp = 4h + 2k and cp + 1 of
  // all 64 tokens: their e4m3 bytes (128 contiguous bytes per token) land as one 128-byte x 64-token
  // box in chunk cp + 1's place, the tokens' 16 scale bytes as a 16-byte x 64-token box in chunk cp's
  // rows 0-7 (fp8_convert_loop reads them before it writes chunk cp).
  static constexpr int kLandBytes = 8192 + 1024;  // per (buffer, half, warp)
};

// Loads inside the block loop (the ablation bit 1 drops them).
#define MLA_LOOP_LOAD(pc, c0, c1, buf, blk, id)                                        \
  do {                                                                             \
    if constexpr ((FLASHKIT_MLA_ABL & 2) == 0) (pc).template load_chunks<c0, c1>(buf, blk, id); \
  } while (0)

// Named barriers (id 0 is __syncthreads).
// (5 and 6: warpgroup-local, after zero_v_tail.)
enum : int { kBarScale0 = 1, kBarScale1 = 2, kBarP0 = 3, kBarP1 = 4 };
constexpr float kInitMax = -1e30f;  // finite: a row that saw no key keeps scale 2^0 = 1
enum : uint32_t { kMlaErrBlockId = 4u, kMlaErrSeqlen = 8u };  // flashkit/errors.h bits

__device__ __forceinline__ void grid_dependency_wait() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

// Everything a warpgroup needs about the current piece.
template <class Tr>
struct Piece {
  using T = typename Tr::T;
  const MlaParams& p;
  unsigned char* smem;
  int b, kvh;
  int load_end;       // tokens [0, load_end) of the sequence may be read
  int lim[2];         // this thread's two rows see tokens < lim[r]
  int mask_from;      // min(lim): blocks ending at or before it need no mask
  int lt, row0;       // thread index in the warpgroup; first of its two rows
  const int32_t* bt;  // block-table row
  uint32_t bad;       // error bits seen by this thread
#if FLASHKIT_MLA_TRACE
  unsigned long long* tr = nullptr;  // this warpgroup's points of the current pair, or null
#endif

  __device__ __forceinline__ uint32_t bar_k(int buf, int c) const {
    return prims::smem_addr(smem + Tr::kSmemBar) + 8 * (buf * Tr::kChunks + c);
  }
  __device__ __forceinline__ uint32_t bar_land(int buf, int h, int k) const {
    return prims::smem_addr(smem + Tr::kSmemLand) + 8 * ((buf * 2 + h) * 2 + k);
  }
  __device__ __forceinline__ T* buf_ptr(int buf) const {
    return reinterpret_cast<T*>(smem + (buf == 0 ? Tr::kSmemK0 : Tr::kSmemK1));
  }

  // The row of a block this thread resolves a page for: cp.async: its own copy row
  // (lt / 2); TMA: lanes 0 .. 64 / box - 1 of every warp of the warpgroup, one box each (warp w
  // then issues box w itself, see load_chunks).
  __device__ __forceinline__ int lookup_row() const {
    if constexpr (Tr::kWholeBox) {
      return lt == 0 ? 0 : kMlaBlockN;
    } else if constexpr (Tr::kTma) {
      return (lt & 31) < p.tma_boxes ? (lt & 31) * p.tma_box_rows : kMlaBlockN;
    } else {
      return lt >> 1;
    }
  }
  // Page id holding token `block * 64 + lookup_row()`, or -1 when that row is past the
  // piece's end. Issued early and checked at use (load_chunks), so the block-table load
  // is off the copies' critical path.
  __device__ __forceinline__ int page_id(int block) const {
    const int row = lookup_row();
    const int tok = block * kMlaBlockN + row;
    return row < kMlaBlockN && tok < load_end ? bt[p.page_div.div(tok)] : -1;
  }

  // Loads chunks [c0, c1) of `block` into buffer `buf`; `id` from page_id(block). Rows past
  // the piece's end or with a block id outside [0, num_pages) are zero-filled, never read
  // (TMA: such boxes get an out-of-range page coordinate, which the hardware fills with
  // zeros; the rows of a box that straddles the end are cleared by zero_v_tail).
  //
  // The loads of chunks 0-3 (warpgroup 0) also publish which rows of the block have a bad
  // block id (a 64-bit row mask in shared memory, read by the softmax, which leaves those
  // tokens out): warp 0 gathers it by ballot and lane 0 stores it before its barrier
  // arrival (TMA: the expect-tx arrival; cp.async: one extra plain arrival on chunk 0), so
  // whoever waits for the chunks sees it.
  template <int c0, int c1>
  __device__ __forceinline__ void load_chunks(int buf, int block, int id) {
    const int row = lookup_row();
    const int tok = block * kMlaBlockN + row;
    bool ok = row < kMlaBlockN && tok < load_end;
    if (ok && (id < 0 || id >= p.num_pages)) {
      bad |= kMlaErrBlockId;
      ok = false;
    }
    if constexpr (c0 == 0) {
      uint64_t inv = 0;
      if constexpr (Tr::kTma) {
        const uint32_t segs = __ballot_sync(0xffffffffu, row < kMlaBlockN && tok < load_end && !ok);
        if constexpr (Tr::kWholeBox) {
          inv = (segs & 1u) ? ~uint64_t(0) : uint64_t(0);
        } else {
          const int box = p.tma_box_rows;
          const uint64_t seg_bits = box == 64 ? ~uint64_t(0) : ((uint64_t(1) << box) - 1);
#pragma unroll
          for (int k = 0; k < 4; ++k)
            if (segs & (1u << k)) inv |= seg_bits << (k * box);
        }
      } else {
        // Warp 0 checks rows lane and lane + 32 itself (the copy rows are lt / 2).
        bool bad_row[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = (lt & 31) + 32 * h;
          const int tk = block * kMlaBlockN + r;
          bad_row[h] = false;
          if (tk < load_end) {
            const int pid = bt[p.page_div.div(tk)];
            bad_row[h] = pid < 0 || pid >= p.num_pages;
          }
        }
        inv = uint64_t(__ballot_sync(0xffffffffu, bad_row[0])) | (uint64_t(__ballot_sync(0xffffffffu, bad_row[1])) << 32);
      }
      if (lt == 0) reinterpret_cast<uint64_t*>(smem + Tr::kSmemInv)[buf] = inv;
      if constexpr (!Tr::kTma) {
        if (lt == 0) prims::mbarrier_arrive(bar_k(buf, 0));
      }
    }
    const int slot = tok - p.page_div.div(tok) * p.page_size;
    // Evict-first even where several m-blocks read the block (evict-normal / evict-last in
    // all but the last m-block measured 1-13 % slower, v16).
    const uint64_t policy = prims::l2_evict_first_policy();
    const uint32_t dst = prims::opaque(prims::smem_addr(buf_ptr(buf)));
    if constexpr (Tr::kFp8) {
      // The raw bytes of this warpgroup's half (e4m3 chunks c0 .. c0 + 3 and the scales) for the
      // converters (Traits "kFp8 landing places"), and the RoPE chunk (bf16 in the cache) by TMA into
      // its place.
      // Byte coordinates in the uint8 maps (launcher: make_fp8_tensor_maps).
      static_assert((c0 == 0 && c1 == 4) || (c0 == 4 && c1 == 9), "halves of a block");
      constexpr int h = c0 == 0 ? 0 : 1;
      const int ok0 = __shfl_sync(0xffffffffu, int(ok), 0);
      const int slot0 = ok0 ? __shfl_sync(0xffffffffu, slot, 0) : 0;
      const int page0 = ok0 ? __shfl_sync(0xffffffffu, id, 0) : p.num_pages;  // out of range: zeros
      // (Addresses and coordinates are made opaque where they are used: as loop invariants ptxas
      // hoisted them out of the pair loop, where they pinned registers and the MMA warpgroups spilled.)
      if constexpr (h == 1) {
        const uint32_t b8 = prims::opaque(bar_k(buf, 8));
        prims::mbarrier_arrive_expect_tx_if(lt == 0, b8, Tr::kChunkBytes);
        prims::tma_load_4d_if(lt == 0, prims::opaque(dst + 8 * Tr::kChunkBytes), &p.kv_tmap,
                              prims::opaque(kMlaFp8RopeOffset), slot0, kvh, page0, b8, policy);
      }
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const uint32_t lb = prims::opaque(bar_land(buf, h, k));
        const int cp = 4 * h + 2 * k;  // the warp's first chunk
        prims::mbarrier_arrive_expect_tx_if(lt == 0, lb, prims::opaque(uint32_t(Tr::kLandBytes)));
        prims::tma_load_4d_if(lt == 0, prims::opaque(dst + (cp + 1) * Tr::kChunkBytes), &p.kv_tmap_run,
                              prims::opaque(cp * 64), slot0, kvh, page0, lb, policy);
        prims::tma_load_4d_if(lt == 0, prims::opaque(dst + cp * Tr::kChunkBytes), &p.kv_tmap_scales,
                              prims::opaque(kMlaFp8ScaleOffset), slot0, kvh, page0, lb, policy);
      }
    } else if constexpr (Tr::kTma) {
      // Predicated, not branched: no thread-divergent branch among the in-flight wgmmas.
#pragma unroll
      for (int c = c0; c < c1; ++c) prims::mbarrier_arrive_expect_tx_if(lt == 0, bar_k(buf, c), Tr::kChunkBytes);
      __syncwarp();
      // (The kernel for pages of 16 / 32 leaves this copy out: its block loop is then laid out
      // differently, 1-3.6 % faster with consecutive page ids (run copies), 0.6-2.4 % slower with
      // scattered ones, H200 2026-11-28, mla.md "One box per chunk at compile time".)
      if constexpr (Tr::kWholeBox) {
        // One box per chunk (pages of >= 64 tokens): its page was resolved by lane 0; broadcast,
        // the coordinates are warp-uniform and each copy is one predicated instruction (with
        // per-lane operands ptxas loops over the lanes' distinct values, in every warp).
        const int ok0 = __shfl_sync(0xffffffffu, int(ok), 0);
        const int slot0 = __shfl_sync(0xffffffffu, slot, 0);
        const int id0 = __shfl_sync(0xffffffffu, id, 0);
#pragma unroll
        for (int c = c0; c < c1; ++c) {
          prims::tma_load_4d_if(lt == 0, dst + c * Tr::kChunkBytes, &p.kv_tmap, c * 64, ok0 ? slot0 : 0, kvh,
                                ok0 ? id0 : p.num_pages, bar_k(buf, c), policy);
        }
      } else {
        // Pages of 16 or 32 tokens whose ids in this block are
        // consecutive (lanes 0 .. n - 1 of each warp resolved one: all in range, holding tokens,
        // id of lane k = id of lane 0 + k): one box of n pages per chunk from the run map, which
        // lands as the n one-page boxes would. Every warp resolved the same pages and decides
        // alike; lane 0 of warp 0 issues.
        if (p.tma_run_pages > 0) {
          const int id0 = __shfl_sync(0xffffffffu, id, 0);
          const bool mine = (lt & 31) >= p.tma_run_pages || (ok && int64_t(id) == int64_t(id0) + (lt & 31));
          if (__all_sync(0xffffffffu, mine)) {
#pragma unroll
            for (int c = c0; c < c1; ++c) {
              prims::tma_load_4d_if(lt == 0, dst + c * Tr::kChunkBytes, &p.kv_tmap_run, c * 64, 0, kvh, id0,
                                    bar_k(buf, c), policy);
            }
            return;
          }
        }
        // One box per page: box w by lane 0 of warp w, from lane w's page. The coordinates are
        // warp-uniform, so each copy is one instruction, and the boxes of a chunk go out from up
        // to four warps at once. (Issued from lanes 0 .. 3 of one warp, as until v24, ptxas looped
        // over the lanes' distinct operands: 9-14 % slower at scattered page 16, mla.md "Scattered
        // pages".) A copy may complete its bytes before lane 0 of warp 0 has added them to the
        // barrier's expected count: that phase cannot end before lane 0's arrival, and the count
        // may go below zero.
        const int w = lt >> 5;
        const int ok_w = __shfl_sync(0xffffffffu, int(ok), w & 31);
        const int slot_w = __shfl_sync(0xffffffffu, slot, w & 31);
        const int id_w = __shfl_sync(0xffffffffu, id, w & 31);
#pragma unroll
        for (int c = c0; c < c1; ++c) {
          prims::tma_load_4d_if((lt & 31) == 0 && w < p.tma_boxes,
                                dst + c * Tr::kChunkBytes + w * p.tma_box_rows * 128, &p.kv_tmap, c * 64,
                                ok_w ? slot_w : 0, kvh, ok_w ? id_w : p.num_pages, bar_k(buf, c), policy);
        }
      }
    } else {
      // Each thread: half a 128-byte chunk row (4 x 16 bytes) per chunk.
      const int piece0 = (lt & 1) * 4;
      const T* base = reinterpret_cast<const T*>(p.kv);
      if (ok) {
        base += int64_t(id) * p.kv_page_stride + int64_t(slot) * p.kv_slot_stride + int64_t(kvh) * p.kv_head_stride;
      }
#pragma unroll
      for (int c = c0; c < c1; ++c) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int col = c * 64 + (piece0 + i) * 8;
          prims::cp_async_16_stream_addr<false, true>(dst + 2 * Tr::Tile::offset(row, col), base + (ok ? col : 0),
                                                      ok, policy);
        }
        prims::cp_async_mbarrier_arrive(bar_k(buf, c));
      }
    }
  }

  // TMA only: clears V rows [load_end - block * 64, 64) of this warpgroup's half (columns
  // half * 256 ..) in buffer `buf` before a P V reads them (a box straddling the end of
  // the sequence brought in whatever follows it: NaN in the tests).
  __device__ __forceinline__ void zero_v_tail(int buf, int block, int half, int wg) const {
    if constexpr (Tr::kTma) {
      const int r0 = max(0, load_end - block * kMlaBlockN);
      if (r0 >= kMlaBlockN) return;
      const uint32_t base = prims::smem_addr(buf_ptr(buf));
      for (int i = lt; i < (kMlaBlockN - r0) * 32; i += 128) {
        const int row = r0 + i / 32, col = half * 256 + (i % 32) * 8;
        asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(base + 2 * Tr::Tile::offset(row, col)),
                     "r"(0)
                     : "memory");
      }
      prims::fence_proxy_async_smem();
      prims::bar_sync(5 + wg, 128);
    }
  }
};

// S = Q K^T (64 x 64) from the Q tile (chunks 0-7) and the RoPE registers (chunk 8) of K
// buffer `buf`: the wgmmas of steps [kFrom, kTo) of the chunk order `first`, first + 1, ...
// (mod 9), each chunk's issued as soon as it has landed (its mbarrier). Issue only: the
// caller fences before the first part and commits / waits.
template <class Tr, int kFirst, int kFrom, int kTo>
__device__ __forceinline__ void issue_qk_part(const Piece<Tr>& pc, int buf, uint32_t phase, float (&s)[8][4],
                                              uint64_t desc_q, uint64_t desc_k, const uint32_t (&rope)[4][4]) {
  using T = typename Tr::T;
  // Opaque bases: the 36 (base + offset) descriptors are formed at each use instead of
  // being hoisted out of the block loop (where they would pin 2 registers each).
  desc_q = prims::opaque(desc_q);
  desc_k = prims::opaque(desc_k);
#pragma unroll
  for (int i = kFrom; i < kTo; ++i) {
    const int c = (kFirst + i) % Tr::kChunks;
    if constexpr ((FLASHKIT_MLA_ABL & 1) == 0) {
      if constexpr (FLASHKIT_MLA_SPIN_WAIT) {
        prims::mbarrier_wait(pc.bar_k(buf, c), phase);
      } else {
        prims::mbarrier_wait_sleep(pc.bar_k(buf, c), phase);
      }
    }
    // cp.async writes through the generic proxy: make them visible to wgmma. TMA writes
    // are async-proxy already, ordered by the transaction barrier.
    if constexpr (!Tr::kTma) prims::fence_proxy_async_smem();
    if (c < Tr::kChunks - 1) {
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        const uint64_t off = uint64_t(c * Tr::kChunkBytes + ks * 32) >> 4;
        prims::wgmma_m64n64k16_ss<T>(s, desc_q + off, desc_k + off, (i | ks) != 0 ? 1 : 0);
      }
    } else {
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        const uint64_t off = uint64_t((Tr::kChunks - 1) * Tr::kChunkBytes + ks * 32) >> 4;
        prims::wgmma_m64n64k16_rs<T>(s, rope[ks], desc_k + off);
      }
    }
  }
}

// The whole S = Q K^T, waited for. Chunk order: buffer 0 starts with chunks 0-3
// (warpgroup 0 reloads them first in a pair), buffer 1 with chunks 4-8 (warpgroup 1's).
template <class Tr, int kBuf>
__device__ __forceinline__ void issue_qk(const Piece<Tr>& pc, uint32_t phase, float (&s)[8][4], uint64_t desc_q,
                                         uint64_t desc_k, const uint32_t (&rope)[4][4]) {
  prims::fence_operands(s);
  prims::wgmma_fence();
  issue_qk_part<Tr, kBuf == 0 ? 0 : 4, 0, Tr::kChunks>(pc, kBuf, phase, s, desc_q, desc_k, rope);
  prims::wgmma_commit();
  prims::wgmma_wait<0>();
  prims::fence_operands(s);
}

// The O half as the accumulator of one m64n256 wgmma.
__device__ __forceinline__ float (&as_n256(float (&o)[4][8][4]))[32][4] {
  return *reinterpret_cast<float(*)[32][4]>(&o[0][0][0]);
}

// O_half += P V[:, half]: one m64n256k16 per k16 step of the 64 keys; P from registers
// (k16 step ps = S column tiles 2ps, 2ps + 1). V's 4 atom columns are kChunkBytes apart.
template <class Tr>
__device__ __forceinline__ void issue_pv_regs(float (&o)[4][8][4], const uint32_t (&pa)[4][4], uint64_t desc_v,
                                              int half) {
  desc_v = prims::opaque(desc_v);
#pragma unroll
  for (int ps = 0; ps < 4; ++ps) {
    const uint64_t off = uint64_t(half * 4 * Tr::kChunkBytes + ps * 16 * 128) >> 4;
    prims::wgmma_m64n256k16_rs_tnspb<typename Tr::T>(as_n256(o), pa[ps], desc_v + off);
  }
}

// O_half += P V[:, half]: P from shared memory (the other warpgroup's).
template <class Tr>
__device__ __forceinline__ void issue_pv_smem(float (&o)[4][8][4], uint64_t desc_p, uint64_t desc_v, int half) {
  desc_p = prims::opaque(desc_p);
  desc_v = prims::opaque(desc_v);
#pragma unroll
  for (int ps = 0; ps < 4; ++ps) {
    const uint64_t off = uint64_t(half * 4 * Tr::kChunkBytes + ps * 16 * 128) >> 4;
    prims::wgmma_m64n256k16_ss_tnspb<typename Tr::T>(as_n256(o), desc_p + (uint64_t(ps * 32) >> 4), desc_v + off);
  }
}

// O_half[:, 128 q ..] += P V[:, half, 128 q ..]: one 128-column quarter of issue_pv_smem
// (o[2q], o[2q + 1]: accumulator column tiles 16 q .. 16 q + 15 of the n256 form).
template <class Tr>
__device__ __forceinline__ void issue_pv_smem_quarter(float (&o)[4][8][4], uint64_t desc_p, uint64_t desc_v, int half,
                                                      int q) {
  desc_p = prims::opaque(desc_p);
  desc_v = prims::opaque(desc_v);
  float(&oq)[16][4] = *reinterpret_cast<float(*)[16][4]>(&o[2 * q][0][0]);
#pragma unroll
  for (int ps = 0; ps < 4; ++ps) {
    const uint64_t off = uint64_t((half * 4 + 2 * q) * Tr::kChunkBytes + ps * 16 * 128) >> 4;
    prims::wgmma_m64n128k16_ss_tb<typename Tr::T, 0>(oq, desc_p + (uint64_t(ps * 32) >> 4), desc_v + off);
  }
}

__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

template <typename T>
__device__ __forceinline__ void pack_p(uint32_t (&pa)[4][4], const float (&s)[8][4]) {
#pragma unroll
  for (int ps = 0; ps < 4; ++ps) {
    pa[ps][0] = prims::pack2<T>(s[2 * ps][0], s[2 * ps][1]);
    pa[ps][1] = prims::pack2<T>(s[2 * ps][2], s[2 * ps][3]);
    pa[ps][2] = prims::pack2<T>(s[2 * ps + 1][0], s[2 * ps + 1][1]);
    pa[ps][3] = prims::pack2<T>(s[2 * ps + 1][2], s[2 * ps + 1][3]);
  }
}

// Stores P, already packed as the wgmma A fragments pa[ps] (ps = 16-column step), to the
// 64 x 64 swizzled tile at `sp` with stmatrix: fragment ps of a warp is exactly the four
// 8 x 8 matrices (rows 0-7 | 8-15) x (columns 16 ps + 0-7 | 8-15), lane l addressing row
// l % 8 of matrix l / 8. 4 instructions instead of 16 4-byte stores.
template <class Tr>
__device__ __forceinline__ void store_p_packed(uint32_t sp, const uint32_t (&pa)[4][4], int lt) {
  const int lane = lt % 32, mat = lane / 8;
  const int row = (lt / 32) * 16 + (lane % 8) + 8 * (mat % 2);
  sp = prims::opaque(sp);
#pragma unroll
  for (int ps = 0; ps < 4; ++ps) {
    const uint32_t addr = sp + 2 * Tr::PTile::offset(row, ps * 16 + 8 * (mat / 2));
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(pa[ps][0]),
                 "r"(pa[ps][1]), "r"(pa[ps][2]), "r"(pa[ps][3])
                 : "memory");
  }
}

// Masks the scores of tokens a row does not see (block `blk`, in buffer `buf`): past its
// causal / length limit, or in a page whose block id was bad.
template <class Tr>
__device__ __forceinline__ void mask_block(const Piece<Tr>& pc, float (&s)[8][4], int blk, int buf, int t) {
  const int tok0 = blk * kMlaBlockN;
  const uint64_t inv = reinterpret_cast<const uint64_t*>(pc.smem + Tr::kSmemInv)[buf];
  if (tok0 + kMlaBlockN <= pc.mask_from && inv == 0) return;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int col = j * 8 + 2 * t + e;
      const int tok = tok0 + col;
      const bool gone = (inv >> col) & 1;
      if (gone || tok >= pc.lim[0]) s[j][e] = -INFINITY;
      if (gone || tok >= pc.lim[1]) s[j][2 + e] = -INFINITY;
    }
  }
}

// Row max of S for both rows, in log2 units (scaled).
__device__ __forceinline__ void row_max(const float (&s)[8][4], float scale_log2, float (&mx)[2]) {
  mx[0] = mx[1] = -INFINITY;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    mx[0] = fmaxf(mx[0], fmaxf(s[j][0], s[j][1]));
    mx[1] = fmaxf(mx[1], fmaxf(s[j][2], s[j][3]));
  }
  mx[0] = prims::quad_max(mx[0]) * scale_log2;
  mx[1] = prims::quad_max(mx[1]) * scale_log2;
}

// S <- 2^(S * scale_log2 - m) in place; returns this thread's part of the row sums.
__device__ __forceinline__ void exp_rows(float (&s)[8][4], float scale_log2, const float (&m)[2], float (&sum)[2]) {
  sum[0] = sum[1] = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      s[j][e] = prims::exp2_approx(fmaf(s[j][e], scale_log2, -m[0]));
      s[j][2 + e] = prims::exp2_approx(fmaf(s[j][2 + e], scale_log2, -m[1]));
      sum[0] += s[j][e];
      sum[1] += s[j][2 + e];
    }
  }
}

// exp_rows, then o rescaled by f[r] per row, the two interleaved (FLASHKIT_MLA_EXP_MIX): after the
// four exponentials of s[j], the 16 accumulators o[*][j][*]; row sums over pairs.
template <int kMix>
__device__ __forceinline__ void exp_rows_scale_o(float (&s)[8][4], float scale_log2, const float (&m)[2],
                                                 float (&sum)[2], float (&o)[4][8][4], const float (&f)[2]) {
  sum[0] = sum[1] = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    s[j][0] = prims::exp2_approx(fmaf(s[j][0], scale_log2, -m[0]));
    s[j][1] = prims::exp2_approx(fmaf(s[j][1], scale_log2, -m[0]));
    s[j][2] = prims::exp2_approx(fmaf(s[j][2], scale_log2, -m[1]));
    s[j][3] = prims::exp2_approx(fmaf(s[j][3], scale_log2, -m[1]));
    // (bit 2: f + 0 * s is f for every finite s; s is in [0, 1] here, or NaN from NaN scores)
    float f0 = f[0], f1 = f[1];
    if constexpr ((kMix & 4) != 0) {
      f0 = fmaf(s[j][0], 0.f, f0);
      f1 = fmaf(s[j][2], 0.f, f1);
    }
#pragma unroll
    for (int dc = 0; dc < 4; ++dc) {
      o[dc][j][0] *= f0;
      o[dc][j][1] *= f0;
      o[dc][j][2] *= f1;
      o[dc][j][3] *= f1;
    }
    sum[0] += s[j][0] + s[j][1];
    sum[1] += s[j][2] + s[j][3];
  }
}

__device__ __forceinline__ void scale_o(float (&o)[4][8][4], const float (&f)[2]) {
#pragma unroll
  for (int dc = 0; dc < 4; ++dc)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      o[dc][j][0] *= f[0];
      o[dc][j][1] *= f[0];
      o[dc][j][2] *= f[1];
      o[dc][j][3] *= f[1];
    }
}

template <int R, int C>
__device__ __forceinline__ void fence_o(float (&o)[4][R][C]) {
#pragma unroll
  for (int dc = 0; dc < 4; ++dc) prims::fence_operands(o[dc]);
}

// The shared running max (log2 units) of this thread's two rows: new max with this
// block's row max `mx`, the factor 2^(old - new) for what was accumulated before, both
// published (one lane per quad) for the other warpgroup: the max in sM, the factor in
// `scale_out` (sScale0 or sScale1).
template <class Tr>
__device__ __forceinline__ void update_running_max(const Piece<Tr>& pc, const float (&mx)[2], float* scale_out,
                                                   float (&m_new)[2], float (&sc)[2], int t) {
  float* sM = reinterpret_cast<float*>(pc.smem + Tr::kSmemM);
  const int rows[2] = {pc.row0, pc.row0 + 8};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float m_old = sM[rows[r]];
    m_new[r] = fmaxf(m_old, mx[r]);
    sc[r] = prims::exp2_approx(m_old - m_new[r]);
  }
  __syncwarp();  // every lane of the quad has read sM before it changes
  if (t == 0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      sM[rows[r]] = m_new[r];
      scale_out[rows[r]] = sc[r];
    }
  }
}

// A 0.0f read from shared memory after a barrier arrival: values that depend on it (the
// softmax's exponentials and rescale factors) are computed after the arrival. ptxas otherwise
// hoists that arithmetic above the BAR.ARV (nothing orders them), delaying the other warpgroup,
// which waits at the matching BAR.SYNC (mla.md "Arrive first").
template <class Tr>
__device__ __forceinline__ float zero_after_arrive(const Piece<Tr>& pc) {
#if FLASHKIT_MLA_ARRIVE_FIRST
  float z;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(z) : "r"(prims::smem_addr(pc.smem + Tr::kSmemZero)) : "memory");
  return z;
#else
  return 0.f;
#endif
}

// A warpgroup's softmax after its scale arrival: with the running max m_new and the factor f for
// what was accumulated before (both fed through zero_after_arrive), S <- 2^(S * scale - m_new),
// l <- l * f + the row sums, O *= f.
template <class Tr>
__device__ __forceinline__ void softmax_after_arrive(const Piece<Tr>& pc, float (&s)[8][4], float scale_log2,
                                                     float (&m_new)[2], float (&f)[2], float (&l)[2],
                                                     float (&o)[4][8][4]) {
  const float z = zero_after_arrive(pc);
  m_new[0] += z;
  m_new[1] += z;
  f[0] += z;
  f[1] += z;
  float sum[2];
  constexpr bool kMix = (Tr::kExpMix & 1) != 0;
  if constexpr (kMix) {
    exp_rows_scale_o<Tr::kExpMix>(s, scale_log2, m_new, sum, o, f);
  } else {
    exp_rows(s, scale_log2, m_new, sum);
  }
  l[0] = l[0] * f[0] + sum[0];
  l[1] = l[1] * f[1] + sum[1];
  if constexpr (!kMix) scale_o(o, f);
}

// Descriptors of one piece (shared-memory addresses are fixed; computed once per CTA).
struct Descs {
  uint64_t q, k[2], v[2], p0, p1;
};

// Where warpgroup 0 reloads buffer 1's columns 0..255 at the end of a pair: calls with at most
// FLASHKIT_MLA_RELOAD_FIRST_ROWS query rows per KV head (two m-blocks) reload them before the
// next Q K^T, whose first chunks have not landed yet there (waiting for them first held the
// reload back by a memory latency, and warpgroup 1's next Q K^T waits for that reload); larger
// ones queue the first part of the next Q K^T behind the last P V and reload after it, which
// keeps the tensor pipe fed where the kernel is compute-bound. Measured (H200, mla.md "Reload
// first"): 4-8 % less time at <= 64 rows, ~2 % at 128, +1..6 % at 256 if taken there. 0 = never
// (A/B builds).
#ifndef FLASHKIT_MLA_RELOAD_FIRST_ROWS
#define FLASHKIT_MLA_RELOAD_FIRST_ROWS 128
#endif
__device__ __forceinline__ bool reload_first(const MlaParams& p) {
  return p.rows_per_kv <= FLASHKIT_MLA_RELOAD_FIRST_ROWS;
}

// Buffer 1's columns 0..255 reloaded with block `block` once warpgroup 0's last P V of the pair
// (one commit group, or two quarters with kSplit) has read them; kYounger commit groups were
// issued after it. With kSplit, chunks 0-1 go as soon as the first quarter is done.
template <int kYounger, bool kSplit, class Tr>
__device__ __forceinline__ void reload_after_last_pv(Piece<Tr>& pc, float (&o)[4][8][4], int block, int id) {
  if constexpr (kSplit) {
    prims::wgmma_wait<kYounger + 1>();
    MLA_LOOP_LOAD(pc, 0, 2, 1, block, id);
  }
  prims::wgmma_wait<kYounger>();
  fence_o(o);
  MLA_TR(pc, 5);
  if constexpr (kSplit) {
    MLA_LOOP_LOAD(pc, 2, 4, 1, block, id);
  } else {
    MLA_LOOP_LOAD(pc, 0, 4, 1, block, id);
  }
}

// Warpgroup 0's half of one pair (blocks blk in buffer 0, blk + 1 in buffer 1). kLast: no
// next pair (nothing to prefetch, no next Q K^T).
template <class Tr, bool kLast>
__device__ __forceinline__ void wg0_pair(Piece<Tr>& pc, const Descs& d, int blk, float (&s)[8][4],
                                         float (&o)[4][8][4], float (&l)[2], const uint32_t (&rope)[4][4],
                                         uint32_t& ph0, int t) {
  using T = typename Tr::T;
  float* sScale0 = reinterpret_cast<float*>(pc.smem + Tr::kSmemScale0);
  float* sScale1 = reinterpret_cast<float*>(pc.smem + Tr::kSmemScale1);
  const float sl2 = pc.p.softmax_scale_log2;
  const int r0 = pc.row0, r1 = pc.row0 + 8;
  // (the page-16/32 kernel spilled 4 bytes with the split: pages of >= 64 tokens only)
  constexpr bool kPvSplit = FLASHKIT_MLA_PV_SPLIT != 0 && Tr::kWholeBox;

  int id_a = -1, id_b = -1;  // the next pair's pages (prefetched)
  // FLASHKIT_MLA_LATE_IDS: warpgroup 0 looks them up after its scale arrival (off its softmax's
  // path to that arrival, which warpgroup 1 waits for) instead of first.
  if constexpr (!kLast && !FLASHKIT_MLA_LATE_IDS) {
    id_a = pc.page_id(blk + 2);
    id_b = pc.page_id(blk + 3);
  }

  // Softmax of S_A against the running max.
  MLA_TR(pc, 0);
  mask_block(pc, s, blk, 0, t);
  float mx[2], m_new[2], sc[2];
  row_max(s, sl2, mx);
  update_running_max(pc, mx, sScale0, m_new, sc, t);
  prims::bar_arrive(kBarScale0, Tr::kThreads);  // warpgroup 1 may start its softmax
  if constexpr (!kLast && FLASHKIT_MLA_LATE_IDS) {
    id_a = pc.page_id(blk + 2);
    id_b = pc.page_id(blk + 3);
  }
  softmax_after_arrive(pc, s, sl2, m_new, sc, l, o);
  MLA_TR(pc, 1);

  // O_L += P_A V_A[:, L]
  if constexpr (kLast) pc.zero_v_tail(0, blk, 0, 0);
  uint32_t pa[4][4];
  pack_p<T>(pa, s);
  fence_o(o);
  prims::wgmma_fence();
  issue_pv_regs<Tr>(o, pa, d.v[0], 0);
  prims::wgmma_commit();

  // P_A relative to warpgroup 1's max, for O_R (while the MMAs above run).
  prims::bar_sync(kBarScale1, Tr::kThreads);
  MLA_TR(pc, 2);
  float sc1[2];
  sc1[0] = sScale1[r0];
  sc1[1] = sScale1[r1];
  {
    uint32_t pb[4][4];
#pragma unroll
    for (int ps = 0; ps < 4; ++ps) {
      pb[ps][0] = prims::pack2<T>(s[2 * ps][0] * sc1[0], s[2 * ps][1] * sc1[0]);
      pb[ps][1] = prims::pack2<T>(s[2 * ps][2] * sc1[1], s[2 * ps][3] * sc1[1]);
      pb[ps][2] = prims::pack2<T>(s[2 * ps + 1][0] * sc1[0], s[2 * ps + 1][1] * sc1[0]);
      pb[ps][3] = prims::pack2<T>(s[2 * ps + 1][2] * sc1[1], s[2 * ps + 1][3] * sc1[1]);
    }
    store_p_packed<Tr>(prims::smem_addr(pc.smem + Tr::kSmemP0), pb, pc.lt);
  }
  prims::fence_proxy_async_smem();
  prims::bar_arrive(kBarP0, Tr::kThreads);

  // Columns 0..255 of buffer 0 are free once O_L += P_A V_A[:, L] is done: load them for
  // the next pair. (Waiting for it before the scale barrier, FlashMLA's order, measured
  // -2 % .. +9 % time: kept here.)
  prims::wgmma_wait<0>();
  fence_o(o);
  if constexpr (!kLast) MLA_LOOP_LOAD(pc, 0, 4, 0, blk + 2, id_a);
  MLA_TR(pc, 3);
  // O_L to warpgroup 1's max.
  scale_o(o, sc1);
  l[0] *= sc1[0];
  l[1] *= sc1[1];

  // O_L += P_B V_B[:, L] (P_B from warpgroup 1, in shared memory)
  prims::bar_sync(kBarP1, Tr::kThreads);
  MLA_TR(pc, 4);
  if constexpr (kLast) pc.zero_v_tail(1, blk + 1, 0, 0);
  fence_o(o);
  prims::wgmma_fence();
  if constexpr (kPvSplit && !kLast) {
    // Two 128-column quarters, one commit group each: buffer 1's chunks 0-1 can be reloaded as
    // soon as the first is done (warpgroup 1's next Q K^T waits for them).
    issue_pv_smem_quarter<Tr>(o, d.p1, d.v[1], 0, 0);
    prims::wgmma_commit();
    issue_pv_smem_quarter<Tr>(o, d.p1, d.v[1], 0, 1);
  } else {
    issue_pv_smem<Tr>(o, d.p1, d.v[1], 0);
  }
  prims::wgmma_commit();
  if constexpr (kLast) {
    prims::wgmma_wait<0>();
    fence_o(o);
  } else if (reload_first(pc.p)) {
    // Up to two m-blocks (reload_first): buffer 1's columns 0..255 first, then S_A'.
    reload_after_last_pv<0, kPvSplit>(pc, o, blk + 3, id_b);
    prims::fence_operands(s);
    prims::wgmma_fence();
    issue_qk_part<Tr, 0, 0, Tr::kChunks>(pc, 0, ph0, s, d.q, d.k[0], rope);
    prims::wgmma_commit();
    prims::wgmma_wait<0>();
    prims::fence_operands(s);
    MLA_TR(pc, 6);
    ph0 ^= 1;
  } else {
    // S_A' = Q K_A'^T for the next pair: its chunks 0-3 (loaded early in this pair) queue
    // behind O_L += P_B V_B[:, L]; once that is done, buffer 1's columns 0..255 are free.
    prims::fence_operands(s);
    issue_qk_part<Tr, 0, 0, 4>(pc, 0, ph0, s, d.q, d.k[0], rope);
    prims::wgmma_commit();
    reload_after_last_pv<1, kPvSplit>(pc, o, blk + 3, id_b);
    issue_qk_part<Tr, 0, 4, Tr::kChunks>(pc, 0, ph0, s, d.q, d.k[0], rope);
    prims::wgmma_commit();
    prims::wgmma_wait<0>();
    prims::fence_operands(s);
    MLA_TR(pc, 6);
    ph0 ^= 1;
  }
}

template <class Tr, bool kLast>
__device__ __forceinline__ void wg1_pair(Piece<Tr>& pc, const Descs& d, int blk, float (&s)[8][4],
                                         float (&o)[4][8][4], float (&l)[2], const uint32_t (&rope)[4][4],
                                         uint32_t& ph1, int t) {
  using T = typename Tr::T;
  float* sScale0 = reinterpret_cast<float*>(pc.smem + Tr::kSmemScale0);
  float* sScale1 = reinterpret_cast<float*>(pc.smem + Tr::kSmemScale1);
  const float sl2 = pc.p.softmax_scale_log2;
  const int r0 = pc.row0, r1 = pc.row0 + 8;

  int id_a = -1, id_b = -1;  // the next pair's pages (prefetched)
  if constexpr (!kLast) {
    id_a = pc.page_id(blk + 2);
    id_b = pc.page_id(blk + 3);
  }

  MLA_TR(pc, 0);
  mask_block(pc, s, blk + 1, 1, t);
  float mx[2], m_new[2], sc[2], f[2];
  row_max(s, sl2, mx);
  prims::bar_sync(kBarScale0, Tr::kThreads);
  MLA_TR(pc, 1);
  update_running_max(pc, mx, sScale1, m_new, sc, t);
  f[0] = sc[0] * sScale0[r0];  // O_R still holds the max before warpgroup 0's update
  f[1] = sc[1] * sScale0[r1];
  prims::bar_arrive(kBarScale1, Tr::kThreads);
  softmax_after_arrive(pc, s, sl2, m_new, f, l, o);

  // P_B to shared memory for warpgroup 0, then O_R += P_B V_B[:, R].
  uint32_t pa[4][4];
  pack_p<T>(pa, s);
  // (FLASHKIT_MLA_EXP_MIX bit 1: P_B stored after its P V is issued, so that the O rescale is not
  // scheduled behind the stores; warpgroup 0 reads P_B only after this warpgroup's second P V.)
  constexpr bool kPLate = (Tr::kExpMix & 2) != 0 && !kLast;
  if constexpr (!kPLate) {
    store_p_packed<Tr>(prims::smem_addr(pc.smem + Tr::kSmemP1), pa, pc.lt);
    prims::fence_proxy_async_smem();
  }
  if constexpr (kLast) pc.zero_v_tail(1, blk + 1, 1, 1);
  fence_o(o);
  prims::wgmma_fence();
  issue_pv_regs<Tr>(o, pa, d.v[1], 1);
  prims::wgmma_commit();
  if constexpr (kPLate) {
    store_p_packed<Tr>(prims::smem_addr(pc.smem + Tr::kSmemP1), pa, pc.lt);
    prims::fence_proxy_async_smem();
  }
  MLA_TR(pc, 2);

  // O_R += P_A V_A[:, R] (P_A from warpgroup 0, already relative to m1)
  prims::bar_sync(kBarP0, Tr::kThreads);
  MLA_TR(pc, 3);
  if constexpr (kLast) {
    pc.zero_v_tail(0, blk, 1, 1);
    prims::wgmma_fence();
  }
  issue_pv_smem<Tr>(o, d.p0, d.v[0], 1);
  prims::wgmma_commit();
  // P_B is published only now, so warpgroup 0's O_L += P_B V_B[:, L] queues behind this
  // warpgroup's two P V (FlashMLA's order; measured neutral here, v9).
  prims::bar_arrive(kBarP1, Tr::kThreads);
  prims::wgmma_wait<1>();
  MLA_TR(pc, 4);
  if constexpr (!kLast) MLA_LOOP_LOAD(pc, 4, 9, 1, blk + 3, id_b);
  prims::wgmma_wait<0>();
  fence_o(o);
  MLA_TR(pc, 5);
  if constexpr (!kLast) {
    MLA_LOOP_LOAD(pc, 4, 9, 0, blk + 2, id_a);
    issue_qk<Tr, 1>(pc, ph1, s, d.q, d.k[1], rope);
    MLA_TR(pc, 6);
    ph1 ^= 1;
  }
}

// kFp8: the converters' warpgroup (threads 256 .. 383; `ct` = thread index in it). Warp (h, k) =
// (ct / 64, ct / 32 % 2) dequantizes NoPE chunks cp = 4h + 2k and cp + 1 of every block, in place
// (Traits "kFp8 landing places"): it waits for the raw bytes of either K buffer (whichever lands: the
// MMA warpgroups' request order per buffer is fixed, across buffers it is not), multiplies the e4m3
// values by their group's scale in fp32 and rounds to bf16 (the portable kernel's and the reference's
// arithmetic: bit-identical), writes the rows of the swizzled tile and arrives on each chunk's barrier
// (32 arrivals per chunk: every lane). Exits when the MMA warpgroups are done.
template <class Tr>
__device__ __forceinline__ void fp8_convert_loop(unsigned char* smem, int ct, int ablate) {
  using T = typename Tr::T;
  // (40 registers: no run-time-indexed arrays; store addresses rebuilt per row, not hoisted and spilled)
  const int lane = ct & 31, w = ct >> 5, h = w >> 1, k = w & 1;
  const uint32_t bars = prims::smem_addr(smem + Tr::kSmemBar);
  // this warp's raw-bytes barrier of buffer 0 (+ 32: buffer 1's)
  const uint32_t land = prims::smem_addr(smem + Tr::kSmemLand) + 8 * (2 * h + k);
  const uint32_t done_bar = prims::smem_addr(smem + Tr::kSmemLand) + 8 * Tr::kLandDone;
  const uint32_t k0 = prims::smem_addr(smem + Tr::kSmemK0);
  uint32_t ph0 = 0u, ph1 = 0u;
  for (;;) {
    int v = -1;
    while (v < 0) {  // (warp-uniform: lane 0 decides)
      if (lane == 0) {
        if (prims::mbarrier_test_wait(land, ph0)) {
          v = 0;
        } else if (prims::mbarrier_test_wait(land + 32, ph1)) {
          v = 1;
        } else if (prims::mbarrier_test_wait(done_bar, 0)) {
          v = 2;
        } else {
          __nanosleep(64);
        }
      }
      v = __shfl_sync(0xffffffffu, v, 0);
    }
    if (v == 2) return;
    const int buf = v;
    prims::mbarrier_wait(land + 32 * buf, buf == 0 ? ph0 : ph1);  // every lane's own acquire (complete)
    if (buf == 0) {
      ph0 ^= 1u;
    } else {
      ph1 ^= 1u;
    }
    const uint32_t kb = k0 + buf * Tr::Tile::kBytes;
    if (ablate == 1) {  // (timing only: the tile keeps the raw bytes)
#pragma unroll 1
      for (int cc = 0; cc < 4; ++cc) {
        if (cc / 2 == k) prims::mbarrier_arrive(bars + 8 * (buf * Tr::kChunks + 4 * h + cc));
      }
      continue;
    }
    // Chunks cp (out of place: its bytes lie in cp + 1's rows) and cp + 1 (in place: row t of the tile
    // is token t's raw row, read whole by its own lane first). Lane: tokens lane and lane + 32.
    const int cp = 4 * h + 2 * k;
    const uint32_t raw = kb + (cp + 1) * Tr::kChunkBytes;
    float s2[2];  // the group scale of the two tokens (scales box in chunk cp's rows 0-7)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      asm volatile("ld.shared.f32 %0, [%1];\n"
                   : "=f"(s2[i])
                   : "r"(kb + cp * Tr::kChunkBytes + 16 * (lane + 32 * i) + 4 * (2 * h + k))
                   : "memory");
    }
    __syncwarp();  // every scale read before chunk cp's rows 0-7 are written
#pragma unroll 1
    for (int cc = 0; cc < 2; ++cc) {
      const int c = cp + cc;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int t = lane + 32 * i;
        const uint32_t src = prims::opaque(raw + 128 * t + 64 * cc);
        // The 4 pieces of 16 bytes in the order lane % 4, lane % 4 + 1, ... (consecutive lanes read rows
        // 128 bytes apart: 2-way instead of 8-way bank conflicts); all read before any is written.
        uint32_t wd[4][4];
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                       : "=r"(wd[jj][0]), "=r"(wd[jj][1]), "=r"(wd[jj][2]), "=r"(wd[jj][3])
                       : "r"(src + 16 * ((jj + lane) & 3))
                       : "memory");
        }
        const float s = s2[i];
        const uint32_t dst = prims::opaque(kb + c * Tr::kChunkBytes + t * 128);
        const uint32_t x = uint32_t(t & 7);
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          const uint32_t q = uint32_t((jj + lane) & 3);  // columns 16q .. 16q + 15: units 2q, 2q + 1
#pragma unroll
          for (int v = 0; v < 2; ++v) {
            uint32_t out[4];
#pragma unroll
            for (int e = 0; e < 2; ++e) prims::e4m3x4_scaled<T>(wd[jj][2 * v + e], s, out[2 * e], out[2 * e + 1]);
            asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst + (((2 * q + v) ^ x) << 4)),
                         "r"(out[0]), "r"(out[1]), "r"(out[2]), "r"(out[3])
                         : "memory");
          }
        }
      }
      prims::fence_proxy_async_smem();
      prims::mbarrier_arrive(bars + 8 * (buf * Tr::kChunks + c));  // (32 arrivals: this warp's lanes)
    }
  }
}

// Barrier of the MMA warpgroups' whole-CTA syncs (with kFp8 the converters are not in them).
template <class Tr>
__device__ __forceinline__ void mma_sync_all() {
  if constexpr (Tr::kFp8) {
    prims::bar_sync(7, Tr::kThreads);
  } else {
    __syncthreads();
  }
}

template <class Tr>
__global__ void __launch_bounds__(Tr::kBlockThreads, 1) mla_split_kernel(const __grid_constant__ MlaParams p) {
#if FLASHKIT_MLA_SM90_BODY
  using T = typename Tr::T;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_addr = prims::smem_addr(smem_raw);
  unsigned char* smem = smem_raw + (((raw_addr + 1023u) & ~1023u) - raw_addr);

  // (the warpgroup through a shuffle: warp-uniform for the compiler, so that descriptors
  // derived from it live in uniform registers)
  const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid / 128, 0), lt = tid % 128;
  const int lane = tid % 32, t = lane % 4;
  const int row0 = (lt / 32) * 16 + lane / 4;  // this thread's rows: row0, row0 + 8
  const int m_block = blockIdx.x, kvh = blockIdx.y, part = blockIdx.z;
  const uint32_t bar_q = prims::smem_addr(smem + Tr::kSmemBar) + 8 * (2 * Tr::kChunks);
  float* sM = reinterpret_cast<float*>(smem + Tr::kSmemM);
  float* sL = reinterpret_cast<float*>(smem + Tr::kSmemL);
  T* sQ = reinterpret_cast<T*>(smem + Tr::kSmemQ);

  // Q by TMA (launcher: make_q_tensor_map), one lane, the next piece's Q during this piece's
  // epilogue; else by cp.async from every thread at the piece's start.
  const bool q_tma = Tr::kTma && p.q_tma_heads > 0;
  if (tid == 0) {
    *reinterpret_cast<float*>(smem + Tr::kSmemZero) = 0.f;
    // K chunks: one expect-tx arrival (TMA) or the loading warpgroup's 128 cp.async arrivals
    // (+1 on chunk 0: the bad-row mask, see load_chunks).
    // kFp8: the NoPE chunks get one arrival from each lane of the two converter warps of their half.
    for (int i = 0; i < 2 * Tr::kChunks; ++i)
      prims::mbarrier_init(prims::smem_addr(smem + Tr::kSmemBar) + 8 * i,
                           Tr::kFp8 && i % Tr::kChunks < Tr::kVChunks ? 32
                           : Tr::kTma                                 ? 1
                                                                      : (i % Tr::kChunks == 0 ? 129 : 128));
    // kFp8: the raw bytes' barriers (one expect-tx arrival each) and the done barrier.
    for (int i = 0; i < Tr::kNumLandBars; ++i) prims::mbarrier_init(prims::smem_addr(smem + Tr::kSmemLand) + 8 * i, 1);
    prims::mbarrier_init(bar_q, q_tma ? 1 : Tr::kThreads);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if constexpr (Tr::kTma) {
    if (tid == 0) prims::tma_prefetch_desc(&p.kv_tmap);
    if (tid == 0 && Tr::kFp8) prims::tma_prefetch_desc(&p.kv_tmap_run);
    if (tid == 0 && Tr::kFp8) prims::tma_prefetch_desc(&p.kv_tmap_scales);
    if (tid == 0 && q_tma) prims::tma_prefetch_desc(&p.q_tmap);
  }
  __syncthreads();
  grid_dependency_wait();  // the metadata (and q) may come from the previous kernel
#if FLASHKIT_MLA_TRACE
  const int tr_cta_id = (part * p.h_kv + kvh) * p.m_blocks + m_block;
  if (tid == 0 && tr_cta_id < kTraceMaxCtas) g_mla_cta[tr_cta_id * 2] = mla_gtime();
  const int tr_q4 = max(1, p.num_parts / kTraceCtas);
  const int tr_k = (m_block == 0 && kvh == 0 && part % tr_q4 == 0 && part / tr_q4 < kTraceCtas) ? part / tr_q4 : -1;
  int tr_piece = 0;
  auto tr_piece_at = [&](int point) {
    if (tid == 0 && tr_k >= 0 && tr_piece < kTracePieces)
      g_mla_piece[(tr_k * kTracePieces + tr_piece) * kTracePiecePoints + point] = mla_gtime();
  };
#endif

  const int32_t* sched = p.sched + int64_t(part) * kMlaSchedInts;
  const int begin_b = sched[0], begin_blk = sched[1], end_b_raw = sched[2], end_blk = sched[3];
  const int begin_split = sched[4];
  if (begin_b < 0 || begin_b >= p.batch) return;
  const int end_b = min(end_b_raw, p.batch - 1);
  if constexpr (Tr::kFp8) {
    if (wg == 2) {
      prims::setmaxnreg_dec<Tr::kConvRegs>();
      fp8_convert_loop<Tr>(smem, tid - Tr::kThreads, p.fp8_ablate);
      return;
    }
    prims::setmaxnreg_inc<Tr::kMmaRegs>();
  }

  Descs d;
  d.q = prims::smem_desc_sw128(prims::smem_addr(smem + Tr::kSmemQ), 16, 1024);
  d.k[0] = prims::smem_desc_sw128(prims::smem_addr(smem + Tr::kSmemK0), 16, 1024);
  d.k[1] = prims::smem_desc_sw128(prims::smem_addr(smem + Tr::kSmemK1), 16, 1024);
  d.v[0] = prims::smem_desc_sw128(prims::smem_addr(smem + Tr::kSmemK0), Tr::kChunkBytes, 1024);
  d.v[1] = prims::smem_desc_sw128(prims::smem_addr(smem + Tr::kSmemK1), Tr::kChunkBytes, 1024);
  d.p0 = prims::smem_desc_sw128(prims::smem_addr(smem + Tr::kSmemP0), 16, 1024);
  d.p1 = prims::smem_desc_sw128(prims::smem_addr(smem + Tr::kSmemP1), 16, 1024);

  const int rows_total = p.h_kv * p.rows_per_kv;
  const int R0 = m_block * kMlaBlockM + row0, R1 = R0 + 8;  // kv-head-local rows
  uint32_t phq = 0, ph0 = 0, ph1 = 0;
  // Q rows of this m-block for sequence bq: thread -> row tid / 4, 16-byte pieces
  // tid % 4 + 4i; one arrival per thread on bar_q when they land.
  auto load_q = [&](int bq) {
    if (q_tma) {
      if (tid == 0) {
        const int r0 = m_block * kMlaBlockM, tq0 = r0 / p.ratio, head0 = kvh * p.ratio + (r0 - tq0 * p.ratio);
        prims::mbarrier_arrive_expect_tx(bar_q, Tr::kChunks * Tr::kChunkBytes);
#pragma unroll
        for (int c = 0; c < Tr::kChunks; ++c) {
          prims::tma_load_4d_nohint_if(true, prims::smem_addr(sQ) + c * Tr::kChunkBytes, &p.q_tmap, c * 64, head0, tq0,
                                       bq, bar_q);
        }
      }
      return;
    }
    const int r = tid >> 2;
    const int R = m_block * kMlaBlockM + r;
    const bool ok = R < p.rows_per_kv;
    const T* src = reinterpret_cast<const T*>(p.q);
    if (ok) {
      const int tq = R / p.ratio, hh = R - tq * p.ratio;
      src += int64_t(bq) * p.q_batch_stride + int64_t(tq) * p.q_tok_stride +
             int64_t(kvh * p.ratio + hh) * p.q_head_stride;
    }
#pragma unroll
    for (int i = 0; i < kMlaHeadDim / 8 / 4; ++i) {
      const int col = ((tid & 3) + 4 * i) * 8;
      prims::cp_async_16(sQ + Tr::Tile::offset(r, col), ok ? src + col : src, ok);
    }
    prims::cp_async_mbarrier_arrive(bar_q);
  };
  uint32_t bad = 0;
  // A Q copy for sequence b is in flight (TMA: issued in the previous piece's epilogue, which
  // only ever prefetches b + 1; a piece skipped below drains it).
  bool q_pending = false;
  auto q_drain = [&]() {
    if (q_pending) {
      prims::mbarrier_wait_sleep(bar_q, phq);
      phq ^= 1;
      q_pending = false;
    }
  };

  for (int b = begin_b; b <= end_b; ++b) {
    int len = p.seqlens_k[b];
    if (len < 0 || int64_t(len) > p.capacity) {
      bad |= kMlaErrSeqlen;
      len = len < 0 ? 0 : int(p.capacity);
    }
    const int nb = (len + kMlaBlockN - 1) / kMlaBlockN;
    const int blk_begin = max(b == begin_b ? begin_blk : 0, 0);
    const int blk_end = min(b == end_b_raw ? end_blk : nb, nb);
    const int n_blocks = max(0, blk_end - blk_begin);
    const int s_first = p.num_splits[b];
    const int n_pieces = p.num_splits[b + 1] - s_first;
    const int split = b == begin_b ? begin_split : 0;
    if (n_pieces <= 0 || split < 0 || split >= n_pieces) {  // not planned here
      q_drain();
      continue;
    }
    const bool direct = n_pieces == 1;
#if FLASHKIT_MLA_TRACE
    tr_piece_at(0);
    if (tid == 0 && tr_k >= 0 && tr_piece < kTracePieces)
      g_mla_piece_pairs[tr_k * kTracePieces + tr_piece] = (max(0, min(b == end_b_raw ? end_blk : 1 << 30, (len + 63) / 64) - max(b == begin_b ? begin_blk : 0, 0)) + 1) / 2;
#endif
    const int slot = s_first + split;
    if (!direct && (slot < 0 || slot >= p.max_partials)) {
      q_drain();
      continue;
    }

    Piece<Tr> pc{p, smem, b, kvh};
    pc.load_end = min(len, blk_end * kMlaBlockN);
    pc.lt = lt;
    pc.row0 = row0;
    pc.bt = p.block_table + int64_t(b) * p.bt_row_stride;
    pc.bad = 0;
    {
      const int rr[2] = {R0, R1};
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        int vis = len;
        if (p.causal && rr[r] < p.rows_per_kv) vis = len - (p.s_q - 1 - rr[r] / p.ratio);
        pc.lim[r] = min(vis, pc.load_end);
      }
      // Rows of the whole CTA: the last query token sees the most, the first the least.
      const int first_row = m_block * kMlaBlockM;
      const int t_min = min(first_row, p.rows_per_kv - 1) / p.ratio;
      pc.mask_from = p.causal ? min(len - (p.s_q - 1 - t_min), pc.load_end) : pc.load_end;
    }

    float o[4][8][4];
#pragma unroll
    for (int dc = 0; dc < 4; ++dc)
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[dc][j][e] = 0.f;
    float l[2] = {0.f, 0.f};

#if FLASHKIT_MLA_STAGED_O
    if (tid < kMlaBlockM) prims::bulk_wait_group_read<0>();  // the previous piece's O copies
#endif
    mma_sync_all<Tr>();  // the previous piece is done with shared memory
#if FLASHKIT_MLA_TRACE
    tr_piece_at(5);
#endif
    if (n_blocks > 0) {
      if (tid < kMlaBlockM) sM[tid] = kInitMax;
      if (!q_pending) load_q(b);
      q_pending = false;  // (waited for below)
      // The first pair of blocks.
      {
        // (Loading these two before the barrier above was neutral: mla.md "The first pair's page ids".)
        const int id_a = pc.page_id(blk_begin), id_b = pc.page_id(blk_begin + 1);
#if FLASHKIT_MLA_TRACE
        // (a shared-memory store that reads both ids: the time is taken once they have returned)
        if (tid == 0)
          asm volatile("st.volatile.shared.v2.s32 [%0], {%1, %2};\n" ::"r"(prims::smem_addr(smem + Tr::kSmemZero + 8)),
                       "r"(id_a), "r"(id_b)
                       : "memory");
        tr_piece_at(11);  // thread 0's page ids of the first pair returned
#endif
        if (wg == 0) {
          pc.template load_chunks<0, 4>(0, blk_begin, id_a);
          pc.template load_chunks<0, 4>(1, blk_begin + 1, id_b);
        } else {
          pc.template load_chunks<4, 9>(0, blk_begin, id_a);
          pc.template load_chunks<4, 9>(1, blk_begin + 1, id_b);
        }
      }
#if FLASHKIT_MLA_TRACE
      tr_piece_at(10);  // thread 0's copies of the first pair issued (its page-id loads returned)
#endif
      prims::mbarrier_wait_sleep(bar_q, phq);
      phq ^= 1;
#if FLASHKIT_MLA_TRACE
      tr_piece_at(6);
#endif
      // RoPE columns of Q into registers (the A operand of the last Q K^T k-steps).
      uint32_t rope[4][4];
      {
        const int mat = lane / 8;
        const int r = (lt / 32) * 16 + (lane % 8) + 8 * (mat % 2);
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          const int col = (Tr::kChunks - 1) * 64 + ks * 16 + 8 * (mat / 2);
          prims::ldmatrix_x4(rope[ks], prims::smem_addr(sQ + Tr::Tile::offset(r, col)));
        }
      }
      prims::fence_proxy_async_smem();
      mma_sync_all<Tr>();  // RoPE registers loaded everywhere (sP1 overwrites that chunk); sM set
#if FLASHKIT_MLA_TRACE
      tr_piece_at(7);
#endif

      float s[8][4];
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[j][e] = 0.f;
      const int n_pairs = (n_blocks + 1) / 2;
#if FLASHKIT_MLA_TRACE
      // Traced: m-block 0 of kv head 0 of parts 0, 40, 80, 120, the first piece only.
      const int tr_cta = b == begin_b ? tr_k : -1;
      auto trace_at = [&](int i) -> unsigned long long* {
        const int k = i - kTraceFirstPair;
        if (tr_cta < 0 || tr_cta >= kTraceCtas || k < 0 || k >= kTracePairs) return nullptr;
        return g_mla_trace + ((tr_cta * 2 + wg) * kTracePairs + k) * kTracePoints;
      };
#define MLA_TRACE_PAIR(i) pc.tr = trace_at(i)
#else
#define MLA_TRACE_PAIR(i) \
  do {                    \
  } while (0)
#endif
      if (wg == 0) {
        issue_qk<Tr, 0>(pc, ph0, s, d.q, d.k[0], rope);
        ph0 ^= 1;
#if FLASHKIT_MLA_TRACE
        tr_piece_at(1);
#endif
        for (int i = 0; i < n_pairs - 1; ++i) {
          MLA_TRACE_PAIR(i);
          wg0_pair<Tr, false>(pc, d, blk_begin + 2 * i, s, o, l, rope, ph0, t);
        }
        MLA_TRACE_PAIR(-1);
        wg0_pair<Tr, true>(pc, d, blk_begin + 2 * (n_pairs - 1), s, o, l, rope, ph0, t);
#if FLASHKIT_MLA_TRACE
        tr_piece_at(2);
#endif
      } else {
        issue_qk<Tr, 1>(pc, ph1, s, d.q, d.k[1], rope);
        ph1 ^= 1;
        for (int i = 0; i < n_pairs - 1; ++i) {
          MLA_TRACE_PAIR(i);
          wg1_pair<Tr, false>(pc, d, blk_begin + 2 * i, s, o, l, rope, ph1, t);
        }
        MLA_TRACE_PAIR(-1);
        wg1_pair<Tr, true>(pc, d, blk_begin + 2 * (n_pairs - 1), s, o, l, rope, ph1, t);
      }
    }
    bad |= pc.bad;

    // Epilogue: total row sums over both warpgroups, normalize, write.
    l[0] = prims::quad_sum(l[0]);
    l[1] = prims::quad_sum(l[1]);
    if (t == 0) {
      sL[wg * 64 + row0] = l[0];
      sL[wg * 64 + row0 + 8] = l[1];
    }
    if (q_tma) prims::fence_proxy_async_smem();  // P1's stores (in Q's RoPE chunk) before the next Q's copy
    mma_sync_all<Tr>();
    // Both warpgroups are done with Q (and P1): the next sequence's Q copy runs during this
    // epilogue (FlashMLA's order). A piece that then turns out to have nothing to do leaves it
    // for q_drain.
    if (q_tma && b < end_b) {
      q_drain();  // a copy for b itself, left by a piece with no blocks
      load_q(b + 1);
      q_pending = true;
    }
#if FLASHKIT_MLA_TRACE
    tr_piece_at(3);
#endif
    float inv[2], lse[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + 8 * r;
      const float sum = n_blocks > 0 ? sL[row] + sL[64 + row] : 0.f;
      const float m = n_blocks > 0 ? sM[row] : kInitMax;
      inv[r] = sum > 0.f ? 1.f / sum : 0.f;
      // natural-log LSE; a row that saw no key: +inf (final) / -inf (partial)
      lse[r] = sum > 0.f ? (m + __log2f(sum)) * 0.69314718055994531f : (direct ? INFINITY : -INFINITY);
    }
    const int rr[2] = {R0, R1};
    // FLASHKIT_MLA_STAGED_O: O through shared memory (the K buffers, free now: every load
    // was waited for) and one bulk copy per row, which runs on while the CTA goes on to its
    // next piece (that waits for the copies' reads of shared memory before it loads K). The
    // rows are 16-byte aligned: validate_mla_decode requires it of out's pointer and strides,
    // and the workspace's partial rows are 2 KB apart from a 256-byte-aligned start.
    constexpr bool o_bulk = FLASHKIT_MLA_STAGED_O != 0;
    // A sequence's final output with an out map (launcher: make_o_tensor_map): staged in the
    // 128-byte-swizzled layout (8 chunks of 64 columns, as the K tiles) and stored by 8 TMA copies
    // from one lane instead of 64 row copies (FlashMLA's store of a final output). The page >= 64
    // kernel only: in the page-16/32 one the third staging path cost 8 bytes of spills.
    const bool o_tma = Tr::kWholeBox && direct && p.o_tma_heads > 0;
    using OTile = tiles::Swizzle128Tile<T, kMlaBlockM, kMlaHeadDimV>;
    static_assert(OTile::kBytes <= Tr::Tile::kBytes, "O's swizzled staging fits the first K buffer");
    if constexpr (o_bulk) {
      const uint32_t so = prims::smem_addr(smem + Tr::kSmemK0);
      if (o_tma) {
        // OTile::offset(row, col) for this thread's rows row0 + 8 r and columns wg * 256 + dc * 64
        // + j * 8 + 2 t: chunk wg * 4 + dc, 16-byte unit j ^ (row0 % 8), byte 4 t within it.
        const uint32_t base = so + row0 * 128 + 4 * t, g16 = (row0 % 8) * 16;
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
          for (int dc = 0; dc < 4; ++dc)
#pragma unroll
            for (int j = 0; j < 8; ++j) {
              st_shared_u32(base + (wg * 4 + dc) * OTile::kBlockBytes + r * 1024 + ((j * 16) ^ g16),
                            prims::pack2<T>(o[dc][j][2 * r] * inv[r], o[dc][j][2 * r + 1] * inv[r]));
            }
      } else {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row0 + 8 * r;
#pragma unroll
        for (int dc = 0; dc < 4; ++dc)
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const int col = wg * 256 + dc * 64 + j * 8 + 2 * t;
            const float x0 = o[dc][j][2 * r] * inv[r], x1 = o[dc][j][2 * r + 1] * inv[r];
            if (direct) {
              st_shared_u32(so + row * Tr::kORowBytesOut + col * int(sizeof(T)), prims::pack2<T>(x0, x1));
            } else {
              asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(so + row * Tr::kORowBytesPart + col * 4),
                           "f"(x0), "f"(x1)
                           : "memory");
            }
          }
      }
      }
      prims::fence_proxy_async_smem();  // the generic-proxy stores, before the bulk copies read them
      mma_sync_all<Tr>();
#if FLASHKIT_MLA_TRACE
      tr_piece_at(8);
#endif
      if (o_tma) {
        if (tid == 0) {
          const int r0 = m_block * kMlaBlockM, tq0 = r0 / p.ratio, head0 = kvh * p.ratio + (r0 - tq0 * p.ratio);
#pragma unroll
          for (int c = 0; c < kMlaHeadDimV / 64; ++c) {
            prims::tma_store_4d(&p.o_tmap, so + c * OTile::kBlockBytes, c * 64, head0, tq0, b);
          }
          prims::bulk_commit_group();
        }
      } else if (tid < kMlaBlockM) {
        const int R = m_block * kMlaBlockM + tid;
        if (R < p.rows_per_kv) {
          if (direct) {
            const int tq = R / p.ratio, head = kvh * p.ratio + (R - tq * p.ratio);
            T* out = reinterpret_cast<T*>(p.o) + int64_t(b) * p.o_batch_stride + int64_t(tq) * p.o_tok_stride +
                     int64_t(head) * p.o_head_stride;
            prims::bulk_store(out, so + tid * Tr::kORowBytesOut, kMlaHeadDimV * sizeof(T));
          } else {
            const int64_t prow = int64_t(slot) * rows_total + int64_t(kvh) * p.rows_per_kv + R;
            prims::bulk_store(p.part_o + prow * kMlaHeadDimV, so + tid * Tr::kORowBytesPart, kMlaHeadDimV * 4);
          }
        }
        prims::bulk_commit_group();
      }
#if FLASHKIT_MLA_TRACE
      tr_piece_at(9);
#endif
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int R = rr[r];
      if (R >= p.rows_per_kv) continue;
      const int tq = R / p.ratio, head = kvh * p.ratio + (R - tq * p.ratio);
      const int64_t prow = int64_t(slot) * rows_total + int64_t(kvh) * p.rows_per_kv + R;
      if constexpr (!o_bulk) {  // O from the fragments with register stores
#pragma unroll
        for (int dc = 0; dc < 4; ++dc)
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const int col = wg * 256 + dc * 64 + j * 8 + 2 * t;
            const float x0 = o[dc][j][2 * r] * inv[r], x1 = o[dc][j][2 * r + 1] * inv[r];
            if (direct) {
              T* out = reinterpret_cast<T*>(p.o) + int64_t(b) * p.o_batch_stride + int64_t(tq) * p.o_tok_stride +
                       int64_t(head) * p.o_head_stride;
              *reinterpret_cast<uint32_t*>(out + col) = prims::pack2<T>(x0, x1);
            } else {
              *reinterpret_cast<float2*>(p.part_o + prow * kMlaHeadDimV + col) = make_float2(x0, x1);
            }
          }
      }
      if (wg == 0 && t == 0) {
        if (direct) {
          p.lse[(int64_t(b) * p.h_q + head) * p.s_q + tq] = lse[r];
        } else {
          p.part_lse[prow] = lse[r];
        }
      }
    }
#if FLASHKIT_MLA_TRACE
    tr_piece_at(4);
    ++tr_piece;
#endif
  }
#if FLASHKIT_MLA_STAGED_O
  if (tid < kMlaBlockM) prims::bulk_wait_group<0>();  // the O copies are done before the CTA exits
#endif
  q_drain();  // no copy into shared memory outlives the CTA
  if constexpr (Tr::kFp8) {
    // Every block this CTA loaded was waited for (and so converted): the converters may go.
    if (tid == 0) prims::mbarrier_arrive(prims::smem_addr(smem + Tr::kSmemLand) + 8 * Tr::kLandDone);
  }
#if FLASHKIT_MLA_TRACE
  if (tid == 0 && tr_cta_id < kTraceMaxCtas) g_mla_cta[tr_cta_id * 2 + 1] = mla_gtime();
#endif
  if (bad != 0) report_device_error(p.errors, bad);
#undef MLA_TRACE_PAIR
#endif  // FLASHKIT_MLA_SM90_BODY
}

}  // namespace flashkit::mla_sm90
