// Development check of the Hopper MLA split kernel alone (no API layer): random inputs, a
// host-made schedule (FlashMLA's greedy split), NaN in every unused cache slot; every piece
// (direct or partial) is compared with a double-precision reference over its block range.
// Build: nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr
//        -Iinclude -Isrc scripts/dev/mla_sm90_check.cu src/kernels/mla/inst/mla_sm90_bf16.cu
//        src/kernels/mla/inst/mla_sm90_bf16_box64.cu
// Env: MLA_SEQ=1 consecutive page ids; MLA_SMS the SM count the parts are sized for; MLA_SUSTAIN_MS
// a sustained run after the timing (time, energy, power and clock under load; see run_case).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "launch/mla_launch.h"

using namespace flashkit;

#if FLASHKIT_MLA_TRACE
namespace flashkit {
int mla_sm90_trace_read(unsigned long long* dst, int n, bool clear);
int mla_sm90_trace_read_pieces(unsigned long long* cta, unsigned long long* piece, int* pairs);
// the page >= 64 kernel's translation unit has its own trace arrays and readers
int mla_sm90_trace_read_box64(unsigned long long* dst, int n, bool clear);
int mla_sm90_trace_read_pieces_box64(unsigned long long* cta, unsigned long long* piece, int* pairs);
}
static bool g_box64 = false;  // the last case ran the page >= 64 kernel
// The last launch's CTA start / end spread and the traced CTAs' pieces (globaltimer, us).
static void print_pieces(int n_ctas, int m_blocks) {
  std::vector<unsigned long long> cta(2048 * 2), piece(4 * 8 * 12);
  std::vector<int> pairs(4 * 8);
  if ((g_box64 ? flashkit::mla_sm90_trace_read_pieces_box64 : flashkit::mla_sm90_trace_read_pieces)(
          cta.data(), piece.data(), pairs.data()) < 0)
    return;
  unsigned long long t0 = ~0ull;
  std::vector<double> st, en;
  for (int i = 0; i < std::min(n_ctas, 2048); ++i)
    if (cta[2 * i] && cta[2 * i + 1]) t0 = std::min(t0, cta[2 * i]);
  for (int i = 0; i < std::min(n_ctas, 2048); ++i)
    if (cta[2 * i] && cta[2 * i + 1]) { st.push_back((cta[2 * i] - t0) * 1e-3); en.push_back((cta[2 * i + 1] - t0) * 1e-3); }
  if (st.empty()) return;
  std::sort(st.begin(), st.end()); std::sort(en.begin(), en.end());
  const size_t n = en.size();
  printf("  ctas %zu: start max %.1f us | end min %.1f p10 %.1f p50 %.1f p90 %.1f max %.1f us\n", n, st.back(), en[0],
         en[n / 10], en[n / 2], en[n * 9 / 10], en.back());
  // CTAs of one part and kv head (the m-blocks, which read the same K): the spread of their
  // end times, us (their start times are printed above as a whole).
  if (m_blocks > 1) {
    std::vector<double> spread;
    for (int g = 0; g + m_blocks <= std::min(n_ctas, 2048); g += m_blocks) {
      double lo = 1e30, hi = -1e30;
      bool ok = true;
      for (int i = g; i < g + m_blocks; ++i) {
        if (!cta[2 * i] || !cta[2 * i + 1]) { ok = false; break; }
        lo = std::min(lo, (cta[2 * i + 1] - t0) * 1e-3); hi = std::max(hi, (cta[2 * i + 1] - t0) * 1e-3);
      }
      if (ok) spread.push_back(hi - lo);
    }
    std::sort(spread.begin(), spread.end());
    if (!spread.empty())
      printf("  m-block siblings' end spread over %zu groups: p50 %.1f p90 %.1f max %.1f us\n", spread.size(),
             spread[spread.size() / 2], spread[spread.size() * 9 / 10], spread.back());
  }
  for (int k = 0; k < 4; ++k) {
    printf("  traced cta %d:", k);
    for (int pc = 0; pc < 8; ++pc) {
      const unsigned long long* t = &piece[(k * 8 + pc) * 12];
      if (!t[0] || !t[4] || t[0] < t0) continue;
      // prologue: start -> shared memory free (5) -> thread 0's page ids returned (11) -> its first copies
      // issued (10) -> Q landed (6) -> barrier (7) -> first Q K^T done (1)
      auto at = [&](int i) { return t[i] ? (t[i] - t[0]) * 1e-3 : -1.0; };
      printf(" [p%d %d pairs: at %.1f, prologue %.2f (free %.2f, ids %.2f, K issued %.2f, Q %.2f, sync %.2f), loop %.1f (%.2f/pair), wg1 +%.2f,"
             " epilogue %.2f (staged %.2f, copies issued %.2f)]", pc, pairs[k * 8 + pc], (t[0] - t0) * 1e-3, at(1),
             at(5), at(11), at(10), at(6), at(7), (t[2] - t[1]) * 1e-3,
             pairs[k * 8 + pc] > 1 ? (t[2] - t[1]) * 1e-3 / (pairs[k * 8 + pc] - 1) : 0.0, (t[3] - t[2]) * 1e-3,
             (t[4] - t[3]) * 1e-3, t[8] ? (t[8] - t[3]) * 1e-3 : -1.0, t[9] ? (t[9] - t[3]) * 1e-3 : -1.0);
    }
    printf("\n");
  }
}
// Mean cycles between the trace points of pairs 8..23 (kernel: FLASHKIT_MLA_TRACE): per
// warpgroup, point k -> k + 1 and the pair period (point 0 -> next pair's point 0).
static void print_trace() {
  const int C = 4, P = 16, K = 8;
  std::vector<unsigned long long> tr(C * 2 * P * K);
  if ((g_box64 ? flashkit::mla_sm90_trace_read_box64 : flashkit::mla_sm90_trace_read)(tr.data(), int(tr.size()), true) < 0) {
    printf("trace read failed\n");
    return;
  }
  for (int wg = 0; wg < 2; ++wg) {
    double seg[K] = {}, period = 0; int nseg[K] = {}, nper = 0;
    for (int c = 0; c < C; ++c)
      for (int pr = 0; pr < P; ++pr) {
        const unsigned long long* t = &tr[((c * 2 + wg) * P + pr) * K];
        for (int k = 0; k + 1 < 7; ++k)
          if (t[k] && t[k + 1] && t[k + 1] >= t[k]) { seg[k] += double(t[k + 1] - t[k]); ++nseg[k]; }
        if (pr + 1 < P) {
          const unsigned long long* n = t + K;
          if (t[0] && n[0] && n[0] > t[0]) { period += double(n[0] - t[0]); ++nper; }
        }
      }
    printf("  trace wg%d cycles:", wg);
    for (int k = 0; k + 1 < 7; ++k) printf(" %d->%d %.0f", k, k + 1, nseg[k] ? seg[k] / nseg[k] : -1.0);
    printf(" | pair %.0f (n=%d)\n", nper ? period / nper : -1.0, nper);
  }
}
#endif

// NVML through dlopen (no header or link needed): the energy counter and the SM clock, for
// MLA_SUSTAIN_MS (see run_case). ok = false where the driver's library is missing.
struct Nvml {
  using Init = int (*)();
  using Handle = int (*)(unsigned, void**);
  using Energy = int (*)(void*, unsigned long long*);  // mJ since the driver loaded
  using Clock = int (*)(void*, int, unsigned*);        // type 1 = SM, MHz
  Energy energy = nullptr;
  Clock clock = nullptr;
  void* dev = nullptr;
  bool ok = false;
  Nvml() {
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (h == nullptr) return;
    auto init = reinterpret_cast<Init>(dlsym(h, "nvmlInit_v2"));
    auto get = reinterpret_cast<Handle>(dlsym(h, "nvmlDeviceGetHandleByIndex_v2"));
    energy = reinterpret_cast<Energy>(dlsym(h, "nvmlDeviceGetTotalEnergyConsumption"));
    clock = reinterpret_cast<Clock>(dlsym(h, "nvmlDeviceGetClockInfo"));
    ok = init && get && energy && clock && init() == 0 && get(0, &dev) == 0;
  }
};

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(2); } } while (0)

__global__ void fill_random(__nv_bfloat16* x, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    x[i] = __float2bfloat16(float(h & 0xffff) / 32768.f - 1.f);
  }
}

struct Case { int B, s_q, h_q, page, mean; bool causal; int parts; bool varlen; };

static float bf(float x) { return __bfloat162float(__float2bfloat16(x)); }

int run_case(const Case& c, uint64_t seed, bool check = true) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int D = 576, DV = 512, h_kv = 1, ratio = c.h_q, rows = ratio * c.s_q;
  std::vector<int> lens(c.B);
  for (int b = 0; b < c.B; ++b) {
    int L = c.mean;
    if (c.varlen) L = std::max(0, int(c.mean + nd(rng) * c.mean / 2));
    lens[b] = L;
  }
  if (c.B > 2) lens[1] = 0;
  int max_len = *std::max_element(lens.begin(), lens.end());
  const int max_pages = std::max(1, (max_len + c.page - 1) / c.page);
  const int num_pages = c.B * max_pages + 3;
  std::vector<int> perm(num_pages);
  for (int i = 0; i < num_pages; ++i) perm[i] = i;
  // MLA_SEQ=1: consecutive page ids (the bench's default tables; page 16 then takes the run copies).
  if (!(std::getenv("MLA_SEQ") && std::getenv("MLA_SEQ")[0] == '1')) std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int> bt(c.B * max_pages);
  for (int i = 0; i < c.B * max_pages; ++i) bt[i] = perm[i];
  const size_t kv_elems = size_t(num_pages) * c.page * D;
  std::vector<__nv_bfloat16> kv(check ? kv_elems : 0, __float2bfloat16(NAN));
  std::vector<float> kvf(kv.size(), NAN);
  for (int b = 0; b < (check ? c.B : 0); ++b)
    for (int tkn = 0; tkn < lens[b]; ++tkn) {
      const size_t base = (size_t(bt[b * max_pages + tkn / c.page]) * c.page + tkn % c.page) * D;
      for (int d = 0; d < D; ++d) { float v = bf(nd(rng)); kv[base + d] = __float2bfloat16(v); kvf[base + d] = v; }
    }
  std::vector<__nv_bfloat16> q(size_t(c.B) * c.s_q * c.h_q * D);
  std::vector<float> qf(q.size());
  for (size_t i = 0; i < q.size(); ++i) { float v = bf(nd(rng)); q[i] = __float2bfloat16(v); qf[i] = v; }

  // Host schedule (FlashMLA's greedy cut, in 64-token blocks).
  const int parts = c.parts;
  std::vector<int> nb(c.B);
  long total = 0;
  for (int b = 0; b < c.B; ++b) { nb[b] = (lens[b] + 63) / 64; total += nb[b] + kMlaFixedOverhead; }
  const long payload = std::max<long>((total + parts - 1) / parts + kMlaFixedOverhead, 2 * kMlaFixedOverhead);
  std::vector<int> sched(parts * 8, 0), nsplit(c.B + 1, 0);
  std::vector<int> pieces(c.B, 0);
  int b = 0, blk = 0, split = 0;
  for (int pi = 0; pi < parts; ++pi) {
    while (b < c.B && nb[b] == 0) ++b;
    int* s = &sched[pi * 8];
    if (b >= c.B) { s[0] = c.B; continue; }
    s[0] = b; s[1] = blk; s[4] = split;
    long rem = payload;
    int eb = b, eblk = blk;
    while (b < c.B) {
      if (nb[b] == 0) { ++b; continue; }
      const int left = nb[b] - blk;
      if (rem >= left + kMlaFixedOverhead) {
        rem -= left + kMlaFixedOverhead; pieces[b] = split + 1; eb = b; eblk = nb[b];
        ++b; blk = 0; split = 0;
      } else {
        // the library's cut (metadata_kernel.cuh): only a positive remainder is taken
        if (rem - kMlaFixedOverhead > 0) { blk += int(rem - kMlaFixedOverhead); eb = b; eblk = blk; ++split; }
        break;
      }
    }
    s[2] = eb; s[3] = eblk;
  }
  if (b < c.B) { printf("schedule did not cover the batch\n"); return 1; }
  for (int i = 0; i < c.B; ++i) nsplit[i + 1] = nsplit[i] + pieces[i];
  const int max_partials = c.B + parts;

  __nv_bfloat16 *dq, *dkv, *dout; float *dlse, *dpo, *dpl; int *dbt, *dlen, *dsched, *dns; uint32_t* derr;
  CK(cudaMalloc(&dq, q.size() * 2)); CK(cudaMalloc(&dkv, kv_elems * 2));
  CK(cudaMalloc(&dout, size_t(c.B) * c.s_q * c.h_q * DV * 2)); CK(cudaMalloc(&dlse, size_t(c.B) * c.h_q * c.s_q * 4));
  CK(cudaMalloc(&dpo, size_t(max_partials) * rows * DV * 4)); CK(cudaMalloc(&dpl, size_t(max_partials) * rows * 4));
  CK(cudaMalloc(&dbt, bt.size() * 4)); CK(cudaMalloc(&dlen, c.B * 4)); CK(cudaMalloc(&dsched, sched.size() * 4));
  CK(cudaMalloc(&dns, nsplit.size() * 4)); CK(cudaMalloc(&derr, 4));
  CK(cudaMemcpy(dq, q.data(), q.size() * 2, cudaMemcpyHostToDevice));
  if (check) CK(cudaMemcpy(dkv, kv.data(), kv.size() * 2, cudaMemcpyHostToDevice));
  else fill_random<<<1024, 256>>>(dkv, kv_elems, 99);
  CK(cudaMemcpy(dbt, bt.data(), bt.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dlen, lens.data(), c.B * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dsched, sched.data(), sched.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dns, nsplit.data(), nsplit.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(dout, 0xff, size_t(c.B) * c.s_q * c.h_q * DV * 2));
  CK(cudaMemset(dlse, 0xff, size_t(c.B) * c.h_q * c.s_q * 4));
  CK(cudaMemset(dpo, 0xff, size_t(max_partials) * rows * DV * 4));
  CK(cudaMemset(dpl, 0xff, size_t(max_partials) * rows * 4));
  CK(cudaMemset(derr, 0, 4));

  MlaParams p{};
  p.q = dq; p.kv = dkv; p.o = dout; p.lse = dlse; p.block_table = dbt; p.seqlens_k = dlen;
  p.sched = dsched; p.num_splits = dns; p.part_o = dpo; p.part_lse = dpl;
  p.q_batch_stride = int64_t(c.s_q) * c.h_q * D; p.q_tok_stride = int64_t(c.h_q) * D; p.q_head_stride = D;
  p.o_batch_stride = int64_t(c.s_q) * c.h_q * DV; p.o_tok_stride = int64_t(c.h_q) * DV; p.o_head_stride = DV;
  p.kv_page_stride = int64_t(c.page) * D; p.kv_slot_stride = D; p.kv_head_stride = D; p.bt_row_stride = max_pages;
  p.batch = c.B; p.s_q = c.s_q; p.h_q = c.h_q; p.h_kv = h_kv; p.ratio = ratio; p.rows_per_kv = rows;
  p.m_blocks = (rows + 63) / 64; p.page_size = c.page; p.max_pages = max_pages; p.num_pages = num_pages;
  p.capacity = int64_t(max_pages) * c.page; p.num_parts = parts; p.max_partials = max_partials;
  p.softmax_scale = 1.f / std::sqrt(576.f); p.softmax_scale_log2 = p.softmax_scale * 1.4426950408889634f;
  p.causal = c.causal; p.errors = derr;
  DeviceInfo dev{0, 9, 0, 232448, 0, 132};
  CK(cudaError_t(launch_mla_split_sm90<bf16_t>(p, dev, 0)));
  CK(cudaDeviceSynchronize());
  // timing
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  cudaEventRecord(e0);
  const int iters = 20;
  for (int i = 0; i < iters; ++i) launch_mla_split_sm90<bf16_t>(p, dev, 0);
  cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
  float ms; cudaEventElapsedTime(&ms, e0, e1); ms /= iters;
  // MLA_SUSTAIN_MS=t: then launches back to back for t ms (the state the bench's long repetitions
  // reach: at compute-bound shapes the GPU runs at its power cap, mla.md "Power"), timed in groups
  // of 20; the second half's median time per call, the energy per call over the whole loop (NVML's
  // counter), the mean power and the median SM clock, appended to the result line.
  char sustained[160] = "";
  if (const char* env = std::getenv("MLA_SUSTAIN_MS")) {
    static Nvml nvml;
    const double budget_ms = std::atof(env);
    std::vector<float> per;
    std::vector<unsigned> clocks;
    unsigned long long mj0 = 0, mj1 = 0;
    if (nvml.ok) nvml.energy(nvml.dev, &mj0);
    double spent = 0;
    while (spent < budget_ms) {
      cudaEventRecord(e0);
      for (int i = 0; i < iters; ++i) launch_mla_split_sm90<bf16_t>(p, dev, 0);
      cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
      float t; cudaEventElapsedTime(&t, e0, e1);
      per.push_back(t / iters);
      spent += t;
      unsigned mhz = 0;
      if (nvml.ok && nvml.clock(nvml.dev, 1, &mhz) == 0) clocks.push_back(mhz);
    }
    if (nvml.ok) nvml.energy(nvml.dev, &mj1);
    std::vector<float> late(per.begin() + per.size() / 2, per.end());
    std::sort(late.begin(), late.end());
    std::sort(clocks.begin(), clocks.end());
    const double calls = double(per.size()) * iters;
    std::snprintf(sustained, sizeof(sustained), " || sustained %.1f us/call %.2f mJ/call %.0f W SM %u MHz",
                  late[late.size() / 2] * 1e3, nvml.ok ? double(mj1 - mj0) / calls : -1.0,
                  nvml.ok ? double(mj1 - mj0) / spent : -1.0, clocks.empty() ? 0u : clocks[clocks.size() / 2]);
  }
  std::vector<__nv_bfloat16> out(size_t(c.B) * c.s_q * c.h_q * DV);
  std::vector<float> lse(size_t(c.B) * c.h_q * c.s_q), po(size_t(max_partials) * rows * DV), pl(size_t(max_partials) * rows);
  CK(cudaMemcpy(out.data(), dout, out.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(lse.data(), dlse, lse.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(po.data(), dpo, po.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(pl.data(), dpl, pl.size() * 4, cudaMemcpyDeviceToHost));
  uint32_t err; CK(cudaMemcpy(&err, derr, 4, cudaMemcpyDeviceToHost));

  // Reference per piece.
  double max_err = 0, max_lse_err = 0; long checked = 0; int bad = 0;
  std::vector<double> sc(65536), acc(DV);
  for (int pi = 0; pi < (check ? parts : 0); ++pi) {
    const int* s = &sched[pi * 8];
    if (s[0] >= c.B) continue;
    for (int bb = s[0]; bb <= s[2]; ++bb) {
      const int n = nsplit[bb + 1] - nsplit[bb];
      if (n == 0) continue;
      const int k0 = (bb == s[0] ? s[1] : 0) * 64, k1 = std::min(lens[bb], (bb == s[2] ? s[3] : nb[bb]) * 64);
      const int spl = bb == s[0] ? s[4] : 0;
      for (int R = 0; R < rows; ++R) {
        const int tq = R / ratio, h = R % ratio;
        const int vis = c.causal ? lens[bb] - (c.s_q - 1 - tq) : lens[bb];
        const float* qr = &qf[((size_t(bb) * c.s_q + tq) * c.h_q + h) * D];
        double m = -INFINITY;
        const int kend = std::min(k1, vis);
        for (int k = k0; k < kend; ++k) {
          const float* kr = &kvf[(size_t(bt[bb * max_pages + k / c.page]) * c.page + k % c.page) * D];
          double dot = 0; for (int d = 0; d < D; ++d) dot += double(qr[d]) * kr[d];
          sc[k - k0] = dot * p.softmax_scale; m = std::max(m, sc[k - k0]);
        }
        double l = 0; std::fill(acc.begin(), acc.end(), 0.0);
        for (int k = k0; k < kend; ++k) {
          const double w = std::exp(sc[k - k0] - m); l += w;
          const float* kr = &kvf[(size_t(bt[bb * max_pages + k / c.page]) * c.page + k % c.page) * D];
          for (int d = 0; d < DV; ++d) acc[d] += w * kr[d];
        }
        const double ref_lse = l > 0 ? m + std::log(l) : (n == 1 ? INFINITY : -INFINITY);
        double got_lse; const float* go = nullptr; const __nv_bfloat16* gb = nullptr;
        if (n == 1) {
          got_lse = lse[(size_t(bb) * c.h_q + h) * c.s_q + tq];
          gb = &out[((size_t(bb) * c.s_q + tq) * c.h_q + h) * DV];
        } else {
          const size_t prow = size_t(nsplit[bb] + spl) * rows + R;
          got_lse = pl[prow]; go = &po[prow * DV];
        }
        if (std::isinf(ref_lse)) { if (got_lse != ref_lse) { if (bad++ < 5) printf("lse inf mismatch b=%d R=%d got %f\n", bb, R, got_lse); } }
        else { const double e = std::fabs(got_lse - ref_lse); max_lse_err = std::max(max_lse_err, e); if (!(e < 1e-2)) { if (bad++ < 5) printf("lse b=%d R=%d got %f ref %f\n", bb, R, got_lse, ref_lse); } }
        for (int d = 0; d < DV; ++d) {
          const double ref = l > 0 ? acc[d] / l : 0.0;
          const double got = go ? double(go[d]) : double(__bfloat162float(gb[d]));
          const double e = std::fabs(got - ref);
          if (!(e <= 2e-2 + 2e-2 * std::fabs(ref))) { if (bad++ < 5) printf("o b=%d R=%d d=%d got %f ref %f (piece %d, blocks %d..%d)\n", bb, R, d, got, ref, pi, k0, k1); }
          max_err = std::max(max_err, e); ++checked;
        }
      }
    }
  }
  long tokens = 0; for (int x : lens) tokens += x;
  const double flops = 2.0 * c.s_q * double(tokens) * c.h_q * (576 + 512);
  printf("B=%d s_q=%d h_q=%d page=%d mean=%d causal=%d parts=%d varlen=%d: max_err %.4g lse_err %.3g bad %d err_word %u | %.3f ms %.0f TFLOPS %.0f GB/s%s\n",
         c.B, c.s_q, c.h_q, c.page, c.mean, c.causal, parts, c.varlen, max_err, max_lse_err, bad, err, ms, flops / ms / 1e9,
         (tokens * 576.0 * 2 + c.B * c.s_q * c.h_q * 1088.0 * 2) / ms / 1e6, sustained);
#if FLASHKIT_MLA_TRACE
  g_box64 = c.page % 64 == 0;
  print_trace();
  print_pieces(parts * p.m_blocks * h_kv, p.m_blocks);
#endif
  cudaFree(dq); cudaFree(dkv); cudaFree(dout); cudaFree(dlse); cudaFree(dpo); cudaFree(dpl); cudaFree(dbt);
  cudaFree(dlen); cudaFree(dsched); cudaFree(dns); cudaFree(derr);
  return bad != 0;
}

int main(int argc, char** argv) {
  int fails = 0;
  const bool perf = argc > 1;
  if (argc == 5 || argc == 6) {  // one config: hq sq mean [page]
    const int hq = atoi(argv[2]), sq = atoi(argv[3]), mean = atoi(argv[4]), page = argc == 6 ? atoi(argv[5]) : 64;
    const int mb = (hq * sq + 63) / 64;
    // MLA_SMS: the SMs the parts are sized for (default 132: one CTA per SM of an H100 SXM).
    const int sms = std::getenv("MLA_SMS") ? std::atoi(std::getenv("MLA_SMS")) : 132;
    return run_case({128, sq, hq, page, mean, true, std::max(1, sms / mb), false}, 7, false);
  }
  if (!perf) {
    const Case cases[] = {
        {1, 1, 16, 64, 64, false, 1, false},   {1, 1, 16, 64, 100, false, 1, false}, {2, 1, 16, 64, 300, true, 3, false},
        {4, 2, 16, 16, 1000, true, 5, true},   {3, 1, 64, 32, 777, false, 4, true},  {2, 2, 128, 64, 513, true, 7, false},
        {5, 4, 24, 128, 333, true, 9, true},   {8, 3, 72, 1, 200, true, 6, true},    {6, 1, 16, 48, 129, false, 20, true},
        {16, 2, 32, 64, 2048, true, 11, true}, {3, 1, 8, 16, 5, true, 2, false},
    };
    for (const Case& c : cases) fails += run_case(c, 1234 + fails);
  } else {
    for (int hq : {16, 32, 64, 128})
      for (int sq : {1, 2})
        for (int mean : {4096, 16384}) {
          const int rows = hq * sq, mb = (rows + 63) / 64;
          fails += run_case({128, sq, hq, 64, mean, true, std::max(1, 132 / mb), false}, 7, false);
        }
  }
  printf(fails ? "FAILED %d\n" : "ALL OK\n", fails);
  return fails != 0;
}
