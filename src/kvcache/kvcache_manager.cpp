// The paged KV-cache manager: host bookkeeping only (plain C++17, no CUDA).
// Design, invariants and complexity: docs/kvcache.md. Public contract: flashkit/kvcache.h.
//
// Every mutating operation is split in two: a check that computes everything the operation
// needs (blocks, rows, prefix hits) and returns an error without touching the state, then
// an execution that cannot fail. That is the strong guarantee.
#include "flashkit/kvcache.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>  // debug_state only (a test hook)
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "kvcache/prefix_hash.h"

namespace flashkit {

namespace {

// Message pieces joined without iostreams: an ostringstream in this library crashed in
// std::locale code inside a torch process on the GPU machine (tests/python/test_kvcache_gpu.py,
// 2026-11-23); std::to_string has no locale machinery.
inline void add_part(std::string& s, const std::string& x) { s += x; }
inline void add_part(std::string& s, const char* x) { s += x; }
inline void add_part(std::string& s, char x) { s += x; }
template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
void add_part(std::string& s, T x) {
  s += std::to_string(x);
}

template <typename... Ts>
std::string cat(const Ts&... parts) {
  std::string s;
  (add_part(s, parts), ...);
  return s;
}

const char* state_name(KVBlockState s) {
  switch (s) {
    case KVBlockState::kFree: return "free";
    case KVBlockState::kUsed: return "used";
    case KVBlockState::kCached: return "cached";
    case KVBlockState::kInFlight: return "in-flight";
  }
  return "?";
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

FLASHKIT_KVCACHE_API Status validate_kvcache_config(const KVCacheConfig& c) {
  if (c.num_blocks <= 0) {
    return Status::Invalid(cat("KVCacheConfig.num_blocks: expected > 0, got ", c.num_blocks));
  }
  if (c.block_size <= 0 || c.block_size > 4096) {
    return Status::Invalid(
        cat("KVCacheConfig.block_size: expected 1..4096 tokens, got ", c.block_size));
  }
  if (c.max_batch <= 0) {
    return Status::Invalid(cat("KVCacheConfig.max_batch: expected > 0, got ", c.max_batch));
  }
  if (c.max_blocks_per_seq <= 0) {
    return Status::Invalid(
        cat("KVCacheConfig.max_blocks_per_seq: expected > 0, got ", c.max_blocks_per_seq));
  }
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (static_cast<int64_t>(c.num_blocks) * c.block_size > kMax) {
    return Status::Invalid(cat("KVCacheConfig: num_blocks * block_size = ",
                               static_cast<int64_t>(c.num_blocks) * c.block_size,
                               " cache slots do not fit int32 slot indices (max ", kMax, ")"));
  }
  if (static_cast<int64_t>(c.max_blocks_per_seq) * c.block_size > kMax) {
    return Status::Invalid(cat("KVCacheConfig: a sequence of max_blocks_per_seq * block_size = ",
                               static_cast<int64_t>(c.max_blocks_per_seq) * c.block_size,
                               " tokens does not fit the int32 seqlens"));
  }
  if (static_cast<int64_t>(c.max_batch) * c.max_blocks_per_seq > kMax) {
    return Status::Invalid(cat("KVCacheConfig: the block table max_batch x max_blocks_per_seq = ",
                               c.max_batch, " x ", c.max_blocks_per_seq,
                               " has more than 2^31 - 1 entries"));
  }
  return Status::Ok();
}

struct KVCacheManager::Impl {
  struct Block {
    int32_t ref = 0;           // owners (sequences holding it in their rows)
    int32_t fill = 0;          // slots holding a token (meaningful while used or cached)
    int32_t copy_readers = 0;  // queued copies reading it
    int32_t lru_prev = -1;     // LRU list links (cached blocks only)
    int32_t lru_next = -1;
    KVBlockState state = KVBlockState::kFree;
    bool registered = false;        // named in the prefix cache (`cache`)
    bool pending_register = false;  // became full this step; named at take_updates()
    uint64_t hash = 0;              // name, valid when registered or pending_register
    uint64_t parent_hash = 0;       // name of its prefix, likewise
  };
  struct Seq {
    SeqId id = 0;  // 0: the row is free
    int64_t len = 0;
    int64_t computed = 0;
    uint64_t chain = 0;        // name of its last full block (root if none)
    bool tokens_known = true;  // every token id so far was given
  };
  struct Copy {
    int32_t src;  // -1: cancelled (its destination was freed)
    int32_t dst;
  };
  // Row-level change tracking for the next take_updates().
  struct Dirty {
    bool listed = false;
    int32_t col_lo = std::numeric_limits<int32_t>::max();
    int32_t col_hi = 0;  // [col_lo, col_hi) changed; empty when col_lo >= col_hi
  };

  KVCacheConfig cfg;
  int32_t B;      // block size
  int32_t width;  // max_blocks_per_seq
  uint64_t root;

  std::vector<Block> blocks;
  std::vector<int32_t> block_tokens;  // [num_blocks * B] token ids (prefix caching only)
  std::vector<int32_t> free_list;     // stack of kFree blocks
  int32_t lru_head = -1, lru_tail = -1, num_cached = 0;  // kCached blocks, oldest first
  std::vector<int32_t> in_flight;     // kInFlight blocks (released at take_updates)
  std::unordered_map<uint64_t, int32_t> cache;  // name -> block (registered blocks)
  std::vector<int32_t> pending_register;        // blocks that became full this step

  std::vector<Seq> rows;                    // [max_batch]
  std::vector<int32_t> free_rows;           // stack, lowest row on top initially
  std::unordered_map<SeqId, int32_t> row_of;
  SeqId next_id = 1;

  std::vector<int32_t> table;    // host block table [max_batch * width]
  std::vector<int32_t> seqlens;  // [max_batch]
  std::vector<Dirty> dirty;      // [max_batch]
  std::vector<int32_t> dirty_rows;

  std::vector<Copy> copies;
  std::unordered_map<int32_t, int32_t> copy_into;  // dst -> index in `copies`

  // append_batch() scratch: batch_pos[row] = 1 + the row's entry in the batch being checked
  // (0 otherwise; every call leaves it all 0), the rows of that batch, and the shared last
  // blocks its appends would copy.
  std::vector<int32_t> batch_pos, batch_rows, batch_shared;

  int64_t used_fill = 0;       // sum of fill over used blocks
  int64_t logical_blocks = 0;  // sum of ceil(len / B) over live sequences
  int64_t prompt_tokens = 0, hit_tokens = 0, cow_copies = 0, evictions = 0;

  explicit Impl(const KVCacheConfig& c)
      : cfg(c), B(c.block_size), width(c.max_blocks_per_seq), root(kvcache::root_hash(c.block_size)) {
    blocks.resize(c.num_blocks);
    if (c.prefix_caching) block_tokens.assign(static_cast<size_t>(c.num_blocks) * B, 0);
    free_list.reserve(c.num_blocks);
    for (int32_t b = c.num_blocks - 1; b >= 0; --b) free_list.push_back(b);  // 0 on top
    rows.resize(c.max_batch);
    free_rows.reserve(c.max_batch);
    for (int32_t r = c.max_batch - 1; r >= 0; --r) free_rows.push_back(r);
    table.assign(static_cast<size_t>(c.max_batch) * width, 0);
    seqlens.assign(c.max_batch, 0);
    dirty.resize(c.max_batch);
  }

  // --- small helpers ----------------------------------------------------------------------

  int32_t& entry(int32_t row, int64_t col) { return table[static_cast<size_t>(row) * width + col]; }
  int32_t entry(int32_t row, int64_t col) const {
    return table[static_cast<size_t>(row) * width + col];
  }
  int32_t* tokens_of(int32_t b) { return block_tokens.data() + static_cast<size_t>(b) * B; }
  const int32_t* tokens_of(int32_t b) const {
    return block_tokens.data() + static_cast<size_t>(b) * B;
  }
  int64_t available() const { return static_cast<int64_t>(free_list.size()) + num_cached; }

  void mark_row(int32_t row) {
    if (!dirty[row].listed) {
      dirty[row].listed = true;
      dirty_rows.push_back(row);
    }
  }
  void set_entry(int32_t row, int32_t col, int32_t block) {
    entry(row, col) = block;
    mark_row(row);
    Dirty& d = dirty[row];
    d.col_lo = std::min(d.col_lo, col);
    d.col_hi = std::max(d.col_hi, col + 1);
  }
  void set_seqlen(int32_t row, int64_t len) {
    seqlens[row] = static_cast<int32_t>(len);
    mark_row(row);
  }

  void lru_push_back(int32_t b) {
    Block& k = blocks[b];
    k.lru_prev = lru_tail;
    k.lru_next = -1;
    if (lru_tail >= 0) blocks[lru_tail].lru_next = b;
    else lru_head = b;
    lru_tail = b;
    ++num_cached;
  }
  void lru_remove(int32_t b) {
    Block& k = blocks[b];
    if (k.lru_prev >= 0) blocks[k.lru_prev].lru_next = k.lru_next;
    else lru_head = k.lru_next;
    if (k.lru_next >= 0) blocks[k.lru_next].lru_prev = k.lru_prev;
    else lru_tail = k.lru_prev;
    k.lru_prev = k.lru_next = -1;
    --num_cached;
  }

  Status lookup(SeqId id, const char* op, int32_t* row) const {
    auto it = row_of.find(id);
    if (it != row_of.end()) {
      *row = it->second;
      return Status::Ok();
    }
    if (id >= 1 && id < next_id) {
      return Status::Invalid(cat(op, ": sequence ", id, " was already freed"));
    }
    return Status::Invalid(cat(op, ": sequence ", id, " does not exist (ids handed out so far: ",
                               next_id > 1 ? cat("1..", next_id - 1) : std::string("none"), ")"));
  }

  // --- block life cycle ---------------------------------------------------------------------

  // A block for a new owner: a free one, else the least recently used cached one (evicted).
  // Precondition: available() > 0.
  int32_t allocate() {
    int32_t b;
    if (!free_list.empty()) {
      b = free_list.back();
      free_list.pop_back();
    } else {
      b = lru_head;
      lru_remove(b);
      cache.erase(blocks[b].hash);
      blocks[b].registered = false;
      ++evictions;
    }
    Block& k = blocks[b];
    k.state = KVBlockState::kUsed;
    k.ref = 1;
    k.fill = 0;
    k.pending_register = false;
    return b;
  }

  // A cached block found by a prefix hit gains an owner.
  void take_hit(int32_t b) {
    Block& k = blocks[b];
    if (k.state == KVBlockState::kCached) {
      lru_remove(b);
      k.state = KVBlockState::kUsed;
      used_fill += k.fill;
    }
    ++k.ref;
  }

  // Drops one owner; the last one sends the block to in-flight, cached or free.
  void release(int32_t b) {
    Block& k = blocks[b];
    if (--k.ref > 0) return;
    used_fill -= k.fill;
    k.pending_register = false;  // its KV will not be written: never name it
    auto it = copy_into.find(b);
    if (it != copy_into.end()) {  // nobody needs the copy into it any more
      Copy& c = copies[it->second];
      --blocks[c.src].copy_readers;
      c.src = -1;
      copy_into.erase(it);
    }
    if (k.copy_readers > 0) {
      k.state = KVBlockState::kInFlight;
      in_flight.push_back(b);
    } else if (k.registered) {
      k.state = KVBlockState::kCached;
      lru_push_back(b);
    } else {
      k.state = KVBlockState::kFree;
      free_list.push_back(b);
    }
  }

  // Queues the copy that fills `dst`, a copy-on-write duplicate of `src`. If `src` is
  // itself the destination of a copy queued this step, it holds nothing yet: copy from
  // that copy's source instead (so no block is both read and written by one launch).
  void queue_copy(int32_t src, int32_t dst) {
    auto it = copy_into.find(src);
    if (it != copy_into.end()) src = copies[it->second].src;
    copy_into[dst] = static_cast<int32_t>(copies.size());
    copies.push_back(Copy{src, dst});
    ++blocks[src].copy_readers;
  }

  // --- planning (no state change) -------------------------------------------------------------

  // Blocks an append of n tokens to `s` needs from the pool: new blocks plus one for
  // copy-on-write when the partially filled last block is shared.
  int64_t append_need(const Seq& s, int32_t row, int64_t n) const {
    const int64_t old_blocks = ceil_div(s.len, B);
    const int64_t new_blocks = ceil_div(s.len + n, B);
    bool cow = false;
    if (n > 0 && s.len % B != 0) cow = blocks[entry(row, old_blocks - 1)].ref > 1;
    return new_blocks - old_blocks + (cow ? 1 : 0);
  }

  // `who`: "append(): sequence 3", "create(): the prompt", ...
  Status check_row_capacity(const std::string& who, int64_t new_len) const {
    const int64_t need = ceil_div(new_len, B);
    if (need > width) {
      return Status::Invalid(cat(who, " would hold ", new_len, " tokens in ", need, " blocks of ",
                                 B, " tokens, but a block-table row holds ", width,
                                 " blocks (max_blocks_per_seq) = ", static_cast<int64_t>(width) * B,
                                 " tokens; nothing was changed"));
    }
    return Status::Ok();
  }

  // The cached full blocks that start a prompt: stops at the first miss, and leaves at
  // least the last token uncached.
  struct PrefixHits {
    std::vector<int32_t> blocks;
    int64_t from_cache_list = 0;  // of those, kCached (they leave the available count)
    uint64_t chain = 0;
  };
  PrefixHits find_prefix(const int32_t* tokens, int64_t n) const {
    PrefixHits h;
    h.chain = root;
    if (!cfg.prefix_caching || tokens == nullptr || n <= 1) return h;
    const int64_t max_blocks = (n - 1) / B;
    for (int64_t i = 0; i < max_blocks; ++i) {
      const int32_t* t = tokens + i * B;
      const uint64_t name = kvcache::block_hash(h.chain, t, B);
      auto it = cache.find(name);
      if (it == cache.end()) break;
      const int32_t b = it->second;
      const Block& k = blocks[b];
      if (k.parent_hash != h.chain || std::memcmp(tokens_of(b), t, sizeof(int32_t) * B) != 0) {
        break;  // a 64-bit collision: not the same prefix
      }
      h.blocks.push_back(b);
      if (k.state == KVBlockState::kCached) ++h.from_cache_list;
      h.chain = name;
    }
    return h;
  }

  // --- execution (cannot fail) -----------------------------------------------------------------

  // Appends n tokens to the sequence in `row` (the pool has been checked).
  void do_append(int32_t row, const int32_t* tokens, int64_t n) {
    Seq& s = rows[row];
    if (n == 0) return;
    if (tokens == nullptr) s.tokens_known = false;
    const bool keep_tokens = cfg.prefix_caching && s.tokens_known;
    const int64_t old_blocks = ceil_div(s.len, B);
    if (s.len % B != 0) {
      const int32_t col = static_cast<int32_t>(old_blocks - 1);
      const int32_t old = entry(row, col);
      if (blocks[old].ref > 1) {  // copy-on-write
        const int32_t fresh = allocate();
        Block& k = blocks[fresh];
        k.fill = blocks[old].fill;
        used_fill += k.fill;
        if (cfg.prefix_caching) std::memcpy(tokens_of(fresh), tokens_of(old), sizeof(int32_t) * k.fill);
        // Copy only when some of the block's tokens have their KV (pending ones are
        // written by the forward into the new block anyway).
        if (s.computed > static_cast<int64_t>(col) * B) queue_copy(old, fresh);
        set_entry(row, col, fresh);
        release(old);  // still owned by the others
        ++cow_copies;
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = s.len + i;
      const int32_t col = static_cast<int32_t>(pos / B);
      const int32_t off = static_cast<int32_t>(pos % B);
      if (off == 0) set_entry(row, col, allocate());
      const int32_t b = entry(row, col);
      Block& k = blocks[b];
      if (keep_tokens) tokens_of(b)[off] = tokens[i];
      ++k.fill;
      ++used_fill;
      if (k.fill == B && keep_tokens) {  // full: name it now, cache it at take_updates()
        k.parent_hash = s.chain;
        k.hash = kvcache::block_hash(s.chain, tokens_of(b), B);
        k.pending_register = true;
        pending_register.push_back(b);
        s.chain = k.hash;
      }
    }
    s.len += n;
    logical_blocks += ceil_div(s.len, B) - old_blocks;
    set_seqlen(row, s.len);
  }

  int32_t open_row(uint64_t chain, bool tokens_known) {
    const int32_t row = free_rows.back();
    free_rows.pop_back();
    Seq& s = rows[row];
    s = Seq{};
    s.id = next_id++;
    s.chain = chain;
    s.tokens_known = tokens_known;
    row_of.emplace(s.id, row);
    return row;
  }
};

// --- KVCacheManager ------------------------------------------------------------------------

KVCacheManager::KVCacheManager(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KVCacheManager::~KVCacheManager() = default;

Status KVCacheManager::make(const KVCacheConfig& config, std::unique_ptr<KVCacheManager>* out) {
  if (out == nullptr) return Status::Invalid("KVCacheManager::make: out must not be null");
  Status st = validate_kvcache_config(config);
  if (!st.ok()) return st;
  out->reset(new KVCacheManager(std::make_unique<Impl>(config)));
  return Status::Ok();
}

Status KVCacheManager::create(const int32_t* tokens, int64_t num_tokens, SeqId* id,
                              int64_t* num_cached_tokens) {
  Impl& m = *impl_;
  if (id == nullptr) return Status::Invalid("create(): id must not be null");
  if (num_tokens < 0) {
    return Status::Invalid(cat("create(): num_tokens must be >= 0, got ", num_tokens));
  }
  Status st = m.check_row_capacity("create(): the prompt", num_tokens);
  if (!st.ok()) return st;
  if (m.free_rows.empty()) {
    return Status::Exhausted(cat("create(): no free block-table row: all ", m.cfg.max_batch,
                                 " rows (max_batch) hold live sequences; nothing was changed"));
  }
  const Impl::PrefixHits hits = m.find_prefix(tokens, num_tokens);
  const int64_t reused = static_cast<int64_t>(hits.blocks.size());
  const int64_t fresh = ceil_div(num_tokens, m.B) - reused;
  const int64_t available = m.available() - hits.from_cache_list;
  if (fresh > available) {
    return Status::Exhausted(cat(
        "create(): KV-cache pool exhausted: a prompt of ", num_tokens, " tokens needs ", fresh,
        " new blocks (", reused, " more reused from the prefix cache), ", available,
        " available (", m.free_list.size(), " free, ", m.num_cached - hits.from_cache_list,
        " cached, ", m.in_flight.size(), " in flight until take_updates()); nothing was changed"));
  }
  const int32_t row = m.open_row(hits.chain, tokens != nullptr || num_tokens == 0);
  Impl::Seq& s = m.rows[row];
  for (size_t i = 0; i < hits.blocks.size(); ++i) {
    m.take_hit(hits.blocks[i]);
    m.set_entry(row, static_cast<int32_t>(i), hits.blocks[i]);
  }
  s.len = s.computed = reused * m.B;
  m.logical_blocks += reused;
  m.set_seqlen(row, s.len);
  m.do_append(row, tokens == nullptr ? nullptr : tokens + s.len, num_tokens - s.len);
  if (tokens != nullptr) {
    m.prompt_tokens += num_tokens;
    m.hit_tokens += reused * m.B;
  }
  *id = s.id;
  if (num_cached_tokens) *num_cached_tokens = reused * m.B;
  return Status::Ok();
}

Status KVCacheManager::append(SeqId id, const int32_t* tokens, int64_t num_tokens) {
  Impl& m = *impl_;
  int32_t row = -1;
  Status st = m.lookup(id, "append()", &row);
  if (!st.ok()) return st;
  if (num_tokens < 0) {
    return Status::Invalid(cat("append(): num_tokens must be >= 0, got ", num_tokens));
  }
  const Impl::Seq& s = m.rows[row];
  if (ceil_div(s.len + num_tokens, m.B) > m.width) {  // the message is built only then
    return m.check_row_capacity(cat("append(): sequence ", id), s.len + num_tokens);
  }
  const int64_t need = m.append_need(s, row, num_tokens);
  if (need > m.available()) {
    return Status::Exhausted(cat(
        "append(): KV-cache pool exhausted: sequence ", id, " needs ", need,
        " new blocks for ", num_tokens, " tokens, ", m.available(), " available (",
        m.free_list.size(), " free, ", m.num_cached, " cached, ", m.in_flight.size(),
        " in flight until take_updates()); nothing was changed"));
  }
  m.do_append(row, tokens, num_tokens);
  return Status::Ok();
}

Status KVCacheManager::append_batch(const SeqId* ids, int64_t count, const int32_t* tokens,
                                    int64_t num_tokens) {
  Impl& m = *impl_;
  if (count < 0) return Status::Invalid(cat("append_batch(): count must be >= 0, got ", count));
  if (count > 0 && ids == nullptr) return Status::Invalid("append_batch(): ids must not be null");
  if (num_tokens < 0) {
    return Status::Invalid(cat("append_batch(): num_tokens must be >= 0, got ", num_tokens));
  }
  if (m.batch_pos.size() != m.rows.size()) m.batch_pos.assign(m.rows.size(), 0);
  m.batch_rows.resize(static_cast<size_t>(count));
  m.batch_shared.clear();
  // 1. Resolve and check every entry; batch_pos marks the rows seen (cleared on every exit).
  auto unmark = [&](int64_t upto) {
    for (int64_t i = 0; i < upto; ++i) m.batch_pos[m.batch_rows[i]] = 0;
  };
  int64_t need = 0;
  for (int64_t i = 0; i < count; ++i) {
    auto it = m.row_of.find(ids[i]);
    if (it == m.row_of.end()) {
      int32_t unused = -1;
      const Status st = m.lookup(ids[i], "append_batch()", &unused);
      unmark(i);
      return Status::Invalid(cat(st.message(), " (entry ", i, " of ", count, "); nothing was changed"));
    }
    const int32_t row = it->second;
    if (m.batch_pos[row] != 0) {
      const int64_t first = m.batch_pos[row] - 1;
      unmark(i);
      return Status::Invalid(cat("append_batch(): sequence ", ids[i], " appears twice (entries ", first,
                                 " and ", i, "); nothing was changed"));
    }
    m.batch_rows[i] = row;
    m.batch_pos[row] = static_cast<int32_t>(i + 1);  // i < max_batch here: a longer batch repeats a row
    const Impl::Seq& s = m.rows[row];
    if (ceil_div(s.len + num_tokens, m.B) > m.width) {
      const Status st = m.check_row_capacity(cat("append_batch(): sequence ", ids[i]), s.len + num_tokens);
      unmark(i + 1);
      return Status::Invalid(cat(st.message(), " (entry ", i, " of ", count, ")"));
    }
    need += ceil_div(s.len + num_tokens, m.B) - ceil_div(s.len, m.B);
    if (num_tokens > 0 && s.len % m.B != 0) {
      const int32_t last = m.entry(row, static_cast<int32_t>(ceil_div(s.len, m.B) - 1));
      if (m.blocks[last].ref > 1) m.batch_shared.push_back(last);
    }
  }
  unmark(count);
  // 2. Copy-on-write: k appenders of a last block held by r sequences copy min(k, r - 1)
  // times (append() one after another: the last holder writes in place).
  std::sort(m.batch_shared.begin(), m.batch_shared.end());
  for (size_t i = 0; i < m.batch_shared.size();) {
    size_t j = i;
    while (j < m.batch_shared.size() && m.batch_shared[j] == m.batch_shared[i]) ++j;
    need += std::min<int64_t>(static_cast<int64_t>(j - i), m.blocks[m.batch_shared[i]].ref - 1);
    i = j;
  }
  if (need > m.available()) {
    return Status::Exhausted(cat(
        "append_batch(): KV-cache pool exhausted: ", count, " sequences need ", need, " new blocks for ",
        num_tokens, " tokens each, ", m.available(), " available (", m.free_list.size(), " free, ",
        m.num_cached, " cached, ", m.in_flight.size(), " in flight until take_updates()); nothing was changed"));
  }
  // 3. Apply, in the order given (as append() calls would).
  for (int64_t i = 0; i < count; ++i) {
    m.do_append(m.batch_rows[i], tokens != nullptr ? tokens + i * num_tokens : nullptr, num_tokens);
  }
  return Status::Ok();
}

Status KVCacheManager::fork(SeqId parent, SeqId* child) {
  Impl& m = *impl_;
  if (child == nullptr) return Status::Invalid("fork(): child must not be null");
  int32_t prow = -1;
  Status st = m.lookup(parent, "fork()", &prow);
  if (!st.ok()) return st;
  if (m.free_rows.empty()) {
    return Status::Exhausted(cat("fork(): no free block-table row for a child of sequence ",
                                 parent, ": all ", m.cfg.max_batch,
                                 " rows (max_batch) hold live sequences; nothing was changed"));
  }
  const Impl::Seq p = m.rows[prow];
  const int32_t row = m.open_row(p.chain, p.tokens_known);
  Impl::Seq& s = m.rows[row];
  s.len = p.len;
  s.computed = p.computed;
  const int64_t n = ceil_div(p.len, m.B);
  for (int64_t c = 0; c < n; ++c) {
    const int32_t b = m.entry(prow, c);
    ++m.blocks[b].ref;
    m.set_entry(row, static_cast<int32_t>(c), b);
  }
  m.logical_blocks += n;
  m.set_seqlen(row, s.len);
  *child = s.id;
  return Status::Ok();
}

Status KVCacheManager::free(SeqId id) {
  Impl& m = *impl_;
  int32_t row = -1;
  Status st = m.lookup(id, "free()", &row);
  if (!st.ok()) return st;
  Impl::Seq& s = m.rows[row];
  const int64_t n = ceil_div(s.len, m.B);
  // Tail first: a freed sequence's last blocks are evicted before its first ones, which
  // other prompts are likelier to share.
  for (int64_t c = n - 1; c >= 0; --c) m.release(m.entry(row, c));
  m.logical_blocks -= n;
  m.row_of.erase(id);
  s = Impl::Seq{};
  m.set_seqlen(row, 0);
  m.free_rows.push_back(row);
  return Status::Ok();
}

Status KVCacheManager::blocks_needed_for_create(const int32_t* tokens, int64_t num_tokens,
                                                int32_t* blocks) const {
  const Impl& m = *impl_;
  if (blocks == nullptr) return Status::Invalid("blocks_needed_for_create(): blocks must not be null");
  if (num_tokens < 0) {
    return Status::Invalid(cat("blocks_needed_for_create(): num_tokens must be >= 0, got ", num_tokens));
  }
  Status st = m.check_row_capacity("blocks_needed_for_create(): the prompt", num_tokens);
  if (!st.ok()) return st;
  const Impl::PrefixHits hits = m.find_prefix(tokens, num_tokens);
  const int64_t fresh = ceil_div(num_tokens, m.B) - static_cast<int64_t>(hits.blocks.size());
  *blocks = static_cast<int32_t>(fresh + hits.from_cache_list);
  return Status::Ok();
}

Status KVCacheManager::blocks_needed_for_append(SeqId id, int64_t num_tokens, int32_t* blocks) const {
  const Impl& m = *impl_;
  if (blocks == nullptr) return Status::Invalid("blocks_needed_for_append(): blocks must not be null");
  int32_t row = -1;
  Status st = m.lookup(id, "blocks_needed_for_append()", &row);
  if (!st.ok()) return st;
  if (num_tokens < 0) {
    return Status::Invalid(cat("blocks_needed_for_append(): num_tokens must be >= 0, got ", num_tokens));
  }
  st = m.check_row_capacity(cat("blocks_needed_for_append(): sequence ", id), m.rows[row].len + num_tokens);
  if (!st.ok()) return st;
  *blocks = static_cast<int32_t>(m.append_need(m.rows[row], row, num_tokens));
  return Status::Ok();
}

Status KVCacheManager::take_updates(KVCacheUpdates* out) {
  Impl& m = *impl_;
  if (out == nullptr) return Status::Invalid("take_updates(): out must not be null");
  // Pack: copies, row headers, then the changed block ids of each row.
  int32_t num_copies = 0;
  for (const Impl::Copy& c : m.copies) num_copies += c.src >= 0;
  const int32_t num_rows = static_cast<int32_t>(m.dirty_rows.size());
  int64_t data = 0;
  for (int32_t r : m.dirty_rows) {
    const Impl::Dirty& d = m.dirty[r];
    if (d.col_lo < d.col_hi) data += d.col_hi - d.col_lo;
  }
  std::vector<int32_t>& buf = out->buffer;
  buf.clear();
  buf.reserve(2 * static_cast<size_t>(num_copies) + 5 * static_cast<size_t>(num_rows) + data);
  for (const Impl::Copy& c : m.copies) {
    if (c.src < 0) continue;
    buf.push_back(c.src);
    buf.push_back(c.dst);
  }
  int64_t offset = 2 * static_cast<int64_t>(num_copies) + 5 * static_cast<int64_t>(num_rows);
  for (int32_t r : m.dirty_rows) {
    const Impl::Dirty& d = m.dirty[r];
    const int32_t lo = d.col_lo < d.col_hi ? d.col_lo : 0;
    const int32_t count = d.col_lo < d.col_hi ? d.col_hi - d.col_lo : 0;
    buf.insert(buf.end(), {r, m.seqlens[r], lo, count, static_cast<int32_t>(offset)});
    offset += count;
  }
  for (int32_t r : m.dirty_rows) {
    const Impl::Dirty& d = m.dirty[r];
    for (int32_t c = d.col_lo; c < d.col_hi; ++c) buf.push_back(m.entry(r, c));
  }
  out->num_copies = num_copies;
  out->num_rows = num_rows;

  // Commit the step.
  for (Impl::Seq& s : m.rows) {
    if (s.id != 0) s.computed = s.len;
  }
  for (int32_t b : m.pending_register) {
    Impl::Block& k = m.blocks[b];
    if (!k.pending_register) continue;  // freed since, or listed twice
    k.pending_register = false;
    if (m.cache.emplace(k.hash, b).second) k.registered = true;  // else a duplicate
  }
  m.pending_register.clear();
  for (const Impl::Copy& c : m.copies) {
    if (c.src >= 0) --m.blocks[c.src].copy_readers;
  }
  m.copies.clear();
  m.copy_into.clear();
  for (int32_t b : m.in_flight) {
    Impl::Block& k = m.blocks[b];
    if (k.registered) {
      k.state = KVBlockState::kCached;
      m.lru_push_back(b);
    } else {
      k.state = KVBlockState::kFree;
      m.free_list.push_back(b);
    }
  }
  m.in_flight.clear();
  for (int32_t r : m.dirty_rows) m.dirty[r] = Impl::Dirty{};
  m.dirty_rows.clear();
  return Status::Ok();
}

// --- queries -----------------------------------------------------------------------------------

const KVCacheConfig& KVCacheManager::config() const { return impl_->cfg; }

KVCacheStats KVCacheManager::stats() const {
  const Impl& m = *impl_;
  KVCacheStats s;
  s.num_blocks = m.cfg.num_blocks;
  s.free_blocks = static_cast<int64_t>(m.free_list.size());
  s.cached_blocks = m.num_cached;
  s.in_flight_blocks = static_cast<int64_t>(m.in_flight.size());
  s.used_blocks = s.num_blocks - s.free_blocks - s.cached_blocks - s.in_flight_blocks;
  s.available_blocks = s.free_blocks + s.cached_blocks;
  s.logical_blocks = m.logical_blocks;
  s.filled_slots = m.used_fill;
  s.num_sequences = static_cast<int64_t>(m.row_of.size());
  s.prompt_tokens = m.prompt_tokens;
  s.prefix_hit_tokens = m.hit_tokens;
  s.cow_copies = m.cow_copies;
  s.evictions = m.evictions;
  if (s.used_blocks > 0) {
    const double slots = static_cast<double>(s.used_blocks) * m.B;
    s.internal_waste = (slots - static_cast<double>(m.used_fill)) / slots;
    s.sharing_ratio = static_cast<double>(m.logical_blocks) / static_cast<double>(s.used_blocks);
  }
  if (m.prompt_tokens > 0) {
    s.prefix_hit_rate = static_cast<double>(m.hit_tokens) / static_cast<double>(m.prompt_tokens);
  }
  return s;
}

bool KVCacheManager::is_live(SeqId id) const { return impl_->row_of.count(id) != 0; }

std::vector<KVCacheManager::SeqId> KVCacheManager::live_sequences() const {
  std::vector<SeqId> ids;
  ids.reserve(impl_->row_of.size());
  for (const auto& kv : impl_->row_of) ids.push_back(kv.first);
  std::sort(ids.begin(), ids.end());
  return ids;
}

Status KVCacheManager::sequence_info(SeqId id, KVSeqInfo* info) const {
  const Impl& m = *impl_;
  if (info == nullptr) return Status::Invalid("sequence_info(): info must not be null");
  int32_t row = -1;
  Status st = m.lookup(id, "sequence_info()", &row);
  if (!st.ok()) return st;
  const Impl::Seq& s = m.rows[row];
  info->row = row;
  info->length = s.len;
  info->num_computed = s.computed;
  info->num_blocks = static_cast<int32_t>(ceil_div(s.len, m.B));
  return Status::Ok();
}

Status KVCacheManager::block_ids(SeqId id, std::vector<int32_t>* out) const {
  const Impl& m = *impl_;
  if (out == nullptr) return Status::Invalid("block_ids(): out must not be null");
  int32_t row = -1;
  Status st = m.lookup(id, "block_ids()", &row);
  if (!st.ok()) return st;
  const int64_t n = ceil_div(m.rows[row].len, m.B);
  const int32_t* first = &m.table[static_cast<size_t>(row) * m.width];
  out->assign(first, first + n);
  return Status::Ok();
}

Status KVCacheManager::slot_mapping(SeqId id, int64_t begin, int64_t end, int32_t* out) const {
  const Impl& m = *impl_;
  int32_t row = -1;
  Status st = m.lookup(id, "slot_mapping()", &row);
  if (!st.ok()) return st;
  const int64_t len = m.rows[row].len;
  if (begin < 0 || begin > end || end > len) {
    return Status::Invalid(cat("slot_mapping(): positions [", begin, ", ", end,
                               ") are not within sequence ", id, "'s [0, ", len, ")"));
  }
  if (out == nullptr && end > begin) return Status::Invalid("slot_mapping(): out must not be null");
  for (int64_t p = begin; p < end; ++p) {
    out[p - begin] = m.entry(row, p / m.B) * m.B + static_cast<int32_t>(p % m.B);
  }
  return Status::Ok();
}

int32_t KVCacheManager::num_available_blocks() const {
  return static_cast<int32_t>(impl_->available());
}
int32_t KVCacheManager::num_free_rows() const {
  return static_cast<int32_t>(impl_->free_rows.size());
}
KVBlockState KVCacheManager::block_state(int32_t block) const { return impl_->blocks.at(block).state; }
int32_t KVCacheManager::block_refcount(int32_t block) const { return impl_->blocks.at(block).ref; }
const int32_t* KVCacheManager::host_block_table() const { return impl_->table.data(); }
const int32_t* KVCacheManager::host_seqlens() const { return impl_->seqlens.data(); }

// --- diagnostics -----------------------------------------------------------------------------

Status KVCacheManager::check_invariants() const {
  const Impl& m = *impl_;
  const int32_t nb = m.cfg.num_blocks;
  auto fail = [](const std::string& what) { return Status::Invalid("invariant: " + what); };

  // Owners from the rows.
  std::vector<int32_t> owners(nb, 0), fill(nb, -1);
  int64_t logical = 0;
  int32_t live = 0;
  for (int32_t r = 0; r < m.cfg.max_batch; ++r) {
    const Impl::Seq& s = m.rows[r];
    if (s.id == 0) {
      if (m.seqlens[r] != 0) return fail(cat("free row ", r, " has seqlen ", m.seqlens[r]));
      continue;
    }
    ++live;
    auto it = m.row_of.find(s.id);
    if (it == m.row_of.end() || it->second != r) return fail(cat("row ", r, ": id map"));
    if (s.id >= m.next_id) return fail(cat("row ", r, ": id ", s.id, " not handed out yet"));
    if (s.len < 0 || s.computed < 0 || s.computed > s.len) {
      return fail(cat("sequence ", s.id, ": length ", s.len, ", computed ", s.computed));
    }
    if (m.seqlens[r] != s.len) return fail(cat("sequence ", s.id, ": seqlens[", r, "] != length"));
    const int64_t n = ceil_div(s.len, m.B);
    if (n > m.width) return fail(cat("sequence ", s.id, ": ", n, " blocks > row width"));
    logical += n;
    for (int64_t c = 0; c < n; ++c) {
      const int32_t b = m.entry(r, c);
      if (b < 0 || b >= nb) return fail(cat("sequence ", s.id, ": block id ", b, " out of range"));
      for (int64_t c2 = 0; c2 < c; ++c2) {
        if (m.entry(r, c2) == b) return fail(cat("sequence ", s.id, " holds block ", b, " twice"));
      }
      ++owners[b];
      const int32_t f = c + 1 < n ? m.B : static_cast<int32_t>(s.len - c * m.B);
      if (fill[b] >= 0 && fill[b] != f) {
        return fail(cat("block ", b, " shared by sequences that see different fills"));
      }
      fill[b] = f;
    }
    if (m.cfg.prefix_caching && s.tokens_known) {  // the chain of names over its full blocks
      uint64_t h = m.root;
      for (int64_t c = 0; c < s.len / m.B; ++c) {
        const Impl::Block& k = m.blocks[m.entry(r, c)];
        const uint64_t parent = h;
        h = kvcache::block_hash(h, m.tokens_of(m.entry(r, c)), m.B);
        if ((k.registered || k.pending_register) && (k.hash != h || k.parent_hash != parent)) {
          return fail(cat("sequence ", s.id, ": block ", c, " is named for another prefix"));
        }
      }
      if (h != s.chain) return fail(cat("sequence ", s.id, ": chain hash"));
    }
  }
  if (live != static_cast<int32_t>(m.row_of.size())) return fail("id map size != live rows");
  if (live + static_cast<int32_t>(m.free_rows.size()) != m.cfg.max_batch) {
    return fail("live rows + free rows != max_batch");
  }
  for (int32_t r : m.free_rows) {
    if (r < 0 || r >= m.cfg.max_batch || m.rows[r].id != 0) return fail(cat("free row ", r, " is live"));
  }

  // Membership of the lists.
  std::vector<int32_t> in_list(nb, 0);  // bit 1 free, 2 lru, 4 in flight
  for (int32_t b : m.free_list) {
    if (b < 0 || b >= nb || (in_list[b] & 1)) return fail(cat("free list: block ", b, " twice or bad"));
    in_list[b] |= 1;
  }
  int32_t lru_len = 0, prev = -1;
  for (int32_t b = m.lru_head; b >= 0; b = m.blocks[b].lru_next) {
    if (b >= nb || (in_list[b] & 2) || m.blocks[b].lru_prev != prev) return fail("LRU list broken");
    in_list[b] |= 2;
    prev = b;
    ++lru_len;
  }
  if (prev != m.lru_tail || lru_len != m.num_cached) return fail("LRU tail or length");
  for (int32_t b : m.in_flight) {
    if (b < 0 || b >= nb || (in_list[b] & 4)) return fail(cat("in-flight list: block ", b, " twice or bad"));
    in_list[b] |= 4;
  }

  // Queued copies.
  std::vector<int32_t> readers(nb, 0);
  int32_t live_copies = 0;
  for (size_t i = 0; i < m.copies.size(); ++i) {
    const Impl::Copy& c = m.copies[i];
    if (c.src < 0) continue;
    ++live_copies;
    ++readers[c.src];
    auto it = m.copy_into.find(c.dst);
    if (it == m.copy_into.end() || it->second != static_cast<int32_t>(i)) {
      return fail(cat("copy ", c.src, "->", c.dst, " not indexed"));
    }
    if (m.copy_into.count(c.src)) return fail(cat("copy source ", c.src, " is also a destination"));
    if (owners[c.dst] == 0) return fail(cat("copy destination ", c.dst, " has no owner"));
  }
  if (live_copies != static_cast<int32_t>(m.copy_into.size())) return fail("copy index size");

  int64_t used_fill = 0;
  int32_t registered = 0;
  for (int32_t b = 0; b < nb; ++b) {
    const Impl::Block& k = m.blocks[b];
    if (k.ref != owners[b]) {
      return fail(cat("block ", b, ": reference count ", k.ref, " but ", owners[b], " owners"));
    }
    if (k.copy_readers != readers[b]) return fail(cat("block ", b, ": copy readers"));
    const int expect_list = k.state == KVBlockState::kFree     ? 1
                            : k.state == KVBlockState::kCached ? 2
                            : k.state == KVBlockState::kInFlight ? 4
                                                                 : 0;
    if (in_list[b] != expect_list) {
      return fail(cat("block ", b, " is ", state_name(k.state), " but its list membership is ", in_list[b]));
    }
    if ((k.state == KVBlockState::kUsed) != (k.ref > 0)) {
      return fail(cat("block ", b, " is ", state_name(k.state), " with ", k.ref, " owners"));
    }
    if (k.state == KVBlockState::kUsed) {
      if (k.fill != fill[b]) return fail(cat("block ", b, ": fill ", k.fill, " != ", fill[b]));
      used_fill += k.fill;
    }
    if (k.state == KVBlockState::kInFlight && k.registered) return fail("an in-flight block is named");
    if (k.pending_register && (k.state != KVBlockState::kUsed || k.fill != m.B)) {
      return fail(cat("block ", b, ": pending name but not a full used block"));
    }
    if (k.registered) {
      ++registered;
      auto it = m.cache.find(k.hash);
      if (it == m.cache.end() || it->second != b) return fail(cat("block ", b, ": name not in the cache"));
      if (k.fill != m.B) return fail(cat("block ", b, ": named but not full"));
      if (k.state == KVBlockState::kFree) return fail(cat("block ", b, ": named but free"));
      if (kvcache::block_hash(k.parent_hash, m.tokens_of(b), m.B) != k.hash) {
        return fail(cat("block ", b, ": name does not match its tokens"));
      }
    } else if (k.state == KVBlockState::kCached) {
      return fail(cat("block ", b, ": cached but not named"));
    }
  }
  if (registered != static_cast<int32_t>(m.cache.size())) return fail("cache size != named blocks");
  if (used_fill != m.used_fill) return fail("filled-slot count");
  if (logical != m.logical_blocks) return fail("logical block count");
  if (!m.cfg.prefix_caching && (!m.cache.empty() || !m.pending_register.empty())) {
    return fail("prefix caching is off but blocks are named");
  }

  // Change tracking.
  for (int32_t r = 0; r < m.cfg.max_batch; ++r) {
    const bool listed = std::count(m.dirty_rows.begin(), m.dirty_rows.end(), r) == 1;
    if (listed != m.dirty[r].listed) return fail(cat("row ", r, ": dirty list"));
  }
  return Status::Ok();
}

std::string KVCacheManager::debug_state() const {
  const Impl& m = *impl_;
  std::ostringstream o;
  o << "config " << m.cfg.num_blocks << ' ' << m.B << ' ' << m.cfg.max_batch << ' ' << m.width
    << ' ' << m.cfg.prefix_caching << "\nnext_id " << m.next_id << "\nblocks";
  for (int32_t b = 0; b < m.cfg.num_blocks; ++b) {
    const Impl::Block& k = m.blocks[b];
    o << "\n " << b << ' ' << state_name(k.state) << " ref " << k.ref << " fill " << k.fill
      << " readers " << k.copy_readers << " lru " << k.lru_prev << ',' << k.lru_next << " name "
      << k.registered << k.pending_register << ' ' << k.hash << ' ' << k.parent_hash;
    if (m.cfg.prefix_caching && (k.registered || k.pending_register || k.ref > 0)) {
      o << " tokens";
      for (int32_t i = 0; i < k.fill; ++i) o << ' ' << m.tokens_of(b)[i];
    }
  }
  auto list = [&o](const char* name, const std::vector<int32_t>& v) {
    o << '\n' << name;
    for (int32_t x : v) o << ' ' << x;
  };
  list("free_list", m.free_list);
  o << "\nlru " << m.lru_head << ' ' << m.lru_tail << ' ' << m.num_cached;
  list("in_flight", m.in_flight);
  std::vector<std::pair<uint64_t, int32_t>> names(m.cache.begin(), m.cache.end());
  std::sort(names.begin(), names.end());
  o << "\ncache";
  for (const auto& kv : names) o << ' ' << kv.first << ':' << kv.second;
  list("pending_register", m.pending_register);
  o << "\nrows";
  for (int32_t r = 0; r < m.cfg.max_batch; ++r) {
    const Impl::Seq& s = m.rows[r];
    const Impl::Dirty& d = m.dirty[r];
    o << "\n " << r << " id " << s.id << " len " << s.len << " computed " << s.computed << " chain "
      << s.chain << " known " << s.tokens_known << " seqlen " << m.seqlens[r] << " dirty "
      << d.listed << ' ' << d.col_lo << ' ' << d.col_hi << " table";
    for (int32_t c = 0; c < m.width; ++c) o << ' ' << m.entry(r, c);
  }
  list("free_rows", m.free_rows);
  list("dirty_rows", m.dirty_rows);
  o << "\ncopies";
  for (const Impl::Copy& c : m.copies) o << ' ' << c.src << "->" << c.dst;
  std::vector<std::pair<SeqId, int32_t>> ids(m.row_of.begin(), m.row_of.end());
  std::sort(ids.begin(), ids.end());
  o << "\nids";
  for (const auto& kv : ids) o << ' ' << kv.first << ':' << kv.second;
  o << "\ncounters " << m.used_fill << ' ' << m.logical_blocks << ' ' << m.prompt_tokens << ' '
    << m.hit_tokens << ' ' << m.cow_copies << ' ' << m.evictions << '\n';
  return o.str();
}

}  // namespace flashkit
