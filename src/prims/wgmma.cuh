// Hopper warpgroup MMA (wgmma.mma_async, sm_90a only) and its shared-memory descriptors.
// PTX ISA: "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions".
//
// One wgmma is issued by a whole warpgroup (4 warps, 128 threads). For m64nNk16 with fp32
// accumulators, warp w of the warpgroup owns rows 16w..16w+15 of the 64-row tile and its
// accumulator registers follow the mma.sync m16n8 C layout repeated over the N/8 column
// tiles: d[j][0..1] = (row g, cols 8j+2t..+1), d[j][2..3] = (row g+8, same cols), with
// g = lane/4, t = lane%4. So the online softmax and masking written for mma.sync C fragments
// apply unchanged, and two adjacent column tiles of P packed to 16 bits are the register A
// operand of the next wgmma (same layout as the mma.sync A fragment).
//
// Wrapped: N = 64 (32 accumulators per asm statement), N = 128, 192 and 256; a tile of
// another width is issued as several N = 64 wgmmas on shifted descriptors.
//
// Operands in shared memory use the 128-byte swizzle (tiles/smem_swizzle.cuh): rows of
// 128 bytes, 8-row atoms of 1024 bytes, 16-byte chunk index XOR (row % 8).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace flashkit::prims {

// Shared-memory matrix descriptor (64 bits): start address >> 4 in bits 0-13, leading-
// dimension byte offset >> 4 in bits 16-29, stride-dimension byte offset >> 4 in bits 32-45,
// base offset 0 (atoms are 1024-byte aligned), swizzle mode in bits 62-63 (1 = 128 B).
// For the layouts used here both operand kinds step by `sbo` = 1024 bytes from one 8-row
// group to the next: K-major (Q, K: 8 rows of the M/N dimension) and MN-major (V: 8 rows of
// the K dimension, N = 64 = one 128-byte row, so the leading offset is never used).
__device__ __forceinline__ uint64_t smem_desc_sw128(uint32_t smem_byte_addr, uint32_t lbo_bytes,
                                                    uint32_t sbo_bytes) {
  uint64_t d = 0;
  d |= uint64_t((smem_byte_addr & 0x3FFFF) >> 4);
  d |= uint64_t((lbo_bytes >> 4) & 0x3FFF) << 16;
  d |= uint64_t((sbo_bytes >> 4) & 0x3FFF) << 32;
  d |= uint64_t(1) << 62;
  return d;
}

// Orders register accesses before the next wgmma (required when its accumulators or
// A registers were written by ordinary instructions since the last wgmma).
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Warpgroup register reconfiguration (sm_90a): every thread of the warpgroup executes it;
// the budget moves between warpgroups of the CTA (a producer gives, consumers take).
// A setmaxnreg split (registers per thread of each warpgroup, summed) fits a CTA of `threads`: .inc only takes
// registers the CTA's own warpgroups released with .dec, so the bound is the launch's allocation (65536 / threads per
// thread, in steps of 8: 168 at 384 threads, 128 at 512), not the SM's 65536. A split past it hangs at the .inc
// (the backward's first producer build, 32 + 2 x 240 = 512 > 504 at 384 threads, docs/kernels/bwd.md).
constexpr bool setmaxnreg_split_fits(int threads, int regs_summed_over_warpgroups) {
  return 128 * regs_summed_over_warpgroups <= threads * (65536 / threads / 8 * 8);
}
static_assert(setmaxnreg_split_fits(384, 24 + 2 * 240) && !setmaxnreg_split_fits(384, 32 + 2 * 240) &&
                  setmaxnreg_split_fits(512, 32 + 3 * 160),
              "setmaxnreg_split_fits: 504 at 384 threads, 512 at 512");
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Makes shared-memory writes of the generic proxy (st.shared, cp.async) visible to the
// async proxy that wgmma reads through. Each writing thread fences, then a barrier.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Keeps the compiler from moving reads/writes of an accumulator across wgmma issue/wait.
template <int R, int C>
__device__ __forceinline__ void fence_operands(float (&x)[R][C]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < C; ++j) asm volatile("" : "+f"(x[i][j])::"memory");
}
// The same for 16-bit A operands in registers (RS wgmma): keeps them live and unmodified
// until this point (after the wait that retires the wgmma reading them).
template <int R, int C>
__device__ __forceinline__ void fence_operands(uint32_t (&x)[R][C]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < C; ++j) asm volatile("" : "+r"(x[i][j])::"memory");
}

// d (64 x 64, fp32) (+)= A (64 x 16, shared, K-major) * B (16 x 64, shared, K-major).
// `accumulate` = 0 overwrites d.
template <typename T>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b,
                                                   int accumulate);
// d (64 x 64, fp32) += A (64 x 16, registers) * B (16 x 64, shared, MN-major: V stored
// [key][d] with d contiguous, transposed by the hardware).
template <typename T>
__device__ __forceinline__ void wgmma_m64n64k16_rs_tnspb(float (&d)[8][4], const uint32_t (&a)[4],
                                                         uint64_t desc_b);

template <>
__device__ __forceinline__ void wgmma_m64n64k16_ss<__half>(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b,
                                                       int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma_m64n64k16_rs_tnspb<__half>(float (&d)[8][4], const uint32_t (&a)[4],
                                                             uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

template <>
__device__ __forceinline__ void wgmma_m64n64k16_ss<__nv_bfloat16>(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b,
                                                       int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wgmma_m64n64k16_rs_tnspb<__nv_bfloat16>(float (&d)[8][4], const uint32_t (&a)[4],
                                                             uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}


// The 32 accumulator operands of one m64n64 wgmma (d[8][4]) as inline-asm outputs.
#define FLASHKIT_WGMMA_D32(d)                                                                    \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),     \
      "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), \
      "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), \
      "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), \
      "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), \
      "+f"(d[7][2]), "+f"(d[7][3])
#define FLASHKIT_WGMMA_DREGS                                                                     \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"

// The asm bodies of the forms below, once per element-type name TY ("f16" or "bf16"). The
// scale-d predicate is set from the `acc` operand where the macro has one, else from a constant 1
// (those forms always accumulate).
#define FLASHKIT_WGMMA_N64_RS(TY, d, a, desc_b, acc)                                       \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                 \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " FLASHKIT_WGMMA_DREGS \
               ", {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"                               \
               : FLASHKIT_WGMMA_D32(d)                                                      \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(acc))
#define FLASHKIT_WGMMA_N64_SS_TNSPB(TY, d, desc_a, desc_b)                                 \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                 \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " FLASHKIT_WGMMA_DREGS \
               ", %32, %33, p, 1, 1, 0, 1;\n}\n"                                              \
               : FLASHKIT_WGMMA_D32(d)                                                      \
               : "l"(desc_a), "l"(desc_b), "r"(1))

#define FLASHKIT_WGMMA_N64_SS_TNSPAB(TY, d, desc_a, desc_b)                                \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                 \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " FLASHKIT_WGMMA_DREGS \
               ", %32, %33, p, 1, 1, 1, 1;\n}\n"                                              \
               : FLASHKIT_WGMMA_D32(d)                                                      \
               : "l"(desc_a), "l"(desc_b), "r"(1))

// d (64 x 64, fp32) += -A * B, both K-major (imm-scale-a -1), always accumulating (the backward's dP^T from a
// delta-filled accumulator: FLASHKIT_BWD_PP_DP_DELTA, kernel_pp.cuh).
#define FLASHKIT_WGMMA_N64_SS_NEGA(TY, d, desc_a, desc_b)                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                 \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " FLASHKIT_WGMMA_DREGS \
               ", %32, %33, p, -1, 1, 0, 0;\n}\n"                                             \
               : FLASHKIT_WGMMA_D32(d)                                                      \
               : "l"(desc_a), "l"(desc_b), "r"(1))
template <typename T>
__device__ __forceinline__ void wgmma_m64n64k16_ss_nega(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (__is_same(T, __half)) {
    FLASHKIT_WGMMA_N64_SS_NEGA("f16", d, desc_a, desc_b);
  } else {
    FLASHKIT_WGMMA_N64_SS_NEGA("bf16", d, desc_a, desc_b);
  }
}

// d (64 x 64, fp32) += A (64 x 16, shared, MN-major: stored [k][m] with m contiguous, e.g.
// dS^T [key][row] in the backward's dQ = dS K) * B (16 x 64, shared, MN-major). Both
// transposed by the hardware. Always accumulates.
template <typename T>
__device__ __forceinline__ void wgmma_m64n64k16_ss_tnspab(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (__is_same(T, __half)) {
    FLASHKIT_WGMMA_N64_SS_TNSPAB("f16", d, desc_a, desc_b);
  } else {
    FLASHKIT_WGMMA_N64_SS_TNSPAB("bf16", d, desc_a, desc_b);
  }
}

// The first k-step of a chain: d = A * B, both from shared memory (kTransA / kTransB: the
// operand is MN-major, transposed by the hardware). d is an asm *output* here ("=f", scale-d
// = 0), so the compiler does not keep d's previous value alive up to this instruction: the
// "+f" forms above make an accumulator that is overwritten at the start of each iteration
// occupy its 32 registers through the whole loop. Later k-steps use the accumulating forms.
#define FLASHKIT_WGMMA_D32_OUT(d)                                                                \
  "=f"(d[0][0]), "=f"(d[0][1]), "=f"(d[0][2]), "=f"(d[0][3]), "=f"(d[1][0]), "=f"(d[1][1]),     \
      "=f"(d[1][2]), "=f"(d[1][3]), "=f"(d[2][0]), "=f"(d[2][1]), "=f"(d[2][2]), "=f"(d[2][3]), \
      "=f"(d[3][0]), "=f"(d[3][1]), "=f"(d[3][2]), "=f"(d[3][3]), "=f"(d[4][0]), "=f"(d[4][1]), \
      "=f"(d[4][2]), "=f"(d[4][3]), "=f"(d[5][0]), "=f"(d[5][1]), "=f"(d[5][2]), "=f"(d[5][3]), \
      "=f"(d[6][0]), "=f"(d[6][1]), "=f"(d[6][2]), "=f"(d[6][3]), "=f"(d[7][0]), "=f"(d[7][1]), \
      "=f"(d[7][2]), "=f"(d[7][3])
#define FLASHKIT_WGMMA_N64_SS_FIRST(TY, d, desc_a, desc_b, TA, TB)                          \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                 \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " FLASHKIT_WGMMA_DREGS \
               ", %32, %33, p, 1, 1, " TA ", " TB ";\n}\n"                                     \
               : FLASHKIT_WGMMA_D32_OUT(d)                                                  \
               : "l"(desc_a), "l"(desc_b), "r"(0))

template <typename T, bool kTransA, bool kTransB>
__device__ __forceinline__ void wgmma_m64n64k16_ss_first(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b) {
  constexpr bool h = __is_same(T, __half);
  if constexpr (!kTransA && !kTransB) {
    if constexpr (h) FLASHKIT_WGMMA_N64_SS_FIRST("f16", d, desc_a, desc_b, "0", "0");
    else FLASHKIT_WGMMA_N64_SS_FIRST("bf16", d, desc_a, desc_b, "0", "0");
  } else if constexpr (!kTransA) {  // K-major A, MN-major B
    if constexpr (h) FLASHKIT_WGMMA_N64_SS_FIRST("f16", d, desc_a, desc_b, "0", "1");
    else FLASHKIT_WGMMA_N64_SS_FIRST("bf16", d, desc_a, desc_b, "0", "1");
  } else {
    static_assert(kTransA && kTransB, "the forms used: K-major x K-major, K-major x MN-major, MN-major x MN-major");
    if constexpr (h) FLASHKIT_WGMMA_N64_SS_FIRST("f16", d, desc_a, desc_b, "1", "1");
    else FLASHKIT_WGMMA_N64_SS_FIRST("bf16", d, desc_a, desc_b, "1", "1");
  }
}

// d (64 x 64, fp32) (+)= A (64 x 16, registers) * B (16 x 64, shared, K-major: stored
// [n][k] with k contiguous, like K in Q K^T). `accumulate` = 0 overwrites d (the forward's Q K^T with
// Q in registers at D 192); the three-argument form always accumulates.
template <typename T>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc_b,
                                                   int accumulate) {
  if constexpr (__is_same(T, __half)) {
    FLASHKIT_WGMMA_N64_RS("f16", d, a, desc_b, accumulate);
  } else {
    FLASHKIT_WGMMA_N64_RS("bf16", d, a, desc_b, accumulate);
  }
}
template <typename T>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc_b) {
  wgmma_m64n64k16_rs<T>(d, a, desc_b, 1);
}

// d (64 x 64, fp32) += A (64 x 16, shared, K-major) * B (16 x 64, shared, MN-major: stored
// [k][n] with n contiguous, like V in P V; transposed by the hardware). Always accumulates.
template <typename T>
__device__ __forceinline__ void wgmma_m64n64k16_ss_tnspb(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (__is_same(T, __half)) {
    FLASHKIT_WGMMA_N64_SS_TNSPB("f16", d, desc_a, desc_b);
  } else {
    FLASHKIT_WGMMA_N64_SS_TNSPB("bf16", d, desc_a, desc_b);
  }
}

// m64n128k16 (64 accumulators per thread, d[j][e] as for n64 over 16 column tiles). One
// instruction instead of two n64 ones on shifted descriptors: an SS Q K^T at N = 64 reads
// the 64 x 16 A tile (2 KB) and a 2 KB B tile from shared memory per 32 tensor-core cycles,
// i.e. the whole 128 B/clk of an SM's shared-memory bandwidth; at N = 128 the A tile is read
// once for twice the work (96 B/clk). Same register layout as two n64 blocks side by side.
#define FLASHKIT_WGMMA_D64(d) "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
#define FLASHKIT_WGMMA_DREGS64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define FLASHKIT_WGMMA_N128_SS(TY, d, desc_a, desc_b, acc)                                       \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                     \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " FLASHKIT_WGMMA_DREGS64 \
               ", %64, %65, p, 1, 1, 0, 0;\n}\n"                                                \
               : FLASHKIT_WGMMA_D64(d)                                                          \
               : "l"(desc_a), "l"(desc_b), "r"(acc))
#define FLASHKIT_WGMMA_N128_RS(TY, d, a, desc_b, TRANS_B, acc)                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                     \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " FLASHKIT_WGMMA_DREGS64 \
               ", {%64, %65, %66, %67}, %68, p, 1, 1, " TRANS_B ";\n}\n"                      \
               : FLASHKIT_WGMMA_D64(d)                                                          \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(acc))

// d (64 x 128, fp32) (+)= A (64 x 16, registers: the mma.sync A fragment layout per warp) * B
// (16 x 128, shared, K-major, like K in Q K^T). `accumulate` = 0 overwrites d. (The forward's
// Q K^T with Q held in registers: FLASHKIT_FWD_RS_Q, kernel_persistent.cuh.)
template <typename T>
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[16][4], const uint32_t (&a)[4], uint64_t desc_b,
                                                    int accumulate) {
  if constexpr (__is_same(T, __half)) {
    FLASHKIT_WGMMA_N128_RS("f16", d, a, desc_b, "0", accumulate);
  } else {
    FLASHKIT_WGMMA_N128_RS("bf16", d, a, desc_b, "0", accumulate);
  }
}

// d (64 x 128, fp32) (+)= A (64 x 16, shared, K-major) * B (16 x 128, shared, K-major: 128
// rows of 128 bytes, 8-row groups `sbo` apart). `accumulate` = 0 overwrites d.
template <typename T>
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b,
                                                    int accumulate) {
  if constexpr (__is_same(T, __half)) {
    FLASHKIT_WGMMA_N128_SS("f16", d, desc_a, desc_b, accumulate);
  } else {
    FLASHKIT_WGMMA_N128_SS("bf16", d, desc_a, desc_b, accumulate);
  }
}

// d (64 x 128) += A (64 x 16, registers) * B (16 x 128, shared, MN-major: 2 atom columns
// `lbo` bytes apart in the descriptor). Always accumulates.
template <typename T>
__device__ __forceinline__ void wgmma_m64n128k16_rs_tnspb(float (&d)[16][4], const uint32_t (&a)[4], uint64_t desc_b) {
  if constexpr (__is_same(T, __half)) {
    FLASHKIT_WGMMA_N128_RS("f16", d, a, desc_b, "1", 1);
  } else {
    FLASHKIT_WGMMA_N128_RS("bf16", d, a, desc_b, "1", 1);
  }
}

// d (64 x 128, fp32) += -A * B: wgmma_m64n128k16_ss with A negated (imm-scale-a -1), always accumulating (the
// backward's dP^T from a delta-filled accumulator: FLASHKIT_BWD_PP_DP_DELTA, kernel_pp.cuh).
#define FLASHKIT_WGMMA_N128_SS_NEGA(TY, d, desc_a, desc_b)                                       \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                     \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " FLASHKIT_WGMMA_DREGS64 \
               ", %64, %65, p, -1, 1, 0, 0;\n}\n"                                               \
               : FLASHKIT_WGMMA_D64(d)                                                          \
               : "l"(desc_a), "l"(desc_b), "r"(1))
template <typename T>
__device__ __forceinline__ void wgmma_m64n128k16_ss_nega(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (__is_same(T, __half)) {
    FLASHKIT_WGMMA_N128_SS_NEGA("f16", d, desc_a, desc_b);
  } else {
    FLASHKIT_WGMMA_N128_SS_NEGA("bf16", d, desc_a, desc_b);
  }
}

// m64n128k16, both operands in shared memory, B MN-major, A K-major (TA 0) or MN-major (TA 1;
// an immediate operand).
#define FLASHKIT_WGMMA_N128_SS_TB(TY, d, desc_a, desc_b, TA)                                      \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                     \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " FLASHKIT_WGMMA_DREGS64 \
               ", %64, %65, p, 1, 1, %67, 1;\n}\n"                                               \
               : FLASHKIT_WGMMA_D64(d)                                                          \
               : "l"(desc_a), "l"(desc_b), "r"(1), "n"(TA))

// d (64 x 128) += A (64 x 16, shared) * B (16 x 128, shared, MN-major: 2 atom columns `lbo`
// bytes apart in the descriptor), A K-major (kTnspA 0: the MLA kernel's P V) or MN-major
// (kTnspA 1: the key-split backward's dV += P^T dO and dK += dS^T Q with P and dS stored
// [row][key], A read once per k-step for both 64-column halves). Always accumulates.
template <typename T, int kTnspA>
__device__ __forceinline__ void wgmma_m64n128k16_ss_tb(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b) {
  static_assert(kTnspA == 0 || kTnspA == 1, "A is K-major (0) or MN-major (1)");
  if constexpr (__is_same(T, __half)) {
    FLASHKIT_WGMMA_N128_SS_TB("f16", d, desc_a, desc_b, kTnspA);
  } else {
    FLASHKIT_WGMMA_N128_SS_TB("bf16", d, desc_a, desc_b, kTnspA);
  }
}

// m64n192k16 (96 accumulators per thread, d[j][e] as for n64 over 24 column tiles): the
// forward's P V at D = 192 (three atom columns of V), one instruction per k-step instead of
// three n64 ones that each re-read the register A operand.
#define FLASHKIT_WGMMA_D96(d) "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3]), "+f"(d[16][0]), "+f"(d[16][1]), "+f"(d[16][2]), "+f"(d[16][3]), "+f"(d[17][0]), "+f"(d[17][1]), "+f"(d[17][2]), "+f"(d[17][3]), "+f"(d[18][0]), "+f"(d[18][1]), "+f"(d[18][2]), "+f"(d[18][3]), "+f"(d[19][0]), "+f"(d[19][1]), "+f"(d[19][2]), "+f"(d[19][3]), "+f"(d[20][0]), "+f"(d[20][1]), "+f"(d[20][2]), "+f"(d[20][3]), "+f"(d[21][0]), "+f"(d[21][1]), "+f"(d[21][2]), "+f"(d[21][3]), "+f"(d[22][0]), "+f"(d[22][1]), "+f"(d[22][2]), "+f"(d[22][3]), "+f"(d[23][0]), "+f"(d[23][1]), "+f"(d[23][2]), "+f"(d[23][3])
#define FLASHKIT_WGMMA_DREGS96 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}"
#define FLASHKIT_WGMMA_N192_RS_TNSPB(TY, d, a, desc_b)                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"                                     \
               "wgmma.mma_async.sync.aligned.m64n192k16.f32." TY "." TY " " FLASHKIT_WGMMA_DREGS96 \
               ", {%96, %97, %98, %99}, %100, p, 1, 1, 1;\n}\n"                                  \
               : FLASHKIT_WGMMA_D96(d)                                                          \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1))

// d (64 x 192) += A (64 x 16, registers) * B (16 x 192, shared, MN-major: 3 atom columns
// `lbo` bytes apart in the descriptor). Always accumulates.
template <typename T>
__device__ __forceinline__ void wgmma_m64n192k16_rs_tnspb(float (&d)[24][4], const uint32_t (&a)[4], uint64_t desc_b) {
  if constexpr (__is_same(T, __half)) {
    FLASHKIT_WGMMA_N192_RS_TNSPB("f16", d, a, desc_b);
  } else {
    FLASHKIT_WGMMA_N192_RS_TNSPB("bf16", d, a, desc_b);
  }
}

// m64n256k16 (128 accumulators per thread, d[j][e] as for n64 over 32 column tiles): used
// where one A tile multiplies a 256-column B (MLA's P V halves), so A is read once per
// k-step instead of four times.
#define FLASHKIT_WGMMA_D128(d) "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3]), "+f"(d[16][0]), "+f"(d[16][1]), "+f"(d[16][2]), "+f"(d[16][3]), "+f"(d[17][0]), "+f"(d[17][1]), "+f"(d[17][2]), "+f"(d[17][3]), "+f"(d[18][0]), "+f"(d[18][1]), "+f"(d[18][2]), "+f"(d[18][3]), "+f"(d[19][0]), "+f"(d[19][1]), "+f"(d[19][2]), "+f"(d[19][3]), "+f"(d[20][0]), "+f"(d[20][1]), "+f"(d[20][2]), "+f"(d[20][3]), "+f"(d[21][0]), "+f"(d[21][1]), "+f"(d[21][2]), "+f"(d[21][3]), "+f"(d[22][0]), "+f"(d[22][1]), "+f"(d[22][2]), "+f"(d[22][3]), "+f"(d[23][0]), "+f"(d[23][1]), "+f"(d[23][2]), "+f"(d[23][3]), "+f"(d[24][0]), "+f"(d[24][1]), "+f"(d[24][2]), "+f"(d[24][3]), "+f"(d[25][0]), "+f"(d[25][1]), "+f"(d[25][2]), "+f"(d[25][3]), "+f"(d[26][0]), "+f"(d[26][1]), "+f"(d[26][2]), "+f"(d[26][3]), "+f"(d[27][0]), "+f"(d[27][1]), "+f"(d[27][2]), "+f"(d[27][3]), "+f"(d[28][0]), "+f"(d[28][1]), "+f"(d[28][2]), "+f"(d[28][3]), "+f"(d[29][0]), "+f"(d[29][1]), "+f"(d[29][2]), "+f"(d[29][3]), "+f"(d[30][0]), "+f"(d[30][1]), "+f"(d[30][2]), "+f"(d[30][3]), "+f"(d[31][0]), "+f"(d[31][1]), "+f"(d[31][2]), "+f"(d[31][3])
#define FLASHKIT_WGMMA_DREGS128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"

#define FLASHKIT_WGMMA_N256_RS_TNSPB(TY, d, a, desc_b)                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"                                     \
               "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " " FLASHKIT_WGMMA_DREGS128 \
               ", {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"                               \
               : FLASHKIT_WGMMA_D128(d)                                                         \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1))
#define FLASHKIT_WGMMA_N256_SS_TNSPB(TY, d, desc_a, desc_b)                                    \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                     \
               "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " " FLASHKIT_WGMMA_DREGS128 \
               ", %128, %129, p, 1, 1, 0, 1;\n}\n"                                                \
               : FLASHKIT_WGMMA_D128(d)                                                         \
               : "l"(desc_a), "l"(desc_b), "r"(1))

// d (64 x 256) += A (64 x 16, registers) * B (16 x 256, shared, MN-major: 4 atom columns
// `lbo` bytes apart in the descriptor).
template <typename T>
__device__ __forceinline__ void wgmma_m64n256k16_rs_tnspb(float (&d)[32][4], const uint32_t (&a)[4], uint64_t desc_b) {
  if constexpr (__is_same(T, __half)) {
    FLASHKIT_WGMMA_N256_RS_TNSPB("f16", d, a, desc_b);
  } else {
    FLASHKIT_WGMMA_N256_RS_TNSPB("bf16", d, a, desc_b);
  }
}

// d (64 x 256) += A (64 x 16, shared, K-major) * B (16 x 256, shared, MN-major).
template <typename T>
__device__ __forceinline__ void wgmma_m64n256k16_ss_tnspb(float (&d)[32][4], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (__is_same(T, __half)) {
    FLASHKIT_WGMMA_N256_SS_TNSPB("f16", d, desc_a, desc_b);
  } else {
    FLASHKIT_WGMMA_N256_SS_TNSPB("bf16", d, desc_a, desc_b);
  }
}


// m64n32k16 (16 accumulators per thread, d[j][e] as for n64 over 4 column tiles): the
// backward's key-split S = Q K_w^T and dP = dO V_w^T at D = 256, where each warpgroup takes
// 32 of the block's 64 keys. Both operands K-major. `_first` overwrites d ("=f": d is not
// live before it), the other form accumulates.
#define FLASHKIT_WGMMA_D16(d) "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
#define FLASHKIT_WGMMA_D16_OUT(d) "=f"(d[0][0]), "=f"(d[0][1]), "=f"(d[0][2]), "=f"(d[0][3]), "=f"(d[1][0]), "=f"(d[1][1]), "=f"(d[1][2]), "=f"(d[1][3]), "=f"(d[2][0]), "=f"(d[2][1]), "=f"(d[2][2]), "=f"(d[2][3]), "=f"(d[3][0]), "=f"(d[3][1]), "=f"(d[3][2]), "=f"(d[3][3])
#define FLASHKIT_WGMMA_DREGS16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define FLASHKIT_WGMMA_N32_SS(TY, d, desc_a, desc_b, DCONS, SCALE_D)                          \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                 \
               "wgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY " " FLASHKIT_WGMMA_DREGS16 \
               ", %16, %17, p, 1, 1, 0, 0;\n}\n"                                             \
               : DCONS(d)                                                                   \
               : "l"(desc_a), "l"(desc_b), "r"(SCALE_D))

template <typename T>
__device__ __forceinline__ void wgmma_m64n32k16_ss_first(float (&d)[4][4], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (__is_same(T, __half)) {
    FLASHKIT_WGMMA_N32_SS("f16", d, desc_a, desc_b, FLASHKIT_WGMMA_D16_OUT, 0);
  } else {
    FLASHKIT_WGMMA_N32_SS("bf16", d, desc_a, desc_b, FLASHKIT_WGMMA_D16_OUT, 0);
  }
}
template <typename T>
__device__ __forceinline__ void wgmma_m64n32k16_ss(float (&d)[4][4], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (__is_same(T, __half)) {
    FLASHKIT_WGMMA_N32_SS("f16", d, desc_a, desc_b, FLASHKIT_WGMMA_D16, 1);
  } else {
    FLASHKIT_WGMMA_N32_SS("bf16", d, desc_a, desc_b, FLASHKIT_WGMMA_D16, 1);
  }
}

}  // namespace flashkit::prims
