"""Paged KV-cache manager: ``flashkit.KVCacheManager`` (design: docs/kvcache.md).

The bookkeeping (block pool, reference counts, copy-on-write, prefix cache, block tables)
is the C++ manager of ``flashkit/kvcache.h`` through ``flashkit._C``; it needs neither
torch nor a GPU::

    m = flashkit.KVCacheManager(num_blocks=1024, block_size=16, max_batch=64,
                                max_blocks_per_seq=256)
    seq, cached = m.create(prompt_token_ids)      # reuses cached prompt-prefix blocks
    m.append(seq, [next_token])
    child = m.fork(seq)                            # parallel sampling / beam search
    updates = m.take_updates()                     # the step's copies + changed rows
    m.free(seq)

With ``num_layers`` (or ``caches``) the object also owns the device side, as torch
tensors: the per-layer caches ``k_caches[l]`` / ``v_caches[l]``
(``[num_blocks, block_size, num_kv_heads, head_dim]``), ``block_table``
(``[max_batch, max_blocks_per_seq]`` int32) and ``seqlens`` (``[max_batch]`` int32), and
:meth:`KVCacheManager.step` applies each step's updates to them: one host-to-device copy
of the packed buffer, then at most two kernel launches (block copies for every layer's K
and V, block-table row scatter) on the current stream.

Errors: ``ValueError`` for a bad call (unknown or freed sequence, double free, negative
count, a sequence longer than its block-table row), :class:`KVCacheExhaustedError` (a
``RuntimeError``) when no block or no row is left. A call that raises changed nothing.
"""

from __future__ import annotations

import sys
from collections import namedtuple

import numpy as np

__all__ = ["KVCacheManager", "KVCacheExhaustedError", "Updates", "SeqInfo", "unpack_updates"]

_pkg = sys.modules[__name__.rpartition(".")[0]]  # the flashkit package (holds _C)

if _pkg._C is not None:
    KVCacheExhaustedError = _pkg._C.KVCacheExhaustedError
else:  # a source checkout without the extension: importable, the manager raises
    class KVCacheExhaustedError(RuntimeError):
        """The KV-cache pool has no block (or no block-table row) left."""

Updates = namedtuple("Updates", "buffer num_copies num_rows")
Updates.__doc__ = """One step's device work, packed (see flashkit/kvcache.h): ``buffer`` (int32
ndarray) holds ``num_copies`` (src, dst) block pairs, then ``num_rows`` row headers
(row, seqlen, col_begin, col_count, offset), then the changed block ids."""

SeqInfo = namedtuple("SeqInfo", "row length num_computed num_blocks")
SeqInfo.__doc__ = """A sequence's block-table row, its length in tokens, how many of them have
their KV in the cache (``[num_computed, length)`` are pending: the step's forward writes
them), and its number of blocks."""

Created = namedtuple("Created", "seq_id num_cached_tokens")


def unpack_updates(updates):
    """``(pairs, rows)`` of an :class:`Updates`: ``pairs`` an int32 array ``[num_copies, 2]``
    of (src, dst) blocks, ``rows`` a list of ``(row, seqlen, col_begin, block_ids)``."""
    buf, nc, nr = updates
    buf = np.asarray(buf)
    pairs = buf[: 2 * nc].reshape(nc, 2)
    rows = []
    for i in range(nr):
        row, seqlen, col, count, off = (int(x) for x in buf[2 * nc + 5 * i: 2 * nc + 5 * i + 5])
        rows.append((row, seqlen, col, buf[off: off + count]))
    return pairs, rows


def _native():
    if _pkg._C is None:
        raise ImportError(
            "flashkit's native extension (flashkit._C) is not available: "
            f"{_pkg._C_IMPORT_ERROR}. Install the package (pip install --no-build-isolation .).")
    return _pkg._C


def _tokens(tokens, num_tokens, fn):
    """(int32 contiguous array or None, count) from a sequence of ids or None + a count."""
    if tokens is None:
        if num_tokens is None:
            raise TypeError(f"{fn}: give tokens (token ids) or num_tokens")
        return None, int(num_tokens)
    arr = np.asarray(tokens)
    if arr.ndim != 1:
        raise ValueError(f"{fn}: tokens must be one-dimensional, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{fn}: tokens must be integers, got dtype {arr.dtype}")
    if arr.size and (arr.min() < -2**31 or arr.max() >= 2**31):
        raise ValueError(f"{fn}: token ids must fit int32")
    arr = np.ascontiguousarray(arr, dtype=np.int32)
    if num_tokens is not None and int(num_tokens) != arr.size:
        raise ValueError(f"{fn}: {arr.size} tokens given but num_tokens={num_tokens}")
    return arr, int(arr.size)


class KVCacheManager:
    """A paged KV cache: block pool, block tables, copy-on-write fork and prefix sharing.

    Args:
        num_blocks: physical blocks (per layer; every layer uses the same block ids).
        block_size: tokens per block.
        max_batch: block-table rows, i.e. live sequences at most.
        max_blocks_per_seq: block-table columns (a sequence holds at most
            ``max_blocks_per_seq * block_size`` tokens).
        prefix_caching: reuse full blocks across prompts that start alike (default on).
        num_layers, num_kv_heads, head_dim, dtype, device: allocate the device side (torch):
            per-layer K and V caches ``[num_blocks, block_size, num_kv_heads, head_dim]``,
            ``block_table`` and ``seqlens``.
        caches: or hand in existing caches as ``(k_caches, v_caches)``, two lists of
            tensors ``[num_blocks, block_size, H_kv, D]`` (same shape, dtype and device;
            each block contiguous, any block stride).

    Thread safety: not synchronized; the calls hold the GIL, so Python threads that share
    a manager are serialized, but use one manager per engine loop.
    """

    def __init__(self, num_blocks, block_size, max_batch, max_blocks_per_seq, *,
                 prefix_caching=True, num_layers=0, num_kv_heads=None, head_dim=None,
                 dtype=None, device=None, caches=None):
        self._core = _native().KVCacheManager(int(num_blocks), int(block_size), int(max_batch),
                                              int(max_blocks_per_seq), bool(prefix_caching))
        self.k_caches = self.v_caches = None
        self.block_table = self.seqlens = None
        if caches is not None or num_layers:
            self._init_device(int(num_layers), num_kv_heads, head_dim, dtype, device, caches)

    # --- configuration ----------------------------------------------------------------
    num_blocks = property(lambda self: self._core.num_blocks)
    block_size = property(lambda self: self._core.block_size)
    max_batch = property(lambda self: self._core.max_batch)
    max_blocks_per_seq = property(lambda self: self._core.max_blocks_per_seq)
    prefix_caching = property(lambda self: self._core.prefix_caching)

    # --- sequences (a call that raises changed nothing) ----------------------------------
    def create(self, tokens=None, *, num_tokens=None):
        """A new sequence holding the prompt ``tokens`` (ids; or ``None`` and
        ``num_tokens`` when the ids are unknown: nothing is reused or cached then).
        Returns ``(seq_id, num_cached_tokens)``: the leading prompt tokens found in the
        prefix cache (their KV is already there; at least the last token is left)."""
        arr, n = _tokens(tokens, num_tokens, "create")
        return Created(*self._core.create(arr, n))

    def append(self, seq_id, tokens=None, *, num_tokens=None):
        """Appends tokens (ids, or ``None`` and ``num_tokens``), allocating blocks as
        needed and copying the last block first if it is shared (copy-on-write)."""
        arr, n = _tokens(tokens, num_tokens, "append")
        self._core.append(int(seq_id), arr, n)

    def append_batch(self, seq_ids, tokens=None, *, num_tokens=None):
        """:meth:`append` of ``n`` tokens to each of ``seq_ids`` in one call (a decode step's
        bookkeeping): ``tokens`` ``[len(seq_ids), n]`` ids, row i for ``seq_ids[i]``, or
        ``None`` and ``num_tokens`` n. All or nothing: every id is checked (live, listed
        once, room in its block-table row) and the blocks the whole batch takes
        (copy-on-write included) against the pool before anything changes."""
        ids = np.asarray(seq_ids)
        if ids.ndim != 1:
            raise ValueError(f"append_batch: seq_ids must be one-dimensional, got shape {ids.shape}")
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"append_batch: seq_ids must be integers, got dtype {ids.dtype}")
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if tokens is None:
            if num_tokens is None:
                raise TypeError("append_batch: give tokens (token ids) or num_tokens")
            self._core.append_batch(ids, None, int(num_tokens))
            return
        arr = np.asarray(tokens)
        if arr.ndim != 2 or arr.shape[0] != ids.size:
            raise ValueError(f"append_batch: tokens must have shape [len(seq_ids), n] = "
                             f"[{ids.size}, n], got {arr.shape}")
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"append_batch: tokens must be integers, got dtype {arr.dtype}")
        if arr.size and (arr.min() < -2**31 or arr.max() >= 2**31):
            raise ValueError("append_batch: token ids must fit int32")
        if num_tokens is not None and int(num_tokens) != arr.shape[1]:
            raise ValueError(f"append_batch: {arr.shape[1]} tokens per sequence given but "
                             f"num_tokens={num_tokens}")
        self._core.append_batch(ids, np.ascontiguousarray(arr, dtype=np.int32), int(arr.shape[1]))

    def fork(self, seq_id):
        """A new sequence sharing every block of ``seq_id``; returns its id."""
        return self._core.fork(int(seq_id))

    def free(self, seq_id):
        """Releases the sequence; its full blocks stay in the prefix cache (LRU)."""
        self._core.free(int(seq_id))

    def blocks_needed_for_create(self, tokens=None, *, num_tokens=None):
        """Blocks a :meth:`create` of this prompt would take from
        :meth:`num_available_blocks` now (for admission control)."""
        arr, n = _tokens(tokens, num_tokens, "blocks_needed_for_create")
        return self._core.blocks_needed_for_create(arr, n)

    def blocks_needed_for_append(self, seq_id, num_tokens):
        return self._core.blocks_needed_for_append(int(seq_id), int(num_tokens))

    # --- step boundary --------------------------------------------------------------------
    def take_updates(self):
        """Packs this step's block copies and changed block-table rows (:class:`Updates`)
        and commits the step: pending tokens count as computed, newly full blocks join
        the prefix cache. Bookkeeping only; :meth:`step` also applies them on the GPU."""
        return Updates(*self._core.take_updates())

    def step(self, stream=None):
        """:meth:`take_updates`, then applies them to the device tensors on ``stream``
        (default: torch's current stream): one H2D copy of the packed buffer, one launch
        for the block copies (all layers, K and V), one for the changed rows. Returns the
        :class:`Updates`. Run the forward that writes the pending tokens after it."""
        if self.block_table is None:
            raise RuntimeError("KVCacheManager.step: no device side (pass num_layers=... or "
                               "caches=...); use take_updates() for bookkeeping only")
        torch = self._torch
        updates = self.take_updates()
        buf, nc, nr = updates
        if nc == 0 and nr == 0:
            return updates
        n = int(buf.size)
        if self._staging.numel() < n:
            self._staging = torch.empty(max(n, 2 * self._staging.numel()), dtype=torch.int32,
                                        device=self.block_table.device)
        if stream is None:
            stream = torch.cuda.current_stream(self.block_table.device)
        # A pinned host copy from the caching host allocator: it is not reused before the
        # asynchronous copy has finished (torch records the copy's event).
        host = torch.from_numpy(buf).pin_memory()
        with torch.cuda.device(self.block_table.device), torch.cuda.stream(stream):
            self._staging[:n].copy_(host, non_blocking=True)
            _native().kvcache_apply_updates(
                self._staging.data_ptr(), n, nc, nr, self._cache_ptrs.data_ptr(),
                self._num_caches, self.num_blocks, self._block_bytes, self._block_stride_bytes,
                self.block_table.data_ptr(), self.seqlens.data_ptr(), self.max_batch,
                self.max_blocks_per_seq, self.block_table.stride(0), stream.cuda_stream)
        return updates

    # --- queries ------------------------------------------------------------------------------
    def sequence_info(self, seq_id):
        return SeqInfo(*self._core.sequence_info(int(seq_id)))

    def block_ids(self, seq_id):
        """The sequence's blocks in order (int32 ndarray)."""
        return self._core.block_ids(int(seq_id))

    def slot_mapping(self, seq_id, begin, end):
        """Cache slots (``block * block_size + offset``) of positions ``[begin, end)``:
        where the forward writes their K and V (int32 ndarray)."""
        return self._core.slot_mapping(int(seq_id), int(begin), int(end))

    def stats(self):
        """Block counts (used / free / cached / in flight / available), internal waste,
        sharing ratio, prefix hit rate and counters, as a dict (docs/kvcache.md)."""
        return self._core.stats()

    def is_live(self, seq_id):
        return self._core.is_live(int(seq_id))

    def live_sequences(self):
        return list(self._core.live_sequences())

    def num_available_blocks(self):
        return self._core.num_available_blocks()

    def num_free_rows(self):
        return self._core.num_free_rows()

    def block_state(self, block):
        """``'free'``, ``'used'``, ``'cached'`` or ``'in_flight'``."""
        return self._core.block_state(int(block))

    def block_refcount(self, block):
        return self._core.block_refcount(int(block))

    def host_block_table(self):
        """A copy of the host block table ``[max_batch, max_blocks_per_seq]`` (int32): what
        ``block_table`` holds on the device after :meth:`step`."""
        return self._core.host_block_table()

    def host_seqlens(self):
        return self._core.host_seqlens()

    def check_invariants(self):
        """Recomputes the whole state and raises ``ValueError`` on an inconsistency."""
        self._core.check_invariants()

    def debug_state(self):
        """The whole state as text (equal text = equal state)."""
        return self._core.debug_state()

    # --- device side (torch) ------------------------------------------------------------------
    def _init_device(self, num_layers, num_kv_heads, head_dim, dtype, device, caches):
        import torch

        self._torch = torch
        if caches is not None:
            k_caches, v_caches = (list(c) for c in caches)
            if not k_caches or len(k_caches) != len(v_caches):
                raise ValueError("caches: expected (k_caches, v_caches), two lists of the same "
                                 "non-zero length")
        else:
            if num_layers <= 0 or not num_kv_heads or not head_dim:
                raise ValueError("num_layers, num_kv_heads and head_dim are needed to allocate "
                                 "the caches")
            dtype = torch.bfloat16 if dtype is None else dtype
            device = torch.device("cuda") if device is None else torch.device(device)
            shape = (self.num_blocks, self.block_size, int(num_kv_heads), int(head_dim))
            k_caches = [torch.empty(shape, dtype=dtype, device=device) for _ in range(num_layers)]
            v_caches = [torch.empty(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        first = k_caches[0]
        if first.device.type != "cuda":
            raise ValueError(f"caches: expected CUDA tensors, got device {first.device}")
        for i, t in enumerate(k_caches + v_caches):
            name = f"{'k' if i < len(k_caches) else 'v'}_caches[{i % len(k_caches)}]"
            if t.dim() != 4 or t.shape[0] != self.num_blocks or t.shape[1] != self.block_size:
                raise ValueError(f"{name}: expected [num_blocks={self.num_blocks}, block_size="
                                 f"{self.block_size}, H_kv, D], got {list(t.shape)}")
            if t.shape != first.shape or t.dtype != first.dtype or t.device != first.device:
                raise ValueError(f"{name}: shape, dtype and device must match k_caches[0]")
            if t.stride()[1:] != first[0].contiguous().stride() or t.stride(0) != first.stride(0):
                raise ValueError(f"{name}: each block must be contiguous, with the block stride "
                                 "of k_caches[0]")
        self.k_caches, self.v_caches = k_caches, v_caches
        dev = first.device
        elem = first.element_size()
        self._block_bytes = first[0].numel() * elem
        self._block_stride_bytes = first.stride(0) * elem
        ptrs = [t.data_ptr() for kv in zip(k_caches, v_caches) for t in kv]  # K0, V0, K1, ...
        self._cache_ptrs = torch.tensor(ptrs, dtype=torch.int64, device=dev)
        self._num_caches = len(ptrs)
        self.block_table = torch.zeros((self.max_batch, self.max_blocks_per_seq),
                                       dtype=torch.int32, device=dev)
        self.seqlens = torch.zeros(self.max_batch, dtype=torch.int32, device=dev)
        self._staging = torch.empty(0, dtype=torch.int32, device=dev)
