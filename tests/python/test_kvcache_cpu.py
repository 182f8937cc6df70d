"""CPU tests of flashkit.KVCacheManager through the native binding (no torch, no GPU).

The C++ manager itself is tested in depth by tests/cpp/test_kvcache.cpp and the fuzzer;
these tests cover the binding: argument conversion, error types and messages, the strong
guarantee seen from Python, the packed updates, statistics, and a random run whose
updates, applied to a numpy copy of the block table, must reproduce the host table.
"""

import random
import subprocess
import sys

import numpy as np
import pytest


@pytest.fixture
def fk(flashkit_ext):
    return flashkit_ext


def make(fk, num_blocks=32, block_size=4, max_batch=8, max_blocks_per_seq=8, **kw):
    return fk.KVCacheManager(num_blocks, block_size, max_batch, max_blocks_per_seq, **kw)


def test_create_append_fork_free(fk):
    m = make(fk)
    seq, cached = m.create([1, 2, 3, 4, 5, 6])
    assert cached == 0
    info = m.sequence_info(seq)
    assert (info.length, info.num_blocks, info.num_computed) == (6, 2, 0)
    m.append(seq, np.array([7], dtype=np.int64))  # any integer dtype
    m.append(seq, num_tokens=2)                    # ids unknown
    assert m.sequence_info(seq).length == 9
    blocks = m.block_ids(seq)
    assert blocks.dtype == np.int32 and len(blocks) == 3
    assert list(m.slot_mapping(seq, 3, 5)) == [blocks[0] * 4 + 3, blocks[1] * 4]
    m.take_updates()
    child = m.fork(seq)
    assert list(m.block_ids(child)) == list(blocks)
    assert all(m.block_refcount(b) == 2 for b in blocks)
    m.append(child, [9])  # copy-on-write of the shared last block
    assert m.block_ids(child)[2] != blocks[2]
    pairs, rows = fk.kvcache.unpack_updates(m.take_updates())
    assert pairs.tolist() == [[blocks[2], m.block_ids(child)[2]]]
    assert {r[0] for r in rows} == {m.sequence_info(child).row}
    m.free(seq)
    m.free(child)
    m.take_updates()
    s = m.stats()
    assert s["used_blocks"] == 0 and s["available_blocks"] == 32 and s["num_sequences"] == 0
    m.check_invariants()


def test_prefix_hits_and_stats(fk):
    m = make(fk, num_blocks=64)
    prompt = list(range(100, 114))  # 3 full blocks + 2
    a, _ = m.create(prompt)
    m.take_updates()
    b, cached = m.create(prompt)
    assert cached == 12
    assert list(m.block_ids(b))[:3] == list(m.block_ids(a))[:3]
    assert m.sequence_info(b).num_computed == 12
    s = m.stats()
    assert s["prompt_tokens"] == 28 and s["prefix_hit_tokens"] == 12
    assert s["prefix_hit_rate"] == pytest.approx(12 / 28)
    assert s["sharing_ratio"] == pytest.approx(8 / 5)  # 8 block references, 5 blocks
    assert s["internal_waste"] == pytest.approx((20 - 16) / 20)  # 3 full + 2 x 2 tokens
    assert m.blocks_needed_for_create(prompt) == 1
    m.free(a)
    m.free(b)
    assert m.stats()["cached_blocks"] == 3
    assert m.block_state(int(m.host_block_table()[0, 0])) == "cached"


def test_errors_are_clear_and_change_nothing(fk):
    m = make(fk, num_blocks=4, max_batch=2, max_blocks_per_seq=3)
    a, _ = m.create(list(range(9)))  # 3 blocks
    dead, _ = m.create([1])
    m.free(dead)

    def refused(exc, match, fn, *args, **kw):
        before = m.debug_state()
        with pytest.raises(exc, match=match):
            fn(*args, **kw)
        assert m.debug_state() == before

    refused(ValueError, "free\\(\\): sequence 2 was already freed", m.free, dead)
    refused(ValueError, "append\\(\\): sequence 2 was already freed", m.append, dead, [1])
    refused(ValueError, "fork\\(\\): sequence 77 does not exist", m.fork, 77)
    refused(ValueError, "max_blocks_per_seq", m.append, a, list(range(4)))
    refused(ValueError, "num_tokens must be >= 0", m.append, a, num_tokens=-1)
    refused(ValueError, "not within", m.slot_mapping, a, 0, 10)
    refused(fk.KVCacheExhaustedError, "pool exhausted", m.create, list(range(5)))
    m.create([5])
    refused(fk.KVCacheExhaustedError, "no free block-table row", m.fork, a)
    assert issubclass(fk.KVCacheExhaustedError, RuntimeError)
    assert fk.KVCacheExhaustedError is fk._C.KVCacheExhaustedError
    with pytest.raises(IndexError):
        m.block_state(4)


def test_token_argument_conversion(fk):
    m = make(fk)
    with pytest.raises(ValueError, match="one-dimensional"):
        m.create([[1, 2]])
    with pytest.raises(TypeError, match="integers"):
        m.create([1.5])
    with pytest.raises(ValueError, match="int32"):
        m.create([2**40])
    with pytest.raises(ValueError, match="num_tokens"):
        m.create([1, 2], num_tokens=3)
    with pytest.raises(TypeError, match="num_tokens"):
        m.create()
    seq, _ = m.create([], num_tokens=0)
    m.append(seq, np.arange(5, dtype=np.uint8))
    assert m.sequence_info(seq).length == 5
    with pytest.raises(ValueError, match="KVCacheConfig.num_blocks"):
        make(fk, num_blocks=0)


def test_append_batch_matches_single_appends(fk):
    # A decode step's appends in one call: the same state as append() one by one (forks
    # sharing partial last blocks included), ids known or not; refusals change nothing.
    one, batch = make(fk, num_blocks=64), make(fk, num_blocks=64)
    ids = []
    for p in range(3):
        prompt = list(range(10 * p, 10 * p + 5 + 2 * p))
        ids.append(one.create(prompt)[0])
        assert batch.create(prompt)[0] == ids[-1]
    one.take_updates()
    batch.take_updates()
    ids += [one.fork(ids[0]), one.fork(ids[1])]
    assert [batch.fork(ids[0]), batch.fork(ids[1])] == ids[3:]
    for step, n in enumerate([1, 1, 3, 0]):
        toks = np.arange(len(ids) * n, dtype=np.int64).reshape(len(ids), n) + 1000 * step
        for i, sid in enumerate(ids):
            one.append(sid, toks[i])
        batch.append_batch(ids, toks)
        assert batch.debug_state() == one.debug_state()
    for sid in ids:
        one.append(sid, num_tokens=2)
    batch.append_batch(np.array(ids, dtype=np.int32), num_tokens=2)  # any integer dtype
    assert batch.debug_state() == one.debug_state()
    batch.check_invariants()

    def refused(exc, match, *args, **kw):
        before = batch.debug_state()
        with pytest.raises(exc, match=match):
            batch.append_batch(*args, **kw)
        assert batch.debug_state() == before

    refused(ValueError, "appears twice \\(entries 0 and 2\\)", [ids[0], ids[1], ids[0]], num_tokens=1)
    refused(ValueError, "sequence 99 does not exist .* \\(entry 1 of 2\\)", [ids[0], 99], num_tokens=1)
    refused(ValueError, "shape \\[len\\(seq_ids\\), n\\]", ids, [[1]])
    refused(ValueError, "one-dimensional", [ids], num_tokens=1)
    refused(TypeError, "integers", [1.5], num_tokens=1)
    refused(TypeError, "num_tokens", ids)
    refused(ValueError, "num_tokens=2", ids, np.zeros((len(ids), 1), dtype=np.int32), num_tokens=2)
    batch.append_batch([], num_tokens=1)  # nothing to do
    small = make(fk, num_blocks=4)
    a, b = small.create(list(range(5)))[0], small.create([7, 8])[0]  # 2 + 1 blocks
    before = small.debug_state()
    with pytest.raises(fk.KVCacheExhaustedError, match="2 sequences need 4 new blocks"):
        small.append_batch([a, b], num_tokens=8)  # 5 -> 13 and 2 -> 10 tokens: 2 + 2 blocks
    assert small.debug_state() == before


def test_bookkeeping_step_needs_no_device(fk):
    m = make(fk)
    assert m.block_table is None and m.k_caches is None
    with pytest.raises(RuntimeError, match="no device side"):
        m.step()


def test_apply_updates_binding_checks_arguments(fk):
    C = fk._C
    C.kvcache_apply_updates(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)  # no work: no-op
    with pytest.raises(ValueError, match="updates_device"):
        C.kvcache_apply_updates(0, 2, 1, 0, 8, 2, 4, 64, 64, 0, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="block_stride_bytes"):
        C.kvcache_apply_updates(16, 2, 1, 0, 8, 2, 4, 64, 32, 0, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="row_stride"):
        C.kvcache_apply_updates(16, 5, 0, 1, 0, 0, 0, 0, 0, 32, 48, 4, 8, 4)


def test_import_does_not_need_torch(fk):
    code = ("import sys, flashkit; m = flashkit.KVCacheManager(8, 4, 2, 4); "
            "s, _ = m.create([1, 2, 3]); m.take_updates(); m.free(s); "
            "assert 'torch' not in sys.modules, 'torch was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def apply(updates, table, seqlens, fk):
    pairs, rows = fk.kvcache.unpack_updates(updates)
    assert len(set(pairs[:, 1].tolist())) == len(pairs)  # no destination twice
    assert not set(pairs[:, 0].tolist()) & set(pairs[:, 1].tolist())
    for row, seqlen, col, ids in rows:
        seqlens[row] = seqlen
        table[row, col: col + len(ids)] = ids


@pytest.mark.parametrize("seed", range(4))
def test_random_run_updates_reproduce_the_host_table(fk, seed):
    rng = random.Random(seed)
    m = make(fk, num_blocks=40, block_size=rng.choice([1, 3, 4, 16]), max_batch=6,
             max_blocks_per_seq=10)
    table = np.zeros((6, 10), dtype=np.int32)
    seqlens = np.zeros(6, dtype=np.int32)
    live = []
    for _ in range(400):
        op = rng.random()
        try:
            if op < 0.25 or not live:
                prefix = [7] * rng.randrange(0, 12)
                sid, _ = m.create(prefix + [rng.randrange(3) for _ in range(rng.randrange(0, 8))])
                live.append(sid)
            elif op < 0.6:
                sid = rng.choice(live)
                m.append(sid, [rng.randrange(3) for _ in range(rng.choice([1, 1, 1, 5]))])
            elif op < 0.7:
                live.append(m.fork(rng.choice(live)))
            elif op < 0.8:
                sid = live.pop(rng.randrange(len(live)))
                m.free(sid)
            else:
                apply(m.take_updates(), table, seqlens, fk)
                assert (table == m.host_block_table()).all()
                assert (seqlens == m.host_seqlens()).all()
        except (fk.KVCacheExhaustedError, ValueError) as e:
            assert "nothing was changed" in str(e)
        m.check_invariants()
    assert sorted(live) == m.live_sequences()
    apply(m.take_updates(), table, seqlens, fk)
    assert (table == m.host_block_table()).all() and (seqlens == m.host_seqlens()).all()
