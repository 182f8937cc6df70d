// Thread-block clusters (sm_90+): a CTA's rank in its cluster, the cluster-wide barrier, and
// distributed shared memory (DSMEM): another CTA's shared memory addressed through
// `mapa`, read and written with ld/st.shared::cluster, filled by bulk copies or st.async that
// complete on the owner's mbarrier, and mbarriers arrived on remotely. The kernels launch with
// a cluster dimension (launch/cluster_launch.cuh).
// PTX ISA: "Cluster of Cooperative Thread Arrays", "mapa", "barrier.cluster",
// "cp.async.bulk", "st.async", "mbarrier" (the .cluster scope and the shared::cluster space).
//
// Addresses: `uint32_t` shared-memory addresses as prims::smem_addr gives them are
// shared::cta addresses; `mapa_shared(addr, rank)` turns one into the shared::cluster address
// of the same offset in CTA `rank`'s shared memory (rank = this CTA's rank gives its own).
#pragma once

#include <cstdint>

namespace flashkit::prims {

__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

__device__ __forceinline__ uint32_t cluster_nctarank() {
  uint32_t n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
  return n;
}

// The cluster-wide barrier: every thread of every CTA of the cluster arrives (release: its
// earlier writes, DSMEM included, become visible to the cluster) and waits (acquire). Both
// are .aligned: every thread of a warp executes them together. Also needed once after the
// mbarriers are initialized (fence_mbarrier_init) and before a CTA exits while others may
// still access its shared memory.
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}

// Makes this thread's mbarrier.init visible to the other CTAs of the cluster (their remote
// arrivals and copies); follow it with cluster_sync() before any of them uses the barrier.
__device__ __forceinline__ void fence_mbarrier_init_cluster() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// The shared::cluster address of `addr` (a shared::cta address of this kernel's layout) in
// the shared memory of the cluster's CTA `rank`.
__device__ __forceinline__ uint32_t mapa_shared(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}

// Plain (weak) DSMEM accesses through a shared::cluster address. Their ordering against the
// owner's accesses comes from a cluster barrier or an mbarrier release / acquire pair.
__device__ __forceinline__ void st_shared_cluster_u32(uint32_t caddr, uint32_t v) {
  asm volatile("st.shared::cluster.u32 [%0], %1;\n" ::"r"(caddr), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t ld_shared_cluster_u32(uint32_t caddr) {
  uint32_t v;
  asm volatile("ld.shared::cluster.u32 %0, [%1];\n" : "=r"(v) : "r"(caddr) : "memory");
  return v;
}
// Four floats at a 16-byte aligned shared::cluster address.
__device__ __forceinline__ float4 ld_shared_cluster_f32x4(uint32_t caddr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(caddr)
               : "memory");
  return v;
}

// Arrives on the mbarrier at shared::cluster address `bar_caddr` (another CTA's, or this
// one's), releasing this thread's earlier writes at cluster scope.
__device__ __forceinline__ void mbarrier_arrive_cluster(uint32_t bar_caddr) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(bar_caddr) : "memory");
}

// Where `pred` is set: arrives on this CTA's mbarrier `bar` and on the one at the same offset in CTA `peer` of the
// cluster (a stage that both CTAs' producers write, by multicast, is free when the consumers of both have released
// it). The arrivals have the default semantics (release at CTA scope), as CUTLASS's ClusterBarrier::arrive: what
// they publish is the end of the caller's wgmma reads of the stage (wgmma.wait_group), not memory writes, and
// `.release.cluster` compiles to MEMBAR.ALL.GPU before each arrival (fwd_sm90.md "K / V multicast in clusters of
// two": 25-38 % slower with it). Predicated instructions, no branch: a thread-divergent branch among in-flight
// wgmmas makes ptxas serialize them (C7520).
__device__ __forceinline__ void mbarrier_arrive_pair_if(bool pred, uint32_t bar, uint32_t peer) {
  asm volatile(
      "{\n.reg .pred p;\n.reg .b32 r;\nsetp.ne.b32 p, %2, 0;\nmapa.shared::cluster.u32 r, %0, %1;\n"
      "@p mbarrier.arrive.shared::cta.b64 _, [%0];\n"
      "@p mbarrier.arrive.shared::cluster.b64 _, [r];\n}\n" ::"r"(bar),
      "r"(peer), "r"(int(pred))
      : "memory");
}

// Arrives on the mbarrier at shared::cluster address `bar_caddr` with the default semantics (release at CTA scope,
// as CUTLASS's ClusterBarrier::arrive(cta_id)): for an arrival that publishes retired wgmma reads, not memory writes.
// mbarrier_arrive_cluster's `.release.cluster` costs a MEMBAR.ALL.GPU before the arrival on sm_90a.
__device__ __forceinline__ void mbarrier_arrive_remote(uint32_t bar_caddr) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar_caddr) : "memory");
}

// Waits for the phase of this CTA's mbarrier `bar` with parity `parity` to complete, with
// acquire semantics at cluster scope (arrivals and copies from other CTAs of the cluster).
__device__ __forceinline__ void mbarrier_wait_cluster(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// Bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned) from this CTA's
// shared memory `src` to shared::cluster address `dst_caddr`, completing `bytes` of
// transactions on the mbarrier at shared::cluster address `bar_caddr` (in the destination's
// CTA; its owner arms it with mbarrier_arrive_expect_tx). The source must be visible to the
// async proxy first (fence_proxy_async_smem after generic writes).
__device__ __forceinline__ void bulk_copy_to_cluster(uint32_t dst_caddr, uint32_t src, uint32_t bytes,
                                                     uint32_t bar_caddr) {
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          dst_caddr),
      "r"(src), "r"(bytes), "r"(bar_caddr)
      : "memory");
}

// Asynchronous 4-byte store into shared::cluster address `caddr` that completes 4 bytes of
// transactions on the mbarrier at `bar_caddr` (the same CTA's as the destination).
__device__ __forceinline__ void st_async_u32(uint32_t caddr, uint32_t v, uint32_t bar_caddr) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%0], %1, [%2];\n" ::"r"(caddr), "r"(v),
               "r"(bar_caddr)
               : "memory");
}

}  // namespace flashkit::prims
