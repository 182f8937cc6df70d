// flashkit._C.KVCacheManager and flashkit._C.kvcache_apply_updates: the binding of
// flashkit/kvcache.h. Use flashkit.KVCacheManager (python/flashkit/kvcache.py), which adds
// argument conversion and the torch-owned device side.
//
// Errors: InvalidArgument -> ValueError, ResourceExhausted -> KVCacheExhaustedError (a
// RuntimeError), anything else -> RuntimeError; the C++ message verbatim. The manager's
// calls keep the GIL (they are short, and that serializes Python threads sharing a
// manager, as the header's thread-safety note asks); kvcache_apply_updates releases it.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "flashkit/kvcache.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using flashkit::KVCacheManager;
using flashkit::Status;
using SeqId = KVCacheManager::SeqId;

PyObject* g_exhausted = nullptr;  // flashkit._C.KVCacheExhaustedError (lives as long as the module)

void check(const Status& s) {
  if (s.ok()) return;
  PyObject* type = PyExc_RuntimeError;
  if (s.code() == Status::Code::kInvalidArgument) type = PyExc_ValueError;
  if (s.code() == Status::Code::kResourceExhausted) type = g_exhausted;
  PyErr_SetString(type, s.message().c_str());
  throw nb::python_error();
}

using Tokens = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Tokens2D = nb::ndarray<const int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using SeqIds = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Int32Array = nb::ndarray<nb::numpy, int32_t>;

// A numpy array that owns `v`.
Int32Array to_numpy(std::vector<int32_t> v, std::initializer_list<size_t> shape) {
  auto* owned = new std::vector<int32_t>(std::move(v));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<int32_t>*>(p); });
  return Int32Array(owned->data(), shape, owner);
}

const int32_t* data_of(const std::optional<Tokens>& t, int64_t num_tokens, const char* fn) {
  if (!t) return nullptr;
  if (static_cast<int64_t>(t->shape(0)) != num_tokens) {
    throw nb::value_error((std::string(fn) + ": tokens has " + std::to_string(t->shape(0)) +
                           " entries but num_tokens is " + std::to_string(num_tokens))
                              .c_str());
  }
  return t->data();
}

const char* state_name(flashkit::KVBlockState s) {
  switch (s) {
    case flashkit::KVBlockState::kFree: return "free";
    case flashkit::KVBlockState::kUsed: return "used";
    case flashkit::KVBlockState::kCached: return "cached";
    case flashkit::KVBlockState::kInFlight: return "in_flight";
  }
  return "?";
}

struct Manager {
  std::unique_ptr<KVCacheManager> m;

  Manager(int32_t num_blocks, int32_t block_size, int32_t max_batch, int32_t max_blocks_per_seq,
          bool prefix_caching) {
    flashkit::KVCacheConfig c;
    c.num_blocks = num_blocks;
    c.block_size = block_size;
    c.max_batch = max_batch;
    c.max_blocks_per_seq = max_blocks_per_seq;
    c.prefix_caching = prefix_caching;
    check(KVCacheManager::make(c, &m));
  }
  int32_t block(int32_t b) const {
    if (b < 0 || b >= m->config().num_blocks) {
      throw nb::index_error(("block " + std::to_string(b) + " is not in [0, " +
                             std::to_string(m->config().num_blocks) + ")")
                                .c_str());
    }
    return b;
  }
};

nb::dict stats_dict(const flashkit::KVCacheStats& s) {
  nb::dict d;
  d["num_blocks"] = s.num_blocks;
  d["used_blocks"] = s.used_blocks;
  d["free_blocks"] = s.free_blocks;
  d["cached_blocks"] = s.cached_blocks;
  d["in_flight_blocks"] = s.in_flight_blocks;
  d["available_blocks"] = s.available_blocks;
  d["logical_blocks"] = s.logical_blocks;
  d["filled_slots"] = s.filled_slots;
  d["num_sequences"] = s.num_sequences;
  d["prompt_tokens"] = s.prompt_tokens;
  d["prefix_hit_tokens"] = s.prefix_hit_tokens;
  d["cow_copies"] = s.cow_copies;
  d["evictions"] = s.evictions;
  d["internal_waste"] = s.internal_waste;
  d["sharing_ratio"] = s.sharing_ratio;
  d["prefix_hit_rate"] = s.prefix_hit_rate;
  return d;
}

}  // namespace

void bind_kvcache(nb::module_& m) {
  g_exhausted = PyErr_NewExceptionWithDoc(
      "flashkit._C.KVCacheExhaustedError",
      "The KV-cache pool has no block (or the block table no row) for the request; nothing "
      "was changed. Free or preempt sequences and retry.",
      PyExc_RuntimeError, nullptr);
  if (g_exhausted == nullptr) throw nb::python_error();
  m.attr("KVCacheExhaustedError") = nb::borrow(g_exhausted);

  nb::class_<Manager>(m, "KVCacheManager",
                      "Host bookkeeping of a paged KV cache (flashkit/kvcache.h). Use "
                      "flashkit.KVCacheManager.")
      .def(nb::init<int32_t, int32_t, int32_t, int32_t, bool>(), "num_blocks"_a, "block_size"_a,
           "max_batch"_a, "max_blocks_per_seq"_a, "prefix_caching"_a = true)
      .def(
          "create",
          [](Manager& s, std::optional<Tokens> tokens, int64_t num_tokens) {
            SeqId id = 0;
            int64_t cached = 0;
            check(s.m->create(data_of(tokens, num_tokens, "create"), num_tokens, &id, &cached));
            return std::make_pair(id, cached);
          },
          "tokens"_a.none(), "num_tokens"_a, "-> (seq_id, num_cached_tokens)")
      .def(
          "append",
          [](Manager& s, SeqId id, std::optional<Tokens> tokens, int64_t num_tokens) {
            check(s.m->append(id, data_of(tokens, num_tokens, "append"), num_tokens));
          },
          "seq_id"_a, "tokens"_a.none(), "num_tokens"_a)
      .def(
          "append_batch",
          [](Manager& s, SeqIds ids, std::optional<Tokens2D> tokens, int64_t num_tokens) {
            const int64_t count = static_cast<int64_t>(ids.shape(0));
            if (tokens && (static_cast<int64_t>(tokens->shape(0)) != count ||
                           static_cast<int64_t>(tokens->shape(1)) != num_tokens)) {
              throw nb::value_error(("append_batch: tokens has shape [" + std::to_string(tokens->shape(0)) +
                                     ", " + std::to_string(tokens->shape(1)) + "], expected [" +
                                     std::to_string(count) + ", " + std::to_string(num_tokens) + "]")
                                        .c_str());
            }
            check(s.m->append_batch(ids.data(), count, tokens ? tokens->data() : nullptr, num_tokens));
          },
          "seq_ids"_a, "tokens"_a.none(), "num_tokens"_a)
      .def(
          "fork",
          [](Manager& s, SeqId parent) {
            SeqId child = 0;
            check(s.m->fork(parent, &child));
            return child;
          },
          "seq_id"_a)
      .def("free", [](Manager& s, SeqId id) { check(s.m->free(id)); }, "seq_id"_a)
      .def(
          "blocks_needed_for_create",
          [](const Manager& s, std::optional<Tokens> tokens, int64_t num_tokens) {
            int32_t n = 0;
            check(s.m->blocks_needed_for_create(data_of(tokens, num_tokens, "blocks_needed_for_create"),
                                                num_tokens, &n));
            return n;
          },
          "tokens"_a.none(), "num_tokens"_a)
      .def(
          "blocks_needed_for_append",
          [](const Manager& s, SeqId id, int64_t num_tokens) {
            int32_t n = 0;
            check(s.m->blocks_needed_for_append(id, num_tokens, &n));
            return n;
          },
          "seq_id"_a, "num_tokens"_a)
      .def(
          "take_updates",
          [](Manager& s) {
            flashkit::KVCacheUpdates u;
            check(s.m->take_updates(&u));
            const size_t n = u.buffer.size();
            return nb::make_tuple(to_numpy(std::move(u.buffer), {n}), u.num_copies, u.num_rows);
          },
          "-> (buffer int32 ndarray, num_copies, num_rows); commits the step")
      .def(
          "sequence_info",
          [](const Manager& s, SeqId id) {
            flashkit::KVSeqInfo i;
            check(s.m->sequence_info(id, &i));
            return nb::make_tuple(i.row, i.length, i.num_computed, i.num_blocks);
          },
          "seq_id"_a, "-> (row, length, num_computed, num_blocks)")
      .def(
          "block_ids",
          [](const Manager& s, SeqId id) {
            std::vector<int32_t> b;
            check(s.m->block_ids(id, &b));
            const size_t n = b.size();
            return to_numpy(std::move(b), {n});
          },
          "seq_id"_a)
      .def(
          "slot_mapping",
          [](const Manager& s, SeqId id, int64_t begin, int64_t end) {
            std::vector<int32_t> out(static_cast<size_t>(end > begin ? end - begin : 0));
            check(s.m->slot_mapping(id, begin, end, out.data()));
            const size_t n = out.size();
            return to_numpy(std::move(out), {n});
          },
          "seq_id"_a, "begin"_a, "end"_a)
      .def("stats", [](const Manager& s) { return stats_dict(s.m->stats()); })
      .def("is_live", [](const Manager& s, SeqId id) { return s.m->is_live(id); }, "seq_id"_a)
      .def("live_sequences", [](const Manager& s) { return s.m->live_sequences(); })
      .def("num_available_blocks", [](const Manager& s) { return s.m->num_available_blocks(); })
      .def("num_free_rows", [](const Manager& s) { return s.m->num_free_rows(); })
      .def(
          "block_state", [](const Manager& s, int32_t b) { return state_name(s.m->block_state(s.block(b))); },
          "block"_a, "'free', 'used', 'cached' or 'in_flight'")
      .def(
          "block_refcount", [](const Manager& s, int32_t b) { return s.m->block_refcount(s.block(b)); },
          "block"_a)
      .def("host_block_table",
           [](const Manager& s) {
             const auto& c = s.m->config();
             const int32_t* t = s.m->host_block_table();
             const size_t n = static_cast<size_t>(c.max_batch) * c.max_blocks_per_seq;
             return to_numpy(std::vector<int32_t>(t, t + n),
                             {static_cast<size_t>(c.max_batch), static_cast<size_t>(c.max_blocks_per_seq)});
           })
      .def("host_seqlens",
           [](const Manager& s) {
             const size_t n = static_cast<size_t>(s.m->config().max_batch);
             const int32_t* t = s.m->host_seqlens();
             return to_numpy(std::vector<int32_t>(t, t + n), {n});
           })
      .def("check_invariants", [](const Manager& s) { check(s.m->check_invariants()); })
      .def("debug_state", [](const Manager& s) { return s.m->debug_state(); })
      .def_prop_ro("num_blocks", [](const Manager& s) { return s.m->config().num_blocks; })
      .def_prop_ro("block_size", [](const Manager& s) { return s.m->config().block_size; })
      .def_prop_ro("max_batch", [](const Manager& s) { return s.m->config().max_batch; })
      .def_prop_ro("max_blocks_per_seq", [](const Manager& s) { return s.m->config().max_blocks_per_seq; })
      .def_prop_ro("prefix_caching", [](const Manager& s) { return s.m->config().prefix_caching; });

  m.def(
      "kvcache_apply_updates",
      [](uintptr_t updates, int64_t length, int32_t num_copies, int32_t num_rows, uintptr_t cache_ptrs,
         int32_t num_caches, int32_t num_blocks, int64_t block_bytes, int64_t block_stride_bytes,
         uintptr_t block_table, uintptr_t seqlens, int32_t max_batch, int32_t max_blocks_per_seq,
         int64_t row_stride, uintptr_t stream) {
        flashkit::KVCacheDeviceCaches c;
        c.cache_ptrs = reinterpret_cast<const uint64_t*>(cache_ptrs);
        c.num_caches = num_caches;
        c.num_blocks = num_blocks;
        c.block_bytes = block_bytes;
        c.block_stride_bytes = block_stride_bytes;
        flashkit::KVCacheDeviceTables t;
        t.block_table = reinterpret_cast<int32_t*>(block_table);
        t.seqlens = reinterpret_cast<int32_t*>(seqlens);
        t.max_batch = max_batch;
        t.max_blocks_per_seq = max_blocks_per_seq;
        t.row_stride = row_stride;
        Status st;
        {
          nb::gil_scoped_release release;
          st = flashkit::kvcache_apply_updates(reinterpret_cast<const int32_t*>(updates), length,
                                               num_copies, num_rows, c, t,
                                               reinterpret_cast<cudaStream_t>(stream));
        }
        check(st);
      },
      "updates"_a, "length"_a, "num_copies"_a, "num_rows"_a, "cache_ptrs"_a, "num_caches"_a,
      "num_blocks"_a, "block_bytes"_a, "block_stride_bytes"_a, "block_table"_a, "seqlens"_a,
      "max_batch"_a, "max_blocks_per_seq"_a, "row_stride"_a, "stream"_a = 0,
      "Applies a take_updates() buffer already on the device (raw device addresses as ints): "
      "the block copies over every cache (cache_ptrs: device int64 array of base addresses) "
      "and the block-table rows, on `stream` (a cudaStream_t as int). Raises ValueError for "
      "bad arguments before any launch.");
}
