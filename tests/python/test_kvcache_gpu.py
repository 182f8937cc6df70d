"""GPU tests of the KV-cache manager's device side (flashkit.KVCacheManager.step):

- copy-on-write copies exactly the shared block, in every layer's K and V, and nothing
  else (several pairs in one launch, handed-in caches with a padded block stride, and the
  16-byte / 4-byte / 1-byte access paths);
- the incremental upload writes exactly the changed rows (and within them exactly the
  changed columns and seqlens) of the device block table;
- a random serving run where a simulated forward writes each pending token's value into
  the caches through the device block table, and every sequence must read its own values
  back (what the C++ harness checks on a simulated device, here on the real one).
"""

import random

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

SENTINEL = -7


@pytest.fixture
def torch():
    import torch

    return torch


def fill_random(torch, caches):
    for t in caches:
        if t.dtype.is_floating_point:
            t.copy_(torch.randn(t.shape, device=t.device).to(t.dtype))
        else:
            t.copy_(torch.randint(-1000, 1000, t.shape, device=t.device).to(t.dtype))


def check_cow(torch, m, pairs, snapshot):
    """After step(): in every cache, each destination block holds its source's snapshot
    and every other block its own snapshot (compared bit for bit)."""
    torch.cuda.synchronize()
    src_of = {int(d): int(s) for s, d in pairs}
    for before, now in zip(snapshot, m.k_caches + m.v_caches):
        for b in range(m.num_blocks):
            want = before[src_of.get(b, b)]
            assert torch.equal(now[b].view(torch.uint8), want.view(torch.uint8)), \
                f"block {b} differs from the snapshot of block {src_of.get(b, b)}"


@pytest.mark.parametrize("dtype_name,heads,head_dim,block_size", [
    ("bfloat16", 2, 64, 16),   # 4 KB blocks: 16-byte vectors
    ("float16", 1, 2, 3),      # 12-byte blocks: 4-byte words
    ("bfloat16", 1, 1, 1),     # 2-byte blocks: bytes
    ("float32", 3, 5, 4),      # 240-byte blocks: 16-byte vectors
])
def test_copy_on_write_copies_exactly_the_shared_block(torch, dtype_name, heads, head_dim,
                                                       block_size):
    import flashkit

    dtype = getattr(torch, dtype_name)
    m = flashkit.KVCacheManager(24, block_size, 8, 16, num_layers=3, num_kv_heads=heads,
                                head_dim=head_dim, dtype=dtype)
    fill_random(torch, m.k_caches + m.v_caches)
    a, _ = m.create(list(range(block_size + 1)))  # one full block + a partial one
    b, _ = m.create(list(range(50, 50 + 2 * block_size + 1)))
    m.step()
    c = m.fork(a)
    d = m.fork(b)
    e = m.fork(b)
    snapshot = [t.clone() for t in m.k_caches + m.v_caches]
    m.append(c, [1])  # copies a's partial block
    m.append(d, [2])  # copies b's partial block
    m.append(e, [3])  # and again (b's block is still shared with b)
    m.append(b, [4])  # b is alone in it now: no copy
    updates = m.step()
    pairs, _ = flashkit.kvcache.unpack_updates(updates)
    if block_size == 1:  # one-token blocks are never partial: nothing is shared-and-written
        expect = []
    else:
        expect = [(m.block_ids(a)[-1], m.block_ids(c)[-1]),
                  (m.block_ids(b)[-1], m.block_ids(d)[-1]),
                  (m.block_ids(b)[-1], m.block_ids(e)[-1])]
    assert sorted(map(tuple, pairs.tolist())) == sorted((int(x), int(y)) for x, y in expect)
    check_cow(torch, m, expect, snapshot)


def test_copy_on_write_with_handed_in_strided_caches(torch):
    import flashkit

    num_blocks, B, H, D = 16, 8, 2, 32
    block = B * H * D
    # Each block padded by 24 elements: block stride 536 elements, blocks contiguous.
    backing = [torch.randn(num_blocks, block + 24, device="cuda").to(torch.float16)
               for _ in range(4)]
    views = [x[:, :block].view(num_blocks, B, H, D) for x in backing]
    m = flashkit.KVCacheManager(num_blocks, B, 4, 8, caches=(views[:2], views[2:]))
    a, _ = m.create(list(range(11)))
    m.step()
    c = m.fork(a)
    before = [x.clone() for x in backing]
    m.append(c, [5])
    m.step()
    torch.cuda.synchronize()
    src, dst = int(m.block_ids(a)[1]), int(m.block_ids(c)[1])
    for old, new in zip(before, backing):
        expect = old.clone()
        expect[dst, :block] = old[src, :block]  # the padding is not copied
        assert torch.equal(new, expect)


def test_dirty_row_upload_updates_exactly_the_changed_rows(torch):
    import flashkit

    m = flashkit.KVCacheManager(64, 4, 8, 6, num_layers=1, num_kv_heads=1, head_dim=8)
    seqs = [m.create(list(range(10 * i, 10 * i + 5)))[0] for i in range(5)]
    m.step()
    torch.cuda.synchronize()
    assert torch.equal(m.block_table.cpu(), torch.from_numpy(m.host_block_table()))
    assert torch.equal(m.seqlens.cpu(), torch.from_numpy(m.host_seqlens()))
    # Poison the device tables: only what the next update writes may change.
    m.block_table.fill_(SENTINEL)
    m.seqlens.fill_(SENTINEL)
    m.append(seqs[0], [1])           # row 0: seqlen only (5 -> 6, same blocks)
    m.append(seqs[1], [1, 2, 3, 4])  # row 1: seqlen and column 2 (a new block)
    child = m.fork(seqs[4])          # a new row (5): seqlen and columns 0..1
    m.free(seqs[3])                  # row 3: seqlen 0
    updates = m.step()
    torch.cuda.synchronize()
    rows = {i: m.sequence_info(s).row for i, s in enumerate(seqs) if m.is_live(s)}
    child_row = m.sequence_info(child).row
    assert (rows[0], rows[1], child_row) == (0, 1, 5)
    host_t, host_l = m.host_block_table(), m.host_seqlens()
    expect_t = np.full_like(host_t, SENTINEL)
    expect_l = np.full_like(host_l, SENTINEL)
    expect_l[[rows[0], rows[1], 3, child_row]] = host_l[[rows[0], rows[1], 3, child_row]]
    expect_t[rows[1], 2] = host_t[rows[1], 2]
    expect_t[child_row, :2] = host_t[child_row, :2]
    assert np.array_equal(m.block_table.cpu().numpy(), expect_t)
    assert np.array_equal(m.seqlens.cpu().numpy(), expect_l)
    _, packed_rows = flashkit.kvcache.unpack_updates(updates)
    assert sorted(r[0] for r in packed_rows) == sorted([rows[0], rows[1], 3, child_row])


@pytest.mark.parametrize("seed", range(3))
def test_random_run_reads_back_through_the_device_tables(torch, seed):
    """A simulated forward writes a value naming each pending token's prefix into layer
    0's K cache (float32, one element per slot) through the *device* block table; every
    live sequence must then read its own values back, and the device tables must equal
    the host copies after every step."""
    import flashkit

    rng = random.Random(seed)
    B = rng.choice([1, 4, 16])
    m = flashkit.KVCacheManager(48, B, 8, 12, num_layers=2, num_kv_heads=1, head_dim=1,
                                dtype=torch.float32)
    for t in m.k_caches + m.v_caches:
        t.fill_(float("nan"))
    tokens = {}

    def value(prefix):  # a float32-exact name of a token prefix
        return float(hash(tuple(prefix)) % (1 << 23))

    for _ in range(300):
        live = m.live_sequences()
        op = rng.random()
        try:
            if op < 0.25 or not live:
                t = [7] * rng.randrange(0, 2 * B + 2) + [rng.randrange(3) for _ in range(rng.randrange(1, 6))]
                s, _ = m.create(t)
                tokens[s] = t
            elif op < 0.6:
                s = rng.choice(live)
                t = [rng.randrange(3) for _ in range(rng.choice([1, 1, 2, B + 1]))]
                m.append(s, t)
                tokens[s] = tokens[s] + t
            elif op < 0.7:
                s = rng.choice(live)
                tokens[m.fork(s)] = list(tokens[s])
            elif op < 0.8:
                s = rng.choice(live)
                m.free(s)
                del tokens[s]
            else:
                pending = {s: m.sequence_info(s) for s in live}
                m.step()
                table = m.block_table.cpu().numpy()
                assert np.array_equal(table, m.host_block_table())
                assert np.array_equal(m.seqlens.cpu().numpy(), m.host_seqlens())
                k = m.k_caches[0].view(-1)
                for s, info in pending.items():  # the forward: write pending tokens
                    for p in range(info.num_computed, info.length):
                        slot = int(table[info.row, p // B]) * B + p % B
                        k[slot] = value(tokens[s][: p + 1])
                kc = k.cpu().numpy()
                for s, info in pending.items():  # read everything back
                    for p in range(info.length):
                        slot = int(table[info.row, p // B]) * B + p % B
                        assert kc[slot] == value(tokens[s][: p + 1]), (s, p)
        except (flashkit.KVCacheExhaustedError, ValueError) as e:
            assert "nothing was changed" in str(e)
    m.check_invariants()


@pytest.mark.parametrize("block_size", [16, 5])
def test_decode_over_a_forked_partly_diverged_batch(torch, block_size):
    """Issue 10: a decode step over sequences that share blocks by fork and then diverged
    (copy-on-write), all through the manager's device tables. The prompt's and the
    divergence's K/V are written by a simulated forward through ``slot_mapping``, the decode
    step's new token by ``flashkit.append_kv`` into the manager's caches; ``flashkit.decode``
    over the manager's rows must equal a float64 reference over each sequence's own history
    (every unused slot holds NaN, so a read of a wrong slot shows)."""
    import flashkit
    from flashkit.testing import check_close
    from flashkit.testing.reference import attention_pytorch, attention_reference

    flashkit.device_errors(clear=True)  # (the check below reads only this test's calls' bits)

    g = torch.Generator(device="cuda").manual_seed(block_size)
    H_q, H_kv, D = 8, 2, 64
    m = flashkit.KVCacheManager(64, block_size, 8, 32, prefix_caching=False, num_layers=1,
                                num_kv_heads=H_kv, head_dim=D, dtype=torch.bfloat16)
    kc, vc = m.k_caches[0], m.v_caches[0]
    kc.fill_(float("nan"))
    vc.fill_(float("nan"))
    hist = {}  # sequence -> (K, V) of its tokens so far, [len, H_kv, D] bf16

    def rand(n):
        return torch.randn(n, H_kv, D, generator=g, device="cuda").to(torch.bfloat16)

    def step(seqs):  # step() (copy-on-write, table upload), then the forward: each sequence's
        pending = {s: m.sequence_info(s) for s in seqs}  # pending tokens through slot_mapping
        m.step()
        for s, info in pending.items():
            n = info.length - info.num_computed
            if n == 0:
                continue
            k, v = rand(n), rand(n)
            slots = torch.as_tensor(m.slot_mapping(s, info.num_computed, info.length), device="cuda").long()
            kc.view(-1, H_kv, D)[slots] = k
            vc.view(-1, H_kv, D)[slots] = v
            hk, hv = hist.get(s, (k[:0], v[:0]))
            hist[s] = (torch.cat([hk, k]), torch.cat([hv, v]))

    parent, _ = m.create(num_tokens=2 * block_size + 3)
    step([parent])
    kids = [m.fork(parent), m.fork(parent)]
    for c in kids:
        hist[c] = hist[parent]
    assert m.block_ids(kids[0]).tolist() == m.block_ids(parent).tolist()  # shared before divergence
    m.append(parent, num_tokens=2)                # parent and kid 0 diverge inside the shared last block
    m.append(kids[0], num_tokens=block_size + 1)  # (copy-on-write), kid 1 keeps sharing
    step([parent, kids[0]])
    assert m.block_ids(kids[1]).tolist()[:2] == m.block_ids(parent).tolist()[:2]  # full blocks still shared
    assert m.block_ids(kids[0]).tolist()[2] != m.block_ids(parent).tolist()[2]   # the diverged block copied

    ids = [parent] + kids
    m.append_batch(ids, num_tokens=1)  # the decode step: one new token each
    m.step()
    rows = torch.as_tensor([m.sequence_info(s).row for s in ids], device="cuda").long()
    block_table, seqlens = m.block_table[rows], m.seqlens[rows]  # (indexing copies)
    assert seqlens.tolist() == [hist[s][0].shape[0] + 1 for s in ids]
    k_new, v_new = rand(len(ids)).unsqueeze(1), rand(len(ids)).unsqueeze(1)  # [B, 1, H_kv, D]
    flashkit.append_kv(kc, vc, k_new, v_new, block_table, seqlens)
    for i, s in enumerate(ids):
        hist[s] = (torch.cat([hist[s][0], k_new[i]]), torch.cat([hist[s][1], v_new[i]]))
    q = torch.randn(len(ids), 1, H_q, D, generator=g, device="cuda").to(torch.bfloat16)
    out = flashkit.decode(q, kc, vc, block_table, seqlens)
    torch.cuda.synchronize()
    assert flashkit.device_errors(clear=True) == 0
    assert not torch.isnan(out).any()
    for i, s in enumerate(ids):
        k, v = hist[s]
        ref, _ = attention_reference(q[i:i + 1].double().cpu().numpy(), k[None].double().cpu().numpy(),
                                     v[None].double().cpu().numpy(), causal=True)
        pt = attention_pytorch(q[i:i + 1], k[None], v[None], causal=True)
        res = check_close(out[i:i + 1], torch.as_tensor(ref, device="cuda"), pt)
        assert res.ok, f"sequence {s}: {res.message}"
