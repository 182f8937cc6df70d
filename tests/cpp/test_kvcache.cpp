// Tests of the paged KV-cache manager (host bookkeeping; no CUDA, no GPU).
//  - scenario tests: copy-on-write, prefix hits, LRU eviction, in-flight blocks, packing;
//  - error tests: every bad call names the problem and changes nothing;
//  - property tests: random operation sequences checked against the reference model and
//    the simulated device of kvcache_harness.h after every step.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "flashkit/kvcache.h"
#include "kvcache_harness.h"

namespace {

using flashkit::KVBlockState;
using flashkit::KVCacheConfig;
using flashkit::KVCacheManager;
using flashkit::KVCacheUpdates;
using flashkit::Status;
using SeqId = KVCacheManager::SeqId;

KVCacheConfig config(int32_t num_blocks, int32_t block_size, int32_t max_batch = 8,
                     int32_t max_blocks_per_seq = 8, bool prefix_caching = true) {
  KVCacheConfig c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  c.max_batch = max_batch;
  c.max_blocks_per_seq = max_blocks_per_seq;
  c.prefix_caching = prefix_caching;
  return c;
}

std::unique_ptr<KVCacheManager> make(const KVCacheConfig& c) {
  std::unique_ptr<KVCacheManager> m;
  Status st = KVCacheManager::make(c, &m);
  EXPECT_TRUE(st.ok()) << st.message();
  return m;
}

std::vector<int32_t> iota(int n, int32_t first = 100) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<int32_t> blocks_of(const KVCacheManager& m, SeqId id) {
  std::vector<int32_t> b;
  EXPECT_TRUE(m.block_ids(id, &b).ok());
  return b;
}

KVCacheUpdates take(KVCacheManager& m) {
  KVCacheUpdates u;
  EXPECT_TRUE(m.take_updates(&u).ok());
  EXPECT_TRUE(m.check_invariants().ok()) << m.check_invariants().message();
  return u;
}

SeqId create(KVCacheManager& m, const std::vector<int32_t>& t, int64_t* cached = nullptr) {
  SeqId id = 0;
  Status st = m.create(t.data(), static_cast<int64_t>(t.size()), &id, cached);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(m.check_invariants().ok()) << m.check_invariants().message();
  return id;
}

// Runs `call`, which must fail with `code` and a message containing `needle`, and checks
// that the manager's whole state is unchanged.
template <typename F>
void expect_refused(KVCacheManager& m, Status::Code code, const std::string& needle, F call) {
  const std::string before = m.debug_state();
  const Status st = call();
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), code) << st.message();
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
  EXPECT_EQ(m.debug_state(), before) << "state changed by: " << st.message();
}

TEST(KVCacheConfigTest, EachBadFieldIsNamed) {
  std::unique_ptr<KVCacheManager> m;
  struct Case {
    KVCacheConfig c;
    const char* needle;
  } cases[] = {
      {config(0, 16), "num_blocks"},
      {config(8, 0), "block_size"},
      {config(8, 5000), "block_size"},
      {config(8, 16, 0), "max_batch"},
      {config(8, 16, 4, 0), "max_blocks_per_seq"},
      {config(1 << 28, 16), "int32 slot"},
      {config(8, 16, 1 << 16, 1 << 16), "block table"},
      {config(8, 4096, 1, 1 << 20), "int32 seqlens"},
  };
  for (const Case& k : cases) {
    Status st = KVCacheManager::make(k.c, &m);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
    EXPECT_NE(st.message().find(k.needle), std::string::npos) << st.message();
    EXPECT_EQ(m, nullptr);
  }
  EXPECT_TRUE(KVCacheManager::make(config(8, 16), &m).ok());
}

TEST(KVCacheManagerTest, AppendAllocatesBlocksOnDemand) {
  auto m = make(config(16, 4));
  SeqId a = create(*m, iota(5));
  EXPECT_EQ(blocks_of(*m, a).size(), 2u);
  ASSERT_TRUE(m->append(a, iota(3, 7).data(), 3).ok());  // 8 tokens: still 2 blocks
  EXPECT_EQ(blocks_of(*m, a).size(), 2u);
  ASSERT_TRUE(m->append(a, nullptr, 1).ok());  // 9: a third
  const std::vector<int32_t> b = blocks_of(*m, a);
  ASSERT_EQ(b.size(), 3u);
  flashkit::KVSeqInfo info;
  ASSERT_TRUE(m->sequence_info(a, &info).ok());
  EXPECT_EQ(info.length, 9);
  EXPECT_EQ(info.num_computed, 0);
  EXPECT_EQ(m->host_seqlens()[info.row], 9);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(m->host_block_table()[info.row * 8 + c], b[c]);
  int32_t slots[3];
  ASSERT_TRUE(m->slot_mapping(a, 3, 6, slots).ok());
  EXPECT_EQ(slots[0], b[0] * 4 + 3);
  EXPECT_EQ(slots[1], b[1] * 4 + 0);
  EXPECT_EQ(slots[2], b[1] * 4 + 1);
  take(*m);
  ASSERT_TRUE(m->sequence_info(a, &info).ok());
  EXPECT_EQ(info.num_computed, 9);
  const flashkit::KVCacheStats s = m->stats();
  EXPECT_EQ(s.used_blocks, 3);
  EXPECT_EQ(s.filled_slots, 9);
  EXPECT_DOUBLE_EQ(s.internal_waste, 3.0 / 12.0);
}

TEST(KVCacheManagerTest, ForkSharesAndFirstWriteCopies) {
  auto m = make(config(16, 4));
  SeqId a = create(*m, iota(6));  // blocks [full, 2 of 4]
  take(*m);
  SeqId c;
  ASSERT_TRUE(m->fork(a, &c).ok());
  const std::vector<int32_t> shared = blocks_of(*m, a);
  EXPECT_EQ(blocks_of(*m, c), shared);
  EXPECT_EQ(m->block_refcount(shared[0]), 2);
  EXPECT_EQ(m->block_refcount(shared[1]), 2);
  EXPECT_DOUBLE_EQ(m->stats().sharing_ratio, 2.0);

  ASSERT_TRUE(m->append(c, iota(1, 9).data(), 1).ok());  // write into the shared last block
  const std::vector<int32_t> cb = blocks_of(*m, c);
  EXPECT_EQ(cb[0], shared[0]);       // full blocks stay shared
  EXPECT_NE(cb[1], shared[1]);       // the written one was copied
  EXPECT_EQ(blocks_of(*m, a), shared);  // the parent is untouched
  EXPECT_EQ(m->block_refcount(shared[1]), 1);
  EXPECT_EQ(m->block_refcount(cb[1]), 1);
  EXPECT_EQ(m->stats().cow_copies, 1);

  ASSERT_TRUE(m->append(a, iota(1, 5).data(), 1).ok());  // now alone in it: no copy
  EXPECT_EQ(blocks_of(*m, a), shared);

  const KVCacheUpdates u = take(*m);
  ASSERT_EQ(u.num_copies, 1);
  EXPECT_EQ(u.buffer[0], shared[1]);
  EXPECT_EQ(u.buffer[1], cb[1]);
  // Rows: the child's (new) and the parent's (seqlen changed).
  EXPECT_EQ(u.num_rows, 2);
}

TEST(KVCacheManagerTest, NoCopyWhenTheSharedBlockHoldsOnlyPendingTokens) {
  auto m = make(config(16, 4));
  SeqId a = create(*m, iota(6));  // not computed yet
  SeqId c;
  ASSERT_TRUE(m->fork(a, &c).ok());
  ASSERT_TRUE(m->append(c, iota(1).data(), 1).ok());
  EXPECT_NE(blocks_of(*m, c)[1], blocks_of(*m, a)[1]);  // copy-on-write still separates them
  const KVCacheUpdates u = take(*m);
  EXPECT_EQ(u.num_copies, 0);  // but nothing to copy: the forward writes all 3 tokens
}

TEST(KVCacheManagerTest, CopyOfACopyReadsTheOriginal) {
  auto m = make(config(16, 4));
  SeqId a = create(*m, iota(6));
  take(*m);
  SeqId c, d;
  ASSERT_TRUE(m->fork(a, &c).ok());
  ASSERT_TRUE(m->append(c, iota(1).data(), 1).ok());  // copy a[1] -> c[1]
  ASSERT_TRUE(m->fork(c, &d).ok());
  ASSERT_TRUE(m->append(d, iota(1).data(), 1).ok());  // c[1] is not filled yet: copy a[1] -> d[1]
  const int32_t src = blocks_of(*m, a)[1];
  const KVCacheUpdates u = take(*m);
  ASSERT_EQ(u.num_copies, 2);
  EXPECT_EQ(u.buffer[0], src);
  EXPECT_EQ(u.buffer[1], blocks_of(*m, c)[1]);
  EXPECT_EQ(u.buffer[2], src);
  EXPECT_EQ(u.buffer[3], blocks_of(*m, d)[1]);
}

TEST(KVCacheManagerTest, AFreedCopySourceStaysInFlightUntilTheUpdate) {
  auto m = make(config(4, 4));
  SeqId a = create(*m, iota(6));  // 2 blocks
  take(*m);
  SeqId c;
  ASSERT_TRUE(m->fork(a, &c).ok());
  const int32_t src = blocks_of(*m, a)[1];
  ASSERT_TRUE(m->append(c, iota(1).data(), 1).ok());  // 3 used, copy src -> c[1] queued
  ASSERT_TRUE(m->free(a).ok());
  EXPECT_EQ(m->block_state(src), KVBlockState::kInFlight);
  EXPECT_EQ(m->stats().in_flight_blocks, 1);
  EXPECT_EQ(m->num_available_blocks(), 1);  // src may not be reused before the copy ran
  const KVCacheUpdates u = take(*m);
  EXPECT_EQ(u.num_copies, 1);
  EXPECT_EQ(m->block_state(src), KVBlockState::kFree);
  EXPECT_EQ(m->num_available_blocks(), 2);
}

TEST(KVCacheManagerTest, FreeingACopyDestinationCancelsTheCopy) {
  auto m = make(config(8, 4));
  SeqId a = create(*m, iota(6));
  take(*m);
  SeqId c;
  ASSERT_TRUE(m->fork(a, &c).ok());
  ASSERT_TRUE(m->append(c, iota(1).data(), 1).ok());
  ASSERT_TRUE(m->free(c).ok());
  EXPECT_EQ(m->stats().in_flight_blocks, 0);
  EXPECT_EQ(take(*m).num_copies, 0);
}

TEST(KVCacheManagerTest, PrefixHitsReuseFullBlocksAfterTheStep) {
  auto m = make(config(32, 4));
  const std::vector<int32_t> prompt = iota(14);  // 3 full blocks + 2 tokens
  SeqId a = create(*m, prompt);
  int64_t cached = -1;
  SeqId same_step = create(*m, prompt, &cached);
  EXPECT_EQ(cached, 0);  // a's blocks have no KV before the step
  take(*m);
  SeqId b = create(*m, prompt, &cached);
  EXPECT_EQ(cached, 12);
  const std::vector<int32_t> ab = blocks_of(*m, a), bb = blocks_of(*m, b);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(bb[c], ab[c]);
    EXPECT_EQ(m->block_refcount(ab[c]), 2);
  }
  EXPECT_NE(bb[3], ab[3]);
  flashkit::KVSeqInfo info;
  ASSERT_TRUE(m->sequence_info(b, &info).ok());
  EXPECT_EQ(info.num_computed, 12);

  // A different third block: only the first two hit.
  std::vector<int32_t> other = prompt;
  other[9] = -1;
  SeqId d = create(*m, other, &cached);
  EXPECT_EQ(cached, 8);
  EXPECT_EQ(blocks_of(*m, d)[1], ab[1]);
  EXPECT_NE(blocks_of(*m, d)[2], ab[2]);
  // Same tokens at a different position never match (the name is chained).
  std::vector<int32_t> shifted(prompt.begin() + 4, prompt.end());
  create(*m, shifted, &cached);
  EXPECT_EQ(cached, 0);
  const flashkit::KVCacheStats s = m->stats();
  EXPECT_EQ(s.prompt_tokens, 14 * 4 + 10);
  EXPECT_EQ(s.prefix_hit_tokens, 20);
  EXPECT_DOUBLE_EQ(s.prefix_hit_rate, 20.0 / 66.0);
  (void)same_step;
}

TEST(KVCacheManagerTest, AtLeastTheLastPromptTokenIsComputed) {
  auto m = make(config(32, 4));
  create(*m, iota(8));  // exactly 2 blocks
  take(*m);
  int64_t cached = -1;
  SeqId b = create(*m, iota(8), &cached);
  EXPECT_EQ(cached, 4);  // the second block is recomputed for the last token's logits
  EXPECT_EQ(blocks_of(*m, b).size(), 2u);
  create(*m, iota(9), &cached);
  EXPECT_EQ(cached, 8);
}

TEST(KVCacheManagerTest, DecodedBlocksAreCachedToo) {
  auto m = make(config(32, 4));
  SeqId a = create(*m, iota(3));
  take(*m);
  ASSERT_TRUE(m->append(a, iota(6, 103).data(), 6).ok());  // fills blocks 0 and 1
  take(*m);
  ASSERT_TRUE(m->free(a).ok());
  int64_t cached = -1;
  create(*m, iota(10), &cached);  // a multi-turn follow-up: the whole history
  EXPECT_EQ(cached, 8);
}

TEST(KVCacheManagerTest, UnknownTokenIdsAreNeverCached) {
  auto m = make(config(32, 4));
  SeqId a = create(*m, iota(5));
  ASSERT_TRUE(m->append(a, nullptr, 4).ok());  // ids unknown from position 5 on
  take(*m);
  int64_t cached = -1;
  std::vector<int32_t> t = iota(5);
  t.resize(12, 0);
  create(*m, t, &cached);
  EXPECT_EQ(cached, 4);  // block 0 was named before the unknown ids; block 1 never is
  SeqId id;
  ASSERT_TRUE(m->create(nullptr, 8, &id, &cached).ok());
  EXPECT_EQ(cached, 0);
  EXPECT_EQ(m->stats().prompt_tokens, 5 + 12);  // prompts without ids are not counted
}

TEST(KVCacheManagerTest, FreedBlocksStayCachedAndAreEvictedLeastRecentlyUsedFirst) {
  auto m = make(config(8, 2, 8, 8));
  SeqId a = create(*m, {1, 2, 3, 4, 5});  // blocks: [1 2][3 4][5]
  SeqId b = create(*m, {7, 8, 9});        //         [7 8][9]
  take(*m);
  const std::vector<int32_t> ab = blocks_of(*m, a), bb = blocks_of(*m, b);
  ASSERT_TRUE(m->free(a).ok());
  ASSERT_TRUE(m->free(b).ok());
  EXPECT_EQ(m->stats().cached_blocks, 3);  // the full ones
  EXPECT_EQ(m->stats().free_blocks, 5);
  EXPECT_EQ(m->block_state(ab[2]), KVBlockState::kFree);  // partial: nothing to reuse
  // LRU order, oldest first: a's tail [3 4], a's head [1 2], then b's [7 8].
  SeqId c = create(*m, std::vector<int32_t>(12, 0));  // 6 blocks: 5 free + 1 eviction
  EXPECT_EQ(m->stats().evictions, 1);
  EXPECT_EQ(m->block_state(ab[1]), KVBlockState::kUsed);  // evicted and reused
  EXPECT_EQ(m->block_state(ab[0]), KVBlockState::kCached);
  EXPECT_EQ(m->block_state(bb[0]), KVBlockState::kCached);
  ASSERT_TRUE(m->free(c).ok());  // its blocks never had KV (freed before the step): free
  EXPECT_EQ(m->stats().free_blocks, 6);
  int64_t cached = -1;
  SeqId d = create(*m, {1, 2, 3}, &cached);  // [1 2] is hit: now more recent than [7 8]
  EXPECT_EQ(cached, 2);
  EXPECT_EQ(blocks_of(*m, d)[0], ab[0]);
  take(*m);
  ASSERT_TRUE(m->free(d).ok());
  create(*m, std::vector<int32_t>(14, 0));  // 7 blocks: 6 free + 1 eviction
  EXPECT_EQ(m->stats().evictions, 2);
  EXPECT_EQ(m->block_state(bb[0]), KVBlockState::kUsed);  // b's [7 8] went first
  EXPECT_EQ(m->block_state(ab[0]), KVBlockState::kCached);
}

TEST(KVCacheManagerTest, PoolExhaustionIsRefusedWithoutChange) {
  auto m = make(config(4, 4, 8, 8));
  SeqId a = create(*m, iota(10));  // 3 blocks
  expect_refused(*m, Status::Code::kResourceExhausted, "pool exhausted", [&] {
    SeqId id;
    return m->create(iota(5, 50).data(), 5, &id);  // needs 2, 1 available
  });
  expect_refused(*m, Status::Code::kResourceExhausted, "needs 2 new blocks", [&] {
    return m->append(a, iota(7).data(), 7);
  });
  ASSERT_TRUE(m->append(a, iota(6).data(), 2).ok());
  take(*m);
  SeqId c;
  ASSERT_TRUE(m->fork(a, &c).ok());
  ASSERT_TRUE(m->append(a, iota(1).data(), 1).ok());  // the last free block: copy-on-write
  expect_refused(*m, Status::Code::kResourceExhausted, "(0 free, 0 cached, 0 in flight", [&] {
    return m->append(c, iota(4).data(), 4);  // 1 new block
  });
  int32_t need = -1;
  ASSERT_TRUE(m->blocks_needed_for_append(c, 4, &need).ok());
  EXPECT_EQ(need, 1);
}

TEST(KVCacheManagerTest, RowExhaustionIsRefusedWithoutChange) {
  auto m = make(config(16, 4, 2, 4));
  SeqId a = create(*m, iota(3));
  create(*m, iota(3));
  expect_refused(*m, Status::Code::kResourceExhausted, "max_batch", [&] {
    SeqId id;
    return m->create(nullptr, 0, &id);
  });
  expect_refused(*m, Status::Code::kResourceExhausted, "no free block-table row", [&] {
    SeqId id;
    return m->fork(a, &id);
  });
}

TEST(KVCacheManagerTest, BadCallsNameTheProblemAndChangeNothing) {
  auto m = make(config(16, 4, 4, 3));
  SeqId a = create(*m, iota(5));
  SeqId b = create(*m, iota(2));
  ASSERT_TRUE(m->free(b).ok());
  const auto invalid = Status::Code::kInvalidArgument;
  expect_refused(*m, invalid, "sequence 2 was already freed", [&] { return m->free(b); });
  expect_refused(*m, invalid, "append(): sequence 2 was already freed",
                 [&] { return m->append(b, iota(1).data(), 1); });
  expect_refused(*m, invalid, "fork(): sequence 42 does not exist (ids handed out so far: 1..2)",
                 [&] {
                   SeqId c;
                   return m->fork(42, &c);
                 });
  expect_refused(*m, invalid, "sequence 0 does not exist", [&] { return m->free(0); });
  expect_refused(*m, invalid, "num_tokens must be >= 0, got -1",
                 [&] { return m->append(a, nullptr, -1); });
  expect_refused(*m, invalid, "block-table row holds 3 blocks (max_blocks_per_seq) = 12 tokens",
                 [&] { return m->append(a, iota(8).data(), 8); });
  expect_refused(*m, invalid, "the prompt would hold 13 tokens", [&] {
    SeqId c;
    return m->create(iota(13).data(), 13, &c);
  });
  expect_refused(*m, invalid, "not within", [&] {
    int32_t s[8];
    return m->slot_mapping(a, 2, 6, s);
  });
  expect_refused(*m, invalid, "must not be null", [&] { return m->take_updates(nullptr); });
  expect_refused(*m, invalid, "must not be null", [&] { return m->create(nullptr, 1, nullptr); });
}

// append_batch against append() one after another on a twin manager: the same state
// (blocks, tables, counts, prefix-cache names) after every step, with forks sharing last
// blocks, known and unknown token ids, and zero-token batches.
TEST(KVCacheManagerTest, AppendBatchEqualsAppendsOneByOne) {
  auto one = make(config(64, 4, 8, 16));
  auto batch = make(config(64, 4, 8, 16));
  std::vector<SeqId> ids;
  for (int p = 0; p < 3; ++p) {
    const std::vector<int32_t> t = iota(5 + 2 * p, 10 * p);  // partial last blocks
    ids.push_back(create(*one, t));
    EXPECT_EQ(create(*batch, t), ids.back());
  }
  take(*one);
  take(*batch);
  for (SeqId parent : {ids[0], ids[1]}) {  // children share the parents' partial last blocks
    SeqId c1 = 0, c2 = 0;
    ASSERT_TRUE(one->fork(parent, &c1).ok());
    ASSERT_TRUE(batch->fork(parent, &c2).ok());
    EXPECT_EQ(c1, c2);
    ids.push_back(c1);
  }
  const int64_t count = static_cast<int64_t>(ids.size());
  for (int step = 0; step < 6; ++step) {
    const int64_t n = step == 3 ? 0 : (step == 4 ? 6 : 1);
    const bool known = step != 5;
    const std::vector<int32_t> t = iota(static_cast<int>(count * n), 1000 * step);
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_TRUE(one->append(ids[i], known ? t.data() + i * n : nullptr, n).ok());
    }
    const Status st = batch->append_batch(ids.data(), count, known ? t.data() : nullptr, n);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_TRUE(batch->check_invariants().ok()) << batch->check_invariants().message();
    EXPECT_EQ(batch->debug_state(), one->debug_state()) << "step " << step;
    const KVCacheUpdates u1 = take(*one), u2 = take(*batch);
    EXPECT_EQ(u2.buffer, u1.buffer) << "step " << step;
  }
  EXPECT_GT(batch->stats().cow_copies, 0);
}

// k appenders of a last block held by r sequences copy it min(k, r - 1) times: with a
// block shared three ways, a batch of all three takes exactly 2 blocks (the sum of the
// single appends' needs would say 3), and fits a pool with 2 left.
TEST(KVCacheManagerTest, AppendBatchCountsCopyOnWriteExactly) {
  auto m = make(config(5, 4, 8, 8));
  SeqId a = create(*m, iota(6));  // 2 blocks, the last one half full
  take(*m);
  SeqId b = 0, c = 0;
  ASSERT_TRUE(m->fork(a, &b).ok());
  ASSERT_TRUE(m->fork(a, &c).ok());
  int32_t single = -1;
  ASSERT_TRUE(m->blocks_needed_for_append(a, 1, &single).ok());
  EXPECT_EQ(single, 1);
  SeqId filler = create(*m, iota(1, 7));  // 1 block: 2 of 5 left
  ASSERT_EQ(m->num_available_blocks(), 2);
  const SeqId three[3] = {a, b, c};
  const std::vector<int32_t> t = iota(3, 50);
  const Status st = m->append_batch(three, 3, t.data(), 1);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(m->num_available_blocks(), 0);
  EXPECT_EQ(m->stats().cow_copies, 2);
  ASSERT_TRUE(m->check_invariants().ok()) << m->check_invariants().message();
  // The next batch needs 3 (each of a, b, c fills its block and opens a new one at 4 + 1).
  const std::vector<int32_t> t2 = iota(9, 60);
  expect_refused(*m, Status::Code::kResourceExhausted, "3 sequences need 3 new blocks",
                 [&] { return m->append_batch(three, 3, t2.data(), 3); });
  ASSERT_TRUE(m->free(filler).ok());
}

TEST(KVCacheManagerTest, AppendBatchRefusesBadBatchesWithoutChange) {
  auto m = make(config(4, 4, 4, 3));
  SeqId a = create(*m, iota(5));
  SeqId b = create(*m, iota(2));
  SeqId d = create(*m, iota(2));  // the pool's last block, freed again: 1 available
  ASSERT_TRUE(m->free(d).ok());
  const auto invalid = Status::Code::kInvalidArgument;
  const std::vector<int32_t> t = iota(12);
  {
    const SeqId ids[3] = {a, b, 42};
    expect_refused(*m, invalid, "sequence 42 does not exist (ids handed out so far: 1..3) (entry 2 of 3)",
                   [&] { return m->append_batch(ids, 3, t.data(), 1); });
  }
  {
    const SeqId ids[2] = {d, a};
    expect_refused(*m, invalid, "sequence 3 was already freed (entry 0 of 2)",
                   [&] { return m->append_batch(ids, 2, t.data(), 1); });
  }
  {
    const SeqId ids[3] = {a, b, a};
    expect_refused(*m, invalid, "sequence 1 appears twice (entries 0 and 2)",
                   [&] { return m->append_batch(ids, 3, t.data(), 1); });
  }
  {
    const SeqId ids[2] = {b, a};  // a: 5 + 8 tokens > 3 blocks of 4
    expect_refused(*m, invalid, "(entry 1 of 2)", [&] { return m->append_batch(ids, 2, t.data(), 8); });
    expect_refused(*m, invalid, "max_blocks_per_seq", [&] { return m->append_batch(ids, 2, t.data(), 8); });
    expect_refused(*m, invalid, "num_tokens must be >= 0", [&] { return m->append_batch(ids, 2, nullptr, -1); });
    expect_refused(*m, invalid, "count must be >= 0", [&] { return m->append_batch(ids, -1, nullptr, 1); });
    expect_refused(*m, Status::Code::kResourceExhausted, "2 sequences need 2 new blocks",
                   [&] { return m->append_batch(ids, 2, t.data(), 4); });  // b: 2 -> 6, a: 5 -> 9
  }
  expect_refused(*m, invalid, "ids must not be null", [&] { return m->append_batch(nullptr, 1, nullptr, 1); });
  EXPECT_TRUE(m->append_batch(nullptr, 0, nullptr, 1).ok());  // an empty batch
  // After the refusals the scratch marks are clear: a batch of the same rows goes through.
  const SeqId ids[2] = {a, b};
  const Status st = m->append_batch(ids, 2, t.data(), 1);
  EXPECT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(m->check_invariants().ok()) << m->check_invariants().message();
}

TEST(KVCacheManagerTest, UpdatesCarryOnlyChangedRowsAndColumns) {
  auto m = make(config(64, 4, 8, 8));
  SeqId a = create(*m, iota(6));
  SeqId b = create(*m, iota(3));
  create(*m, iota(3));
  KVCacheUpdates u = take(*m);
  EXPECT_EQ(u.num_rows, 3);
  EXPECT_TRUE(take(*m).empty());  // nothing changed since
  ASSERT_TRUE(m->append(a, iota(1).data(), 1).ok());  // 7 tokens, same blocks
  ASSERT_TRUE(m->append(b, iota(2).data(), 2).ok());  // 5 tokens: a new block in column 1
  u = take(*m);
  ASSERT_EQ(u.num_copies, 0);
  ASSERT_EQ(u.num_rows, 2);
  flashkit::KVSeqInfo ia, ib;
  m->sequence_info(a, &ia);
  m->sequence_info(b, &ib);
  const int32_t* h = u.buffer.data();
  EXPECT_EQ(std::vector<int32_t>(h, h + 5), (std::vector<int32_t>{ia.row, 7, 0, 0, 10}));
  EXPECT_EQ(std::vector<int32_t>(h + 5, h + 10), (std::vector<int32_t>{ib.row, 5, 1, 1, 10}));
  ASSERT_EQ(u.buffer.size(), 11u);
  EXPECT_EQ(u.buffer[10], blocks_of(*m, b)[1]);
  ASSERT_TRUE(m->free(b).ok());  // only its seqlen goes to 0
  u = take(*m);
  ASSERT_EQ(u.num_rows, 1);
  EXPECT_EQ(std::vector<int32_t>(u.buffer.begin(), u.buffer.end()),
            (std::vector<int32_t>{ib.row, 0, 0, 0, 5}));
}

TEST(KVCacheManagerTest, WithoutPrefixCachingNothingIsCached) {
  auto m = make(config(16, 4, 8, 8, false));
  SeqId a = create(*m, iota(9));
  take(*m);
  ASSERT_TRUE(m->free(a).ok());
  EXPECT_EQ(m->stats().cached_blocks, 0);
  EXPECT_EQ(m->stats().free_blocks, 16);
  int64_t cached = -1;
  create(*m, iota(9), &cached);
  EXPECT_EQ(cached, 0);
}

TEST(KVCacheManagerTest, BlocksNeededForCreateCountsCachedHits) {
  auto m = make(config(8, 4));
  SeqId a = create(*m, iota(9));
  take(*m);
  ASSERT_TRUE(m->free(a).ok());  // 2 cached, 6 free
  int32_t need = -1;
  ASSERT_TRUE(m->blocks_needed_for_create(iota(9).data(), 9, &need).ok());
  EXPECT_EQ(need, 3);  // 1 new + 2 revived from the cache list: all leave "available"
  int64_t cached = -1;
  create(*m, iota(9), &cached);
  EXPECT_EQ(cached, 8);
  EXPECT_EQ(m->num_available_blocks(), 8 - 3);
}

// --- the harness on hand-written sequences -------------------------------------------------

TEST(KVCacheHarnessTest, ParallelSamplingAndBeamPruning) {
  kvtest::Harness h(config(40, 4, 8, 8));
  ASSERT_EQ(h.init_error(), "");
  SeqId p;
  ASSERT_EQ(h.create(iota(10), true, &p), "");
  ASSERT_EQ(h.step(), "");
  std::vector<SeqId> kids = {p};
  for (int i = 0; i < 3; ++i) {
    SeqId c;
    ASSERT_EQ(h.fork(p, &c), "");
    kids.push_back(c);
  }
  for (int t = 0; t < 9; ++t) {
    for (SeqId k : kids) ASSERT_EQ(h.append(k, {static_cast<int32_t>(k * 10 + t)}, true), "");
    ASSERT_EQ(h.step(), "");
  }
  ASSERT_EQ(h.free(kids[1]), "");  // prune a beam, fork another, in the same step
  SeqId c;
  ASSERT_EQ(h.fork(kids[2], &c), "");
  ASSERT_EQ(h.append(c, {1, 2, 3}, true), "");
  ASSERT_EQ(h.append(kids[2], {4}, true), "");
  ASSERT_EQ(h.step(), "");
  ASSERT_EQ(h.drain(), "");
}

// --- property tests --------------------------------------------------------------------------

struct Rng : kvtest::Source {
  explicit Rng(uint64_t seed) : g(seed) {}
  uint32_t next(uint32_t n) override { return n ? static_cast<uint32_t>(g() % n) : 0; }
  bool done() const override { return false; }
  std::mt19937_64 g;
};

struct PropertyCase {
  const char* name;
  KVCacheConfig cfg;
  int64_t ops;
};

void PrintTo(const PropertyCase& c, std::ostream* os) { *os << c.name; }

class KVCacheProperty : public ::testing::TestWithParam<std::tuple<PropertyCase, int>> {};

TEST_P(KVCacheProperty, RandomOperationsKeepEveryInvariant) {
  const PropertyCase& pc = std::get<0>(GetParam());
  const int seed = std::get<1>(GetParam());
  kvtest::Harness h(pc.cfg);
  ASSERT_EQ(h.init_error(), "");
  Rng rng(0x5eed0000ULL + static_cast<uint64_t>(seed) * 7919 + pc.cfg.block_size);
  const std::string e = kvtest::run_ops(h, rng, pc.ops);
  ASSERT_EQ(e, "") << pc.name << " seed " << seed;
  EXPECT_GT(h.steps(), pc.ops / 10);
  EXPECT_GT(h.failures_checked(), 0);  // bad calls were exercised
  const flashkit::KVCacheStats s = h.mgr().stats();
  if (pc.cfg.prefix_caching) {
    EXPECT_GT(s.prefix_hit_tokens, 0) << "no prefix hit exercised";
  }
  if (pc.cfg.block_size > 1) {  // with one-token blocks no block is ever partial
    EXPECT_GT(s.cow_copies, 0) << "no copy-on-write exercised";
  }
  if (std::string(pc.name) == "large_pool") {
    EXPECT_EQ(s.evictions, 0);
    EXPECT_GT(h.hits_checked_exact(), 0);
  } else if (pc.cfg.prefix_caching) {
    EXPECT_GT(s.evictions, 0) << "no eviction exercised";
  }
}

const PropertyCase kCases[] = {
    {"small_pool_b4", config(24, 4, 8, 6), 4000},
    {"tiny_pool_b1", config(10, 1, 6, 12), 4000},
    {"b3", config(30, 3, 8, 8), 4000},
    {"b16", config(10, 16, 6, 3), 3000},
    {"no_prefix_cache", config(24, 4, 8, 6, false), 3000},
    {"large_pool", config(1024, 4, 12, 8), 2000},
};

INSTANTIATE_TEST_SUITE_P(
    Random, KVCacheProperty, ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Range(0, 6)),
    [](const ::testing::TestParamInfo<KVCacheProperty::ParamType>& info) {
      return std::string(std::get<0>(info.param).name) + "_seed" + std::to_string(std::get<1>(info.param));
    });

}  // namespace
