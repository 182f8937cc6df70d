// Test harness of the KV-cache manager, shared by the GoogleTest property tests and the
// libFuzzer target (plain C++17, no GoogleTest, no CUDA).
//
// It drives a KVCacheManager next to
//  - a reference model: every live sequence as its list of token ids, whether the manager
//    was given them, and how many have KV (computed); the set of token prefixes that
//    became full blocks while their sequence was live at a step boundary (what the prefix
//    cache may hold);
//  - a simulated device: the block table and seqlens as the GPU holds them (changed only by
//    applying take_updates() buffers, as kvcache_apply_updates does) and the KV cache as
//    one 64-bit value per slot. The "forward" of each step writes, for every pending token
//    of every live sequence, a value that names the token's whole prefix into the slot the
//    device block table gives. Then every token of every live sequence must read back its
//    own value: wrong sharing, a missed or misdirected copy-on-write, a stale table row or
//    a prefix hit on the wrong block all show up as a wrong value.
// Each operation returns "" or a description of the first violation. Bad calls must fail
// with the expected code and leave debug_state() unchanged (strong guarantee).
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "flashkit/kvcache.h"

namespace kvtest {

using flashkit::KVBlockState;
using flashkit::KVCacheConfig;
using flashkit::KVCacheManager;
using flashkit::KVCacheUpdates;
using flashkit::Status;
using SeqId = KVCacheManager::SeqId;

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

template <typename... Ts>
std::string str(const Ts&... parts) {
  std::ostringstream s;
  (s << ... << parts);
  return s.str();
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Applies an updates buffer to a simulated device (what the kernels do), after checking
// its structure. Returns "" or the problem.
inline std::string apply_updates(const KVCacheUpdates& u, const KVCacheConfig& cfg,
                                 std::vector<uint64_t>* kv, std::vector<int32_t>* table,
                                 std::vector<int32_t>* seqlens) {
  const std::vector<int32_t>& buf = u.buffer;
  const int64_t head = u.rows_offset() + 5 * static_cast<int64_t>(u.num_rows);
  if (u.num_copies < 0 || u.num_rows < 0 || static_cast<int64_t>(buf.size()) < head) {
    return str("updates: buffer of ", buf.size(), " for ", u.num_copies, " copies, ", u.num_rows, " rows");
  }
  const int B = cfg.block_size;
  std::set<int32_t> srcs, dsts;
  for (int32_t i = 0; i < u.num_copies; ++i) {
    const int32_t s = buf[2 * i], d = buf[2 * i + 1];
    if (s < 0 || s >= cfg.num_blocks || d < 0 || d >= cfg.num_blocks || s == d) {
      return str("updates: copy ", s, "->", d, " out of range");
    }
    if (!dsts.insert(d).second) return str("updates: destination ", d, " written twice");
    srcs.insert(s);
  }
  for (int32_t s : srcs) {
    if (dsts.count(s)) return str("updates: block ", s, " is read and written by one launch");
  }
  for (int32_t i = 0; i < u.num_copies; ++i) {
    const int32_t s = buf[2 * i], d = buf[2 * i + 1];
    std::copy(kv->begin() + int64_t(s) * B, kv->begin() + int64_t(s + 1) * B, kv->begin() + int64_t(d) * B);
  }
  std::set<int32_t> rows;
  int64_t expect_offset = head;
  for (int32_t i = 0; i < u.num_rows; ++i) {
    const int32_t* h = &buf[u.rows_offset() + 5 * i];
    const int32_t row = h[0], seqlen = h[1], lo = h[2], count = h[3], off = h[4];
    if (row < 0 || row >= cfg.max_batch || !rows.insert(row).second) return str("updates: row ", row);
    if (lo < 0 || count < 0 || lo + count > cfg.max_blocks_per_seq || off != expect_offset ||
        off + count > static_cast<int64_t>(buf.size())) {
      return str("updates: row ", row, " header ", lo, ' ', count, ' ', off);
    }
    expect_offset += count;
    (*seqlens)[row] = seqlen;
    for (int32_t j = 0; j < count; ++j) {
      (*table)[static_cast<size_t>(row) * cfg.max_blocks_per_seq + lo + j] = buf[off + j];
    }
  }
  if (expect_offset != static_cast<int64_t>(buf.size())) return "updates: trailing data";
  return "";
}

class Harness {
 public:
  struct Seq {
    std::vector<int32_t> tokens;
    std::vector<uint64_t> values;  // values[p] names tokens[0..p]
    int64_t computed = 0;
    int64_t known_len = INT64_MAX;  // tokens before the first append without ids
  };

  explicit Harness(const KVCacheConfig& cfg) : cfg_(cfg) {
    Status st = KVCacheManager::make(cfg, &mgr_);
    if (!st.ok()) init_error_ = st.message();
    const int64_t slots = static_cast<int64_t>(cfg.num_blocks) * cfg.block_size;
    kv_.resize(slots);
    for (int64_t i = 0; i < slots; ++i) kv_[i] = mix(0xdeadULL + i);  // poison
    dev_table_.assign(static_cast<size_t>(cfg.max_batch) * cfg.max_blocks_per_seq, 0);
    dev_seqlens_.assign(cfg.max_batch, 0);
  }

  const std::string& init_error() const { return init_error_; }
  KVCacheManager& mgr() { return *mgr_; }
  const std::map<SeqId, Seq>& seqs() const { return seqs_; }
  int64_t steps() const { return steps_; }
  int64_t hits_checked_exact() const { return exact_hit_checks_; }
  int64_t failures_checked() const { return failures_checked_; }

  // create(tokens) with ids given (known) or not. Expects success when the pool and the
  // rows allow it (predicted from the model), ResourceExhausted otherwise.
  std::string create(const std::vector<int32_t>& tokens, bool known, SeqId* out = nullptr) {
    const int B = cfg_.block_size;
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (ceil_div(n, B) > cfg_.max_blocks_per_seq) {
      return expect_failure(Status::Code::kInvalidArgument, "max_blocks_per_seq", [&] {
        SeqId id;
        return mgr_->create(known ? tokens.data() : nullptr, n, &id);
      });
    }
    // Prediction of the prefix hits from the model (exact while nothing was evicted).
    const std::vector<uint64_t> values = values_of(tokens);
    int64_t predicted = 0;
    if (cfg_.prefix_caching && known && n > 1) {
      const std::vector<uint64_t>& v = values;
      for (int64_t i = 0; i < (n - 1) / B; ++i, ++predicted) {
        if (!named_.count(v[(i + 1) * B - 1])) break;
      }
    }
    int32_t need = -1;
    Status st = mgr_->blocks_needed_for_create(known ? tokens.data() : nullptr, n, &need);
    if (!st.ok()) return "blocks_needed_for_create: " + st.message();
    if (mgr_->num_free_rows() == 0 || need > mgr_->num_available_blocks()) {
      return expect_failure(Status::Code::kResourceExhausted, "", [&] {
        SeqId id;
        return mgr_->create(known ? tokens.data() : nullptr, n, &id);
      });
    }
    const int64_t evictions_before = mgr_->stats().evictions;
    SeqId id = 0;
    int64_t cached = -1;
    st = mgr_->create(known ? tokens.data() : nullptr, n, &id, &cached);
    if (!st.ok()) return "create failed unexpectedly: " + st.message();
    if (cached < 0 || cached % B != 0 || (n > 0 && cached > n - 1) || (n == 0 && cached != 0)) {
      return str("create: ", cached, " cached tokens of ", n);
    }
    if (cached / B > predicted) {
      return str("create: ", cached / B, " blocks hit but only ", predicted, " can be cached");
    }
    if (evictions_before == 0 && cached / B != predicted) {
      return str("create: ", cached / B, " blocks hit, expected ", predicted, " (nothing evicted)");
    }
    if (evictions_before == 0) ++exact_hit_checks_;
    if (seqs_.count(id) || id <= last_id_) return str("create: id ", id, " not new");
    last_id_ = id;
    Seq s;
    s.tokens = tokens;
    s.values = values;
    s.computed = cached;
    if (!known && n > 0) s.known_len = 0;
    seqs_[id] = std::move(s);
    if (out) *out = id;
    return check();
  }

  std::string append(SeqId id, const std::vector<int32_t>& tokens, bool known) {
    const int B = cfg_.block_size;
    const int64_t n = static_cast<int64_t>(tokens.size());
    auto it = seqs_.find(id);
    if (it == seqs_.end()) {
      return expect_failure(Status::Code::kInvalidArgument,
                            id >= 1 && id <= last_id_ ? "already freed" : "does not exist",
                            [&] { return mgr_->append(id, tokens.data(), n); });
    }
    Seq& s = it->second;
    const int64_t len = static_cast<int64_t>(s.tokens.size());
    if (ceil_div(len + n, B) > cfg_.max_blocks_per_seq) {
      return expect_failure(Status::Code::kInvalidArgument, "max_blocks_per_seq",
                            [&] { return mgr_->append(id, tokens.data(), n); });
    }
    std::vector<int32_t> blocks;
    mgr_->block_ids(id, &blocks);
    const bool cow = n > 0 && len % B != 0 && mgr_->block_refcount(blocks.back()) > 1;
    const int64_t need = ceil_div(len + n, B) - ceil_div(len, B) + (cow ? 1 : 0);
    int32_t reported = -1;
    Status st = mgr_->blocks_needed_for_append(id, n, &reported);
    if (!st.ok() || reported != need) {
      return str("blocks_needed_for_append: ", reported, " (", st.message(), "), expected ", need);
    }
    if (need > mgr_->num_available_blocks()) {
      return expect_failure(Status::Code::kResourceExhausted, "pool exhausted",
                            [&] { return mgr_->append(id, known ? tokens.data() : nullptr, n); });
    }
    st = mgr_->append(id, known ? tokens.data() : nullptr, n);
    if (!st.ok()) return "append failed unexpectedly: " + st.message();
    if (!known && n > 0) s.known_len = std::min(s.known_len, len);
    s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
    s.values = values_of(s.tokens);
    return check();
  }

  // append_batch(ids, n tokens each, row i of `tokens` for ids[i]): the model's appends one
  // after another, all or nothing. The entries are checked in order (unknown or freed id,
  // listed twice, no room in its row: the first failing entry names the error), then the
  // blocks of the whole batch, copy-on-write included (k appenders of a last block that r
  // sequences hold copy it min(k, r - 1) times), against the pool.
  std::string append_batch(const std::vector<SeqId>& ids, const std::vector<int32_t>& tokens, int64_t n,
                           bool known) {
    const int B = cfg_.block_size;
    const int64_t count = static_cast<int64_t>(ids.size());
    auto call = [&] { return mgr_->append_batch(ids.data(), count, known ? tokens.data() : nullptr, n); };
    std::set<SeqId> seen;
    std::map<int32_t, int64_t> shared;  // shared last block -> appenders in the batch
    int64_t need = 0;
    for (SeqId id : ids) {
      auto it = seqs_.find(id);
      if (it == seqs_.end()) {
        return expect_failure(Status::Code::kInvalidArgument,
                              id >= 1 && id <= last_id_ ? "already freed" : "does not exist", call);
      }
      if (!seen.insert(id).second) return expect_failure(Status::Code::kInvalidArgument, "appears twice", call);
      const int64_t len = static_cast<int64_t>(it->second.tokens.size());
      if (ceil_div(len + n, B) > cfg_.max_blocks_per_seq) {
        return expect_failure(Status::Code::kInvalidArgument, "max_blocks_per_seq", call);
      }
      need += ceil_div(len + n, B) - ceil_div(len, B);
      if (n > 0 && len % B != 0) {
        std::vector<int32_t> blocks;
        mgr_->block_ids(id, &blocks);
        if (mgr_->block_refcount(blocks.back()) > 1) ++shared[blocks.back()];
      }
    }
    for (const auto& [b, k] : shared) need += std::min<int64_t>(k, mgr_->block_refcount(b) - 1);
    if (need > mgr_->num_available_blocks()) {
      return expect_failure(Status::Code::kResourceExhausted, "pool exhausted", call);
    }
    const int64_t available = mgr_->num_available_blocks();
    Status st = call();
    if (!st.ok()) return "append_batch failed unexpectedly: " + st.message();
    if (available - mgr_->num_available_blocks() != need) {
      return str("append_batch took ", available - mgr_->num_available_blocks(), " blocks, expected ", need);
    }
    for (int64_t i = 0; i < count; ++i) {
      Seq& s = seqs_[ids[i]];
      const int64_t len = static_cast<int64_t>(s.tokens.size());
      if (!known && n > 0) s.known_len = std::min(s.known_len, len);
      s.tokens.insert(s.tokens.end(), tokens.begin() + i * n, tokens.begin() + (i + 1) * n);
      s.values = values_of(s.tokens);
    }
    return check();
  }

  std::string fork(SeqId parent, SeqId* out = nullptr) {
    auto it = seqs_.find(parent);
    if (it == seqs_.end()) {
      return expect_failure(Status::Code::kInvalidArgument,
                            parent >= 1 && parent <= last_id_ ? "already freed" : "does not exist",
                            [&] {
                              SeqId c;
                              return mgr_->fork(parent, &c);
                            });
    }
    if (mgr_->num_free_rows() == 0) {
      return expect_failure(Status::Code::kResourceExhausted, "no free block-table row", [&] {
        SeqId c;
        return mgr_->fork(parent, &c);
      });
    }
    SeqId child = 0;
    Status st = mgr_->fork(parent, &child);
    if (!st.ok()) return "fork failed unexpectedly: " + st.message();
    if (seqs_.count(child) || child <= last_id_) return str("fork: id ", child, " not new");
    last_id_ = child;
    seqs_[child] = it->second;
    if (out) *out = child;
    return check();
  }

  std::string free(SeqId id) {
    if (!seqs_.count(id)) {
      return expect_failure(Status::Code::kInvalidArgument,
                            id >= 1 && id <= last_id_ ? "already freed" : "does not exist",
                            [&] { return mgr_->free(id); });
    }
    Status st = mgr_->free(id);
    if (!st.ok()) return "free failed unexpectedly: " + st.message();
    seqs_.erase(id);
    return check();
  }

  // Invalid arguments that must be refused without any change.
  std::string bad_calls(SeqId id) {
    std::string e = expect_failure(Status::Code::kInvalidArgument, "must be >= 0", [&] {
      SeqId c;
      return mgr_->create(nullptr, -1, &c);
    });
    if (!e.empty()) return e;
    if (seqs_.count(id)) {
      e = expect_failure(Status::Code::kInvalidArgument, "must be >= 0",
                         [&] { return mgr_->append(id, nullptr, -3); });
      if (!e.empty()) return e;
      const int64_t len = static_cast<int64_t>(seqs_[id].tokens.size());
      e = expect_failure(Status::Code::kInvalidArgument, "not within",
                         [&] { return mgr_->slot_mapping(id, 0, len + 1, nullptr); });
      if (!e.empty()) return e;
    }
    return expect_failure(Status::Code::kInvalidArgument, "null",
                          [&] { return mgr_->take_updates(nullptr); });
  }

  // The step boundary: take the updates, apply them to the simulated device, run the
  // simulated forward and read every sequence back.
  std::string step() {
    ++steps_;
    std::map<SeqId, std::pair<int64_t, int64_t>> pending;  // id -> [computed, length)
    for (const auto& kv : seqs_) {
      flashkit::KVSeqInfo info;
      Status st = mgr_->sequence_info(kv.first, &info);
      if (!st.ok()) return "sequence_info: " + st.message();
      if (info.num_computed != kv.second.computed) {
        return str("sequence ", kv.first, ": manager says ", info.num_computed,
                   " tokens computed, model ", kv.second.computed);
      }
      pending[kv.first] = {kv.second.computed, static_cast<int64_t>(kv.second.tokens.size())};
    }
    KVCacheUpdates u;
    Status st = mgr_->take_updates(&u);
    if (!st.ok()) return "take_updates: " + st.message();
    std::string e = apply_updates(u, cfg_, &kv_, &dev_table_, &dev_seqlens_);
    if (!e.empty()) return e;
    const int32_t* host = mgr_->host_block_table();
    if (!std::equal(dev_table_.begin(), dev_table_.end(), host)) {
      return "device block table differs from the host copy after the update";
    }
    if (!std::equal(dev_seqlens_.begin(), dev_seqlens_.end(), mgr_->host_seqlens())) {
      return "device seqlens differ from the host copy after the update";
    }
    // Forward: write every pending token through the device table.
    const int B = cfg_.block_size;
    std::map<int64_t, uint64_t> written;
    for (const auto& kv : seqs_) {
      flashkit::KVSeqInfo info;
      mgr_->sequence_info(kv.first, &info);
      if (dev_seqlens_[info.row] != static_cast<int32_t>(kv.second.tokens.size())) {
        return str("sequence ", kv.first, ": device seqlen ", dev_seqlens_[info.row]);
      }
      for (int64_t p = pending[kv.first].first; p < pending[kv.first].second; ++p) {
        const int64_t slot = slot_of(info.row, p);
        if (slot < 0) return str("sequence ", kv.first, ": block id out of range at ", p);
        auto w = written.emplace(slot, kv.second.values[p]);
        if (!w.second && w.first->second != kv.second.values[p]) {
          return str("sequences write different KV into slot ", slot, " (block ", slot / B, ")");
        }
        kv_[slot] = kv.second.values[p];
      }
    }
    for (auto& kv : seqs_) kv.second.computed = static_cast<int64_t>(kv.second.tokens.size());
    // Read back.
    for (const auto& kv : seqs_) {
      flashkit::KVSeqInfo info;
      mgr_->sequence_info(kv.first, &info);
      for (size_t p = 0; p < kv.second.tokens.size(); ++p) {
        const int64_t slot = slot_of(info.row, static_cast<int64_t>(p));
        if (slot < 0 || kv_[slot] != kv.second.values[p]) {
          return str("sequence ", kv.first, " reads wrong KV at position ", p, " (slot ", slot, ")");
        }
      }
    }
    // Prefixes that the cache may now name.
    if (cfg_.prefix_caching) {
      for (const auto& kv : seqs_) {
        const int64_t known = std::min<int64_t>(kv.second.known_len, kv.second.tokens.size());
        for (int64_t end = B; end <= known; end += B) named_.insert(kv.second.values[end - 1]);
      }
    }
    return check();
  }

  // Frees everything and checks that nothing leaked.
  std::string drain() {
    std::vector<SeqId> ids;
    for (const auto& kv : seqs_) ids.push_back(kv.first);
    for (SeqId id : ids) {
      std::string e = free(id);
      if (!e.empty()) return e;
    }
    std::string e = step();
    if (!e.empty()) return e;
    const flashkit::KVCacheStats s = mgr_->stats();
    if (s.used_blocks != 0 || s.in_flight_blocks != 0 || s.available_blocks != cfg_.num_blocks ||
        s.num_sequences != 0 || s.logical_blocks != 0 || mgr_->num_free_rows() != cfg_.max_batch) {
      return str("leak after freeing everything: used ", s.used_blocks, ", in flight ",
                 s.in_flight_blocks, ", available ", s.available_blocks, " of ", cfg_.num_blocks);
    }
    for (int32_t b = 0; b < cfg_.num_blocks; ++b) {
      const KVBlockState st = mgr_->block_state(b);
      if (st != KVBlockState::kFree && st != KVBlockState::kCached) return str("block ", b, " not released");
    }
    return "";
  }

  // The manager's own invariants plus agreement with the model through the public API.
  std::string check() {
    Status st = mgr_->check_invariants();
    if (!st.ok()) return st.message();
    const int B = cfg_.block_size;
    std::vector<SeqId> live = mgr_->live_sequences();
    if (live.size() != seqs_.size()) return str("live sequences: ", live.size(), " vs model ", seqs_.size());
    std::vector<int32_t> owners(cfg_.num_blocks, 0), fill(cfg_.num_blocks, 0);
    std::set<int32_t> rows;
    int64_t logical = 0;
    size_t i = 0;
    for (const auto& kv : seqs_) {
      if (live[i++] != kv.first) return str("live sequence ids differ at ", kv.first);
      flashkit::KVSeqInfo info;
      mgr_->sequence_info(kv.first, &info);
      const int64_t len = static_cast<int64_t>(kv.second.tokens.size());
      if (info.length != len || info.num_blocks != ceil_div(len, B)) {
        return str("sequence ", kv.first, ": length ", info.length, ", model ", len);
      }
      if (!rows.insert(info.row).second) return str("two sequences in row ", info.row);
      std::vector<int32_t> blocks;
      mgr_->block_ids(kv.first, &blocks);
      logical += static_cast<int64_t>(blocks.size());
      for (size_t c = 0; c < blocks.size(); ++c) {
        ++owners[blocks[c]];
        fill[blocks[c]] = c + 1 < blocks.size() ? B : static_cast<int32_t>(len - c * B);
      }
    }
    int64_t used = 0, free_ = 0, cached = 0, in_flight = 0, filled = 0;
    for (int32_t b = 0; b < cfg_.num_blocks; ++b) {
      if (mgr_->block_refcount(b) != owners[b]) {
        return str("block ", b, ": reference count ", mgr_->block_refcount(b), ", owners ", owners[b]);
      }
      switch (mgr_->block_state(b)) {
        case KVBlockState::kUsed: ++used; filled += fill[b]; break;
        case KVBlockState::kFree: ++free_; break;
        case KVBlockState::kCached: ++cached; break;
        case KVBlockState::kInFlight: ++in_flight; break;
      }
      if ((mgr_->block_state(b) == KVBlockState::kUsed) != (owners[b] > 0)) {
        return str("block ", b, ": state vs owners");
      }
    }
    const flashkit::KVCacheStats s = mgr_->stats();
    if (s.used_blocks != used || s.free_blocks != free_ || s.cached_blocks != cached ||
        s.in_flight_blocks != in_flight || s.logical_blocks != logical || s.filled_slots != filled ||
        s.num_sequences != static_cast<int64_t>(seqs_.size()) ||
        s.available_blocks != free_ + cached || mgr_->num_available_blocks() != free_ + cached) {
      return "statistics disagree with the model";
    }
    if (!cfg_.prefix_caching && cached != 0) return "cached blocks without prefix caching";
    const double waste = used ? double(used * B - filled) / double(used * B) : 0.0;
    const double sharing = used ? double(logical) / double(used) : 1.0;
    if (s.internal_waste != waste || s.sharing_ratio != sharing) return "waste or sharing ratio";
    return "";
  }

 private:
  template <typename F>
  std::string expect_failure(Status::Code code, const std::string& needle, F call) {
    const std::string before = mgr_->debug_state();
    Status st = call();
    if (st.ok()) return "a call that must fail succeeded";
    if (st.code() != code) return "wrong error code: " + st.message();
    if (!needle.empty() && st.message().find(needle) == std::string::npos) {
      return str("error message lacks '", needle, "': ", st.message());
    }
    if (mgr_->debug_state() != before) return "a failed call changed the state: " + st.message();
    ++failures_checked_;
    return check();
  }

  std::vector<uint64_t> values_of(const std::vector<int32_t>& tokens) const {
    std::vector<uint64_t> v(tokens.size());
    uint64_t h = 0x1234;
    for (size_t p = 0; p < tokens.size(); ++p) v[p] = h = mix(h ^ static_cast<uint32_t>(tokens[p]));
    return v;
  }

  int64_t slot_of(int32_t row, int64_t p) const {
    const int B = cfg_.block_size;
    const int32_t b = dev_table_[static_cast<size_t>(row) * cfg_.max_blocks_per_seq + p / B];
    if (b < 0 || b >= cfg_.num_blocks) return -1;
    return static_cast<int64_t>(b) * B + p % B;
  }

  KVCacheConfig cfg_;
  std::unique_ptr<KVCacheManager> mgr_;
  std::string init_error_;
  std::map<SeqId, Seq> seqs_;
  std::set<uint64_t> named_;     // prefix values of blocks that may be cached
  SeqId last_id_ = 0;
  std::vector<uint64_t> kv_;
  std::vector<int32_t> dev_table_, dev_seqlens_;
  int64_t steps_ = 0, exact_hit_checks_ = 0, failures_checked_ = 0;
};

// A source of choices: a seeded generator (property tests) or the fuzzer's bytes.
struct Source {
  virtual ~Source() = default;
  virtual uint32_t next(uint32_t n) = 0;  // in [0, n)
  virtual bool done() const = 0;
};

// Random operations on `h`: creates (prompts drawn from a few shared prefixes so that
// prefix hits happen), appends, forks, frees, step boundaries, and bad calls (unknown
// and freed ids, negative counts, over-long sequences; exhaustion happens on its own with
// small pools). Stops at the first violation and returns it, or "" after `max_ops`.
inline std::string run_ops(Harness& h, Source& src, int64_t max_ops) {
  const KVCacheConfig& cfg = h.mgr().config();
  const int B = cfg.block_size;
  const int64_t max_len = static_cast<int64_t>(cfg.max_blocks_per_seq) * B;
  auto tokens = [&](int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(src.next(3));  // tiny alphabet: equal blocks happen
    return t;
  };
  auto pick = [&]() -> SeqId {  // a live id mostly, sometimes a freed or unknown one
    const auto& seqs = h.seqs();
    const uint32_t r = src.next(16);
    if (seqs.empty() || r == 0) return static_cast<SeqId>(src.next(8)) - 2;
    if (r == 1) return static_cast<SeqId>(1 + src.next(64));
    auto it = seqs.begin();
    std::advance(it, src.next(static_cast<uint32_t>(seqs.size())));
    return it->first;
  };
  for (int64_t op = 0; op < max_ops && !src.done(); ++op) {
    const uint32_t r = src.next(100);
    std::string e;
    if (r < 22) {
      // A prompt: one of three fixed prefixes (cut anywhere), then random tokens.
      const uint32_t family = src.next(4);
      int64_t n = src.next(static_cast<uint32_t>(std::min<int64_t>(max_len + 2, 4 * B + 3)));
      if (src.next(32) == 0) n = max_len + 1 + src.next(3);  // too long
      std::vector<int32_t> t(static_cast<size_t>(n));
      const int64_t shared = family < 3 ? src.next(static_cast<uint32_t>(n + 1)) : 0;
      for (int64_t i = 0; i < n; ++i) {
        t[i] = i < shared ? static_cast<int32_t>(mix(family * 1000 + i) % 5) : static_cast<int32_t>(src.next(3));
      }
      e = h.create(t, src.next(8) != 0);
    } else if (r < 44) {
      const SeqId id = pick();
      int64_t n = src.next(4) ? 1 : src.next(static_cast<uint32_t>(2 * B + 2));
      if (src.next(64) == 0) n = max_len + 1;
      e = h.append(id, tokens(n), src.next(16) != 0);
    } else if (r < 52) {
      // A decode step's batch: a few ids (live mostly; repeats and bad ids happen), n each.
      std::vector<SeqId> ids(1 + src.next(8));
      for (auto& id : ids) id = pick();
      int64_t n = src.next(4) ? 1 : src.next(static_cast<uint32_t>(2 * B + 2));
      if (src.next(64) == 0) n = max_len + 1;
      e = h.append_batch(ids, tokens(n * static_cast<int64_t>(ids.size())), n, src.next(16) != 0);
    } else if (r < 62) {
      e = h.fork(pick());
    } else if (r < 76) {
      e = h.free(pick());
    } else if (r < 95) {
      e = h.step();
    } else {
      e = h.bad_calls(pick());
    }
    if (!e.empty()) return str("op ", op, ": ", e);
  }
  return h.drain();
}

}  // namespace kvtest
