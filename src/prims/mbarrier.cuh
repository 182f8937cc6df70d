// Shared-memory barriers for producer/consumer pipelines inside a CTA (sm_90+):
// mbarrier objects (arrive / wait on a phase parity), arrivals triggered by the completion
// of a thread's cp.async copies, and named barriers (bar.sync / bar.arrive on ids 1..15).
// PTX ISA: "Parallel Synchronization and Communication Instructions: mbarrier", "bar".
#pragma once

#include <cstdint>

namespace flashkit::prims {

__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Arrives on `bar` once every cp.async this thread issued so far has landed. `.noinc`: the
// barrier's expected count must include these arrivals (one per participating thread).
__device__ __forceinline__ void cp_async_mbarrier_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// Arrives on `bar` and raises its expected transaction count by `bytes` (the bytes that
// bulk / tensor copies completing on it will deliver in this phase).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// The same where `pred` is set (a predicated instruction, no branch).
__device__ __forceinline__ void mbarrier_arrive_expect_tx_if(bool pred, uint32_t bar, uint32_t bytes) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n@p mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n}\n" ::"r"(
          bar),
      "r"(bytes), "r"(int(pred))
      : "memory");
}

// The suspending wait: a thread whose phase is not complete yet is suspended (up to
// `kSuspendNs`, woken when the phase completes) instead of retrying at once, so a waiting
// warp leaves the issue slots of its scheduler to the others (the form CUTLASS's
// ClusterBarrier::wait uses; ptxas emits TRYWAIT + NANOSLEEP.SYNCS).
template <uint32_t kSuspendNs = 0x989680u>
__device__ __forceinline__ void mbarrier_wait_sleep(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity), "n"(kSuspendNs)
        : "memory");
  } while (!done);
}

// Whether the phase of `bar` with parity `parity` has completed (acquire when it has), without
// waiting: for a thread that watches several barriers.
__device__ __forceinline__ bool mbarrier_test_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

// Blocks until the phase of `bar` with parity `parity` has completed (acquire).
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// Named barriers: `bar_sync` waits until `count` threads have arrived at barrier `id`
// (counting itself); `bar_arrive` arrives without waiting.
// bar.sync / bar.arrive are .aligned: every lane of the calling warp must reach them
// together. After lane-divergent code (a lane-0 spin loop), __syncwarp() first.
__device__ __forceinline__ void bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

}  // namespace flashkit::prims
