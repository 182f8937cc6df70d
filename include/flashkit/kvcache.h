// FlashKit public API: the paged KV-cache manager.
//
// A pool of `num_blocks` physical blocks of `block_size` token slots each, the same block
// ids in every layer's K and V cache tensors ([num_blocks, block_size, H_kv, D] per layer,
// SPEC §2). The manager is host-side bookkeeping only; it never touches device memory.
// What it decides reaches the GPU through `take_updates()`: one packed int32 buffer per
// step with the copy-on-write block copies and the changed block-table rows, which the
// caller copies to the device in one H2D copy and applies with `kvcache_apply_updates()`.
//
//   sequences   create (with prompt-prefix reuse) / append / fork / free; each live sequence
//               owns one row of the block table [max_batch, max_blocks_per_seq] and of
//               seqlens [max_batch] (both int32). Freed rows get seqlen 0; their old block
//               ids stay in the row and are never read (SPEC §2: nothing past seqlens).
//   sharing     blocks carry reference counts. fork() shares every block of the parent;
//               the first write into a shared block copies it (copy-on-write): the writer
//               gets a fresh block and a (src, dst) copy is queued for the next update.
//               Only a sequence's last, partially filled block is ever written, so only it
//               is ever copied.
//   prefix      with prefix_caching, every full block whose token ids are known is named by
//               a 64-bit hash of its tokens chained with its prefix's hash (plus its tokens
//               and the prefix hash stored for verification). create() reuses the longest
//               run of such blocks at the start of a new prompt. Blocks whose last owner is
//               freed stay cached and are evicted least-recently-used first (a sequence's
//               tail blocks before its head) when a new block is needed.
//
// Steps. Tokens appended since the last take_updates() are *pending*: their KV is not in
// the cache yet. Per step the caller (1) creates/appends/forks/frees, (2) calls
// take_updates(), uploads the buffer and runs kvcache_apply_updates() on its stream,
// (3) runs the forward pass, which writes the KV of every pending token of every live
// sequence (positions [num_computed, length) from sequence_info(), read before step 2;
// create() already counts prompt-prefix hits as computed). take_updates() commits the
// step: pending tokens count as computed, blocks that became full join the prefix cache
// (so a block is only ever reused once its KV is written, in stream order), and blocks
// held back for the queued copies are released.
//
// Errors. Every operation returns a flashkit::Status and has the strong guarantee: when it
// fails nothing changed. InvalidArgument: a bad call (unknown id, a sequence that was
// freed, double free, negative count, a sequence longer than its block-table row).
// ResourceExhausted: no free block or no free block-table row; the caller can free or
// preempt sequences and retry. The only exception that can escape is std::bad_alloc from
// the host containers (then the manager's state is unspecified).
//
// Thread safety. A manager is not synchronized: use one manager per engine thread, or
// guard every call (const ones included) with one mutex. Different managers are
// independent. The Python binding keeps the GIL held during every call, so Python threads
// sharing a manager are serialized.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "flashkit/tensor.h"

typedef struct CUstream_st* cudaStream_t;

#if defined(_WIN32)
#define FLASHKIT_KVCACHE_API
#else
#define FLASHKIT_KVCACHE_API __attribute__((visibility("default")))
#endif

namespace flashkit {

struct KVCacheConfig {
  int32_t num_blocks = 0;          // physical blocks (per layer, K and V alike)
  int32_t block_size = 16;         // token slots per block, 1..4096
  int32_t max_batch = 0;           // block-table rows: at most this many live sequences
  int32_t max_blocks_per_seq = 0;  // block-table columns: a sequence holds at most this
                                   // many blocks (max_blocks_per_seq * block_size tokens)
  bool prefix_caching = true;      // hash full blocks and reuse them across prompts
};

// Checks a configuration (sizes positive, num_blocks * block_size and the block table
// within int32 indexing). The message names the field.
FLASHKIT_KVCACHE_API Status validate_kvcache_config(const KVCacheConfig& config);

enum class KVBlockState : int32_t {
  kFree = 0,      // unowned, holds nothing reusable
  kUsed = 1,      // owned by >= 1 sequence (reference count >= 1)
  kCached = 2,    // unowned, in the prefix cache, evictable (LRU)
  kInFlight = 3,  // unowned, but a queued copy still reads it: reusable after take_updates()
};

// Definitions (docs/kvcache.md):
//   internal_waste  = (allocated slots - filled slots) / allocated slots, over used blocks
//                     (each physical block counted once); 0 when no block is used.
//   sharing_ratio   = logical_blocks / used_blocks: block references held by sequences per
//                     physical block (1 = nothing shared); 1 when no block is used.
//   prefix_hit_rate = prefix_hit_tokens / prompt_tokens: of the prompt tokens given to
//                     create() with token ids, the share found in the cache; 0 before any.
struct KVCacheStats {
  int64_t num_blocks = 0;
  int64_t used_blocks = 0;       // kUsed
  int64_t free_blocks = 0;       // kFree
  int64_t cached_blocks = 0;     // kCached (evictable)
  int64_t in_flight_blocks = 0;  // kInFlight
  int64_t available_blocks = 0;  // free + cached: what an allocation can take now
  int64_t logical_blocks = 0;    // sum over live sequences of their block counts
  int64_t filled_slots = 0;      // token slots holding a token, over used blocks
  int64_t num_sequences = 0;     // live sequences
  int64_t prompt_tokens = 0;     // tokens given to create() with token ids (cumulative)
  int64_t prefix_hit_tokens = 0;  // of those, tokens reused from the cache (cumulative)
  int64_t cow_copies = 0;        // copy-on-write block copies queued (cumulative)
  int64_t evictions = 0;         // cached blocks evicted for reuse (cumulative)
  double internal_waste = 0.0;
  double sharing_ratio = 1.0;
  double prefix_hit_rate = 0.0;
};

// What a sequence looks like now.
struct KVSeqInfo {
  int32_t row = -1;          // its row in the block table and seqlens
  int64_t length = 0;        // tokens
  int64_t num_computed = 0;  // tokens whose KV is in the cache; [num_computed, length) pend
  int32_t num_blocks = 0;    // ceil(length / block_size)
};

// One step's device work, packed into one int32 buffer (copy it to the device as is):
//   [0, 2*num_copies)                    copies: (src block, dst block) pairs
//   [rows_offset, rows_offset+5*num_rows) rows: (row, seqlen, col_begin, col_count, offset)
//   [data...]                             block ids: block_table[row][col_begin + j] =
//                                         buffer[offset + j], j < col_count
// with rows_offset = 2 * num_copies. A row appears once; col_count may be 0 (only seqlen
// changed). Copies never overlap: no block is both a source and a destination and no
// destination repeats, so they may run in any order.
struct KVCacheUpdates {
  std::vector<int32_t> buffer;
  int32_t num_copies = 0;
  int32_t num_rows = 0;
  int64_t rows_offset() const { return 2 * static_cast<int64_t>(num_copies); }
  bool empty() const { return num_copies == 0 && num_rows == 0; }
};

class FLASHKIT_KVCACHE_API KVCacheManager {
 public:
  using SeqId = int64_t;  // handed out by create()/fork(): 1, 2, 3, ... never reused

  // Validates `config` (validate_kvcache_config) and builds an empty manager.
  static Status make(const KVCacheConfig& config, std::unique_ptr<KVCacheManager>* out);
  ~KVCacheManager();
  KVCacheManager(const KVCacheManager&) = delete;
  KVCacheManager& operator=(const KVCacheManager&) = delete;

  // --- sequences (strong guarantee: on error nothing changed) ---------------------------

  // A new sequence holding `num_tokens` prompt tokens. With prefix caching and token ids
  // (`tokens` may be null: ids unknown, nothing reused or cached), the longest run of
  // cached full blocks matching the prompt's start is reused; at least the last prompt
  // token is left to compute (its logits are needed). `num_cached_tokens` (optional): how
  // many prompt tokens were reused, i.e. are already computed.
  Status create(const int32_t* tokens, int64_t num_tokens, SeqId* id,
                int64_t* num_cached_tokens = nullptr);
  // Appends `num_tokens` tokens, allocating blocks as needed; copies the last block first
  // if it is shared (copy-on-write). `tokens` may be null (ids unknown: this and later
  // blocks of the sequence are not cached).
  Status append(SeqId id, const int32_t* tokens, int64_t num_tokens);
  // append() of `num_tokens` tokens to each of `count` sequences, in the order given, as one
  // call: every id is checked (live, listed once, room in its block-table row) and the
  // blocks the whole batch takes (copy-on-write included) against the pool before anything
  // changes, so it succeeds for all or changes nothing. `tokens`: [count, num_tokens] ids,
  // row i for ids[i], or null (ids unknown). A decode step's per-sequence bookkeeping in
  // one call (docs/kvcache.md "Batched append").
  Status append_batch(const SeqId* ids, int64_t count, const int32_t* tokens, int64_t num_tokens);
  // A new sequence sharing every block of `parent` (reference counts rise). Pending tokens
  // of the parent are pending for the child too.
  Status fork(SeqId parent, SeqId* child);
  // Releases the sequence and its row. Blocks whose count drops to 0 become cached
  // (full, hashed), in flight (a queued copy reads them) or free.
  Status free(SeqId id);

  // Blocks a create() of this prompt would take from the pool now (after prefix reuse),
  // and whether it would succeed; for admission control. Changes nothing.
  Status blocks_needed_for_create(const int32_t* tokens, int64_t num_tokens,
                                  int32_t* blocks) const;
  // Blocks an append() of `num_tokens` would take now (including a copy-on-write block).
  Status blocks_needed_for_append(SeqId id, int64_t num_tokens, int32_t* blocks) const;

  // --- step boundary ----------------------------------------------------------------------

  // Packs this step's copies and changed rows into `out` (see KVCacheUpdates) and commits
  // the step (see the header comment). Never fails for a valid `out`.
  Status take_updates(KVCacheUpdates* out);

  // --- queries ------------------------------------------------------------------------------

  const KVCacheConfig& config() const;
  KVCacheStats stats() const;
  bool is_live(SeqId id) const;
  std::vector<SeqId> live_sequences() const;  // ascending
  Status sequence_info(SeqId id, KVSeqInfo* info) const;
  Status block_ids(SeqId id, std::vector<int32_t>* blocks) const;
  // Cache slots (block * block_size + offset) of token positions [begin, end) of `id`,
  // where the forward writes their K and V. `out` holds end - begin entries.
  Status slot_mapping(SeqId id, int64_t begin, int64_t end, int32_t* out) const;
  int32_t num_available_blocks() const;  // free + cached
  int32_t num_free_rows() const;
  KVBlockState block_state(int32_t block) const;  // block must be in [0, num_blocks)
  int32_t block_refcount(int32_t block) const;
  // The host copy of the block table [max_batch, max_blocks_per_seq] and seqlens
  // [max_batch], row-major: what the device tables hold after the updates are applied.
  const int32_t* host_block_table() const;
  const int32_t* host_seqlens() const;

  // --- diagnostics (tests, fuzzing) --------------------------------------------------------

  // Recomputes every count and list from scratch and compares (O(num_blocks + table)):
  // each block owned, free, cached or in flight exactly once; reference counts = owners;
  // the prefix cache, LRU list, queued copies and statistics consistent. Ok or the first
  // violation.
  Status check_invariants() const;
  // The whole state as text, canonical: two managers are in the same state iff equal.
  std::string debug_state() const;

 private:
  struct Impl;
  explicit KVCacheManager(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// --- device side --------------------------------------------------------------------------

// The paged caches of all layers: every one is [num_blocks, block_size, H_kv, D] with the
// same block size in bytes; a block's bytes are contiguous.
struct KVCacheDeviceCaches {
  const uint64_t* cache_ptrs = nullptr;  // device array [num_caches]: base address of each
                                         // cache (e.g. K0, V0, K1, V1, ...)
  int32_t num_caches = 0;                // 1..65535
  int32_t num_blocks = 0;
  int64_t block_bytes = 0;         // bytes of one block: block_size * H_kv * D * elem size
  int64_t block_stride_bytes = 0;  // bytes between consecutive blocks (>= block_bytes)
};

// The device block table and seqlens that the manager's host copies mirror.
struct KVCacheDeviceTables {
  int32_t* block_table = nullptr;  // device [max_batch, row_stride] (row_stride >= cols)
  int32_t* seqlens = nullptr;      // device [max_batch]
  int32_t max_batch = 0;
  int32_t max_blocks_per_seq = 0;
  int64_t row_stride = 0;  // elements between rows
};

// Applies one step's updates on `stream`: `updates_device` is a device copy of
// KVCacheUpdates::buffer (`length` int32). One launch copies every (src, dst) block of every
// cache (skipped when num_copies == 0; `caches` may then be empty), one launch scatters
// the rows (skipped when num_rows == 0). Entries out of range (block ids, rows, columns,
// offsets) are skipped on the device, never followed. InvalidArgument names a bad argument
// before anything runs; Cuda reports a launch error.
FLASHKIT_KVCACHE_API Status kvcache_apply_updates(const int32_t* updates_device, int64_t length,
                                                  int32_t num_copies, int32_t num_rows,
                                                  const KVCacheDeviceCaches& caches,
                                                  const KVCacheDeviceTables& tables,
                                                  cudaStream_t stream);

}  // namespace flashkit
