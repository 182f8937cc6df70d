// Device probe of the cluster / DSMEM primitives (src/prims/cluster.cuh) and the cluster launch
// (src/launch/cluster_launch.cuh), before a kernel relies on them (the D 256 backward's 2-CTA dS
// exchange planned in docs/kernels/bwd.md). Pairs of CTAs (cluster 2) run each protocol for
// kSteps steps on fresh data and count mismatches; the pair's cycles per step are printed, the
// cost of one hand-off of that kind.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Isrc -o /tmp/cluster_probe \
//     scripts/dev/cluster_probe.cu && /tmp/cluster_probe
// (also under compute-sanitizer --tool memcheck / racecheck / synccheck). Exit status 0 when every
// protocol moved every word intact.
//   rw     st.shared::cluster into the partner, cluster barrier, ld.shared::cluster back
//   arrive two inboxes per CTA: 128 writer threads st.shared::cluster + remote arrive (release),
//          the reader waits (acquire.cluster), checks, and arrives on the writer's "empty"
//   bulk   the writer stages 8 KB in its own shared memory, one thread bulk-copies it into the
//          partner's inbox completing on the partner's mbarrier (expect_tx armed by its owner);
//          "empty" by one remote arrive after a CTA barrier
//   async  st.async of every word, completing on the partner's mbarrier
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "launch/cluster_launch.cuh"
#include "prims/cluster.cuh"
#include "prims/cp_async.cuh"
#include "prims/mbarrier.cuh"
#include "prims/wgmma.cuh"

namespace {

using namespace flashkit;

constexpr int kThreads = 128;
constexpr int kWords = 2048;  // 8 KB per inbox
constexpr int kSteps = 512;

__device__ __forceinline__ uint32_t pattern(uint32_t from_block, int step, int i) {
  return (from_block * 2654435761u) ^ (uint32_t(step) * 40503u) ^ uint32_t(i);
}

struct Result {
  unsigned long long errors;
  unsigned long long cycles;  // summed over the CTAs that timed
  unsigned long long ctas;
};

__global__ void probe_rw(Result* res) {
  __shared__ __align__(16) uint32_t buf[kWords];
  const uint32_t rank = prims::cluster_ctarank(), peer = rank ^ 1u;
  const uint32_t peer_block = blockIdx.x ^ 1u;
  for (int i = threadIdx.x; i < kWords; i += kThreads) buf[i] = 0xdeadbeefu;
  prims::cluster_sync();  // every CTA's poison written before anyone writes into it
  const uint32_t remote = prims::mapa_shared(prims::smem_addr(buf), peer);
  for (int i = threadIdx.x; i < kWords; i += kThreads) prims::st_shared_cluster_u32(remote + 4 * i, pattern(blockIdx.x, 0, i));
  prims::cluster_sync();
  unsigned long long err = 0;
  for (int i = threadIdx.x; i < kWords; i += kThreads) {
    err += buf[i] != pattern(peer_block, 0, i);
    err += prims::ld_shared_cluster_u32(remote + 4 * i) != pattern(blockIdx.x, 0, i);
  }
  prims::cluster_sync();  // no CTA exits while its partner may still read its shared memory
  if (err) atomicAdd(&res->errors, err);
}

// Both CTAs write into each other's inbox[step % 2] and read their own, every step.
__global__ void probe_arrive(Result* res) {
  __shared__ __align__(16) uint32_t inbox[2][kWords];
  __shared__ __align__(8) uint64_t bars[4];  // full[2], empty[2]
  const uint32_t rank = prims::cluster_ctarank(), peer = rank ^ 1u;
  const uint32_t peer_block = blockIdx.x ^ 1u;
  const uint32_t full0 = prims::smem_addr(&bars[0]), empty0 = prims::smem_addr(&bars[2]);
  if (threadIdx.x == 0) {
    for (int b = 0; b < 2; ++b) {
      prims::mbarrier_init(full0 + 8 * b, kThreads);   // the partner's writers
      prims::mbarrier_init(empty0 + 8 * b, kThreads);  // the partner's readers
    }
    prims::fence_mbarrier_init_cluster();
  }
  prims::cluster_sync();
  const uint32_t r_inbox = prims::mapa_shared(prims::smem_addr(inbox), peer);
  const uint32_t r_full0 = prims::mapa_shared(full0, peer), r_empty0 = prims::mapa_shared(empty0, peer);
  unsigned long long err = 0;
  const long long t0 = clock64();
  for (int s = 0; s < kSteps; ++s) {
    const int b = s & 1, use = s >> 1;
    // write: the partner's inbox b is free once its readers of step s - 2 arrived on our empty[b]
    if (use > 0) prims::mbarrier_wait_cluster(empty0 + 8 * b, (use - 1) & 1);
    for (int i = threadIdx.x; i < kWords; i += kThreads)
      prims::st_shared_cluster_u32(r_inbox + 4 * (b * kWords + i), pattern(blockIdx.x, s, i));
    prims::mbarrier_arrive_cluster(r_full0 + 8 * b);
    // read ours
    prims::mbarrier_wait_cluster(full0 + 8 * b, use & 1);
    for (int i = threadIdx.x; i < kWords; i += kThreads) err += inbox[b][i] != pattern(peer_block, s, i);
    prims::mbarrier_arrive_cluster(r_empty0 + 8 * b);
  }
  const long long t1 = clock64();
  prims::cluster_sync();
  if (err) atomicAdd(&res->errors, err);
  if (threadIdx.x == 0) {
    atomicAdd(&res->cycles, (unsigned long long)(t1 - t0));
    atomicAdd(&res->ctas, 1ull);
  }
}

// The writer stages its words in its own outbox[b], one thread bulk-copies the 8 KB into the
// partner's inbox[b]; the owner arms full[b] with the byte count; one arrival frees a buffer.
// A copy that completes on an mbarrier tells its issuer nothing about its source reads, so
// outbox[b] is rewritten only after the partner's empty[b] arrival (its inbox[b] was full,
// so the copy had read the outbox).
template <bool kStAsync>
__global__ void probe_copy(Result* res) {
  __shared__ __align__(128) uint32_t inbox[2][kWords];
  __shared__ __align__(128) uint32_t outbox[2][kWords];
  __shared__ __align__(8) uint64_t bars[4];  // full[2] (1 arrival + bytes), empty[2] (1 arrival)
  const uint32_t rank = prims::cluster_ctarank(), peer = rank ^ 1u;
  const uint32_t peer_block = blockIdx.x ^ 1u;
  const uint32_t full0 = prims::smem_addr(&bars[0]), empty0 = prims::smem_addr(&bars[2]);
  if (threadIdx.x == 0) {
    for (int b = 0; b < 2; ++b) {
      prims::mbarrier_init(full0 + 8 * b, 1);
      prims::mbarrier_init(empty0 + 8 * b, 1);
    }
    prims::fence_mbarrier_init_cluster();
  }
  prims::cluster_sync();
  const uint32_t r_inbox = prims::mapa_shared(prims::smem_addr(inbox), peer);
  const uint32_t r_full0 = prims::mapa_shared(full0, peer), r_empty0 = prims::mapa_shared(empty0, peer);
  constexpr uint32_t kBytes = kWords * 4;
  unsigned long long err = 0;
  const long long t0 = clock64();
  for (int s = 0; s < kSteps; ++s) {
    const int b = s & 1, use = s >> 1;
    if (threadIdx.x == 0) prims::mbarrier_arrive_expect_tx(full0 + 8 * b, kBytes);  // ours, this phase
    if (use > 0) prims::mbarrier_wait_cluster(empty0 + 8 * b, (use - 1) & 1);
    if constexpr (kStAsync) {
      for (int i = threadIdx.x; i < kWords; i += kThreads)
        prims::st_async_u32(r_inbox + 4 * (b * kWords + i), pattern(blockIdx.x, s, i), r_full0 + 8 * b);
    } else {
      for (int i = threadIdx.x; i < kWords; i += kThreads) outbox[b][i] = pattern(blockIdx.x, s, i);
      prims::fence_proxy_async_smem();
      __syncthreads();
      if (threadIdx.x == 0) {
        prims::bulk_copy_to_cluster(r_inbox + 4 * b * kWords, prims::smem_addr(outbox[b]), kBytes, r_full0 + 8 * b);
      }
    }
    prims::mbarrier_wait_cluster(full0 + 8 * b, use & 1);
    for (int i = threadIdx.x; i < kWords; i += kThreads) err += inbox[b][i] != pattern(peer_block, s, i);
    __syncthreads();  // every reader done with inbox[b]
    if (threadIdx.x == 0) prims::mbarrier_arrive_cluster(r_empty0 + 8 * b);
  }
  const long long t1 = clock64();
  prims::cluster_sync();
  if (err) atomicAdd(&res->errors, err);
  if (threadIdx.x == 0) {
    atomicAdd(&res->cycles, (unsigned long long)(t1 - t0));
    atomicAdd(&res->ctas, 1ull);
  }
}

template <typename K>
int run(const char* name, K kernel, int clusters) {
  Result* d = nullptr;
  cudaMalloc(&d, sizeof(Result));
  cudaMemset(d, 0, sizeof(Result));
  cudaError_t e = launch_util::launch_cluster(kernel, dim3(2 * clusters), dim3(kThreads), 0, nullptr, 2, false, d);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  Result h = {};
  cudaMemcpy(&h, d, sizeof(Result), cudaMemcpyDeviceToHost);
  cudaFree(d);
  const bool ok = e == cudaSuccess && h.errors == 0;
  std::printf("%s %-6s errors %llu  cycles/step %.0f  (%s)\n", ok ? "ok  " : "FAIL", name, h.errors,
              h.ctas ? double(h.cycles) / double(h.ctas) / kSteps : 0.0, cudaGetErrorString(e));
  return ok ? 0 : 1;
}

}  // namespace

int main() {
  int dev = 0, sms = 0, cc = 0, count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("skip: no CUDA device\n");
    return 0;
  }
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaDeviceGetAttribute(&cc, cudaDevAttrComputeCapabilityMajor, dev);
  if (cc < 9) {
    std::printf("skip: clusters need compute capability 9.0 (this device: %d.x)\n", cc);
    return 0;
  }
  const int clusters = sms / 2;
  int fails = 0;
  fails += run("rw", probe_rw, clusters);
  fails += run("arrive", probe_arrive, clusters);
  fails += run("bulk", probe_copy<false>, clusters);
  fails += run("async", probe_copy<true>, clusters);
  std::printf("max active clusters of 2 (probe_copy, 48 KB static smem): %d\n",
              launch_util::max_active_clusters(probe_copy<false>, dim3(2 * clusters), kThreads, 0, 2));
  return fails ? 1 : 0;
}
