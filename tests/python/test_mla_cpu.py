"""CPU tests of the MLA decode: the scheduler's CPU mirror (against its invariants, on
random length mixes), the float64 reference (against a naive loop), and the argument
checks of ``flashkit._C.mla_decode`` / ``mla_metadata`` with fake CUDA descriptors (no GPU).
"""

import math
import random
import re

import numpy as np
import pytest

try:
    from flashkit.testing import (check_mla_schedule, fake_dlpack, mla_reference,
                                  mla_schedule_reference)
except ImportError as e:
    pytest.skip(f"flashkit does not import: {e}", allow_module_level=True)

F = fake_dlpack.FakeCudaArray


def length_mixes(seed, n_cases=60):
    rng = random.Random(seed)
    for _ in range(n_cases):
        B = rng.choice([1, 2, 3, 7, 64, 129, 1000])
        kind = rng.choice(["uniform", "zeros", "huge", "tiny", "normal"])
        if kind == "uniform":
            lens = [rng.randint(0, 20000) for _ in range(B)]
        elif kind == "zeros":
            lens = [rng.choice([0, 0, 1, 63, 64, 65, 5000]) for _ in range(B)]
        elif kind == "huge":
            lens = [rng.randint(0, 100) for _ in range(B)]
            lens[rng.randrange(B)] = 1 << 20
        elif kind == "tiny":
            lens = [rng.randint(-3, 70) for _ in range(B)]
        else:
            lens = [max(0, int(rng.gauss(4096, 1024))) for _ in range(B)]
        yield lens, rng.choice([1, 2, 3, 16, 33, 132, 264])


@pytest.mark.parametrize("seed", range(4))
def test_schedule_mirror_invariants(seed):
    for lens, parts in length_mixes(seed):
        sched, splits = mla_schedule_reference(lens, parts)
        assert len(sched) == parts
        check_mla_schedule(lens, sched, splits)


@pytest.mark.parametrize("lens", [[0], [1], [64], [65], [0, 0, 0], [1 << 20], [0, 5, 0, 1 << 16, 0],
                                  [16384] * 128, [-5, 100, -1]])
@pytest.mark.parametrize("parts", [1, 2, 16, 132])
def test_schedule_mirror_cases(lens, parts):
    sched, splits = mla_schedule_reference(lens, parts)
    check_mla_schedule(lens, sched, splits)
    nonempty = [b for b, n in enumerate(lens) if n > 0]
    for b, n in enumerate(lens):
        if n <= 0:
            assert splits[b + 1] == splits[b]
    if not nonempty:
        assert all(row[0] == len(lens) for row in sched)


def test_schedule_balance():
    # One long sequence over 16 parts: payload ceil(261 / 16) + 5 = 22, so 15 pieces of 17
    # blocks (22 minus the overhead) and the last part takes the one block left.
    sched, splits = mla_schedule_reference([16384], 16)
    sizes = [row[3] - row[1] for row in sched if row[0] == 0]
    assert splits == [0, 16] and sum(sizes) == 256, sizes
    assert sizes == [17] * 15 + [1], sizes
    # A batch of equal sequences over as many parts: one piece each, no splitting.
    sched, splits = mla_schedule_reference([4096] * 132, 132)
    assert splits[-1] == 132
    # ... and over a few more parts than sequences (FlashMLA's b = 128 on 132 SMs): still
    # one piece each (the payload's + overhead keeps them whole), the last parts idle.
    sched, splits = mla_schedule_reference([4096] * 128, 132)
    assert splits[-1] == 128 and all(row[0] == 128 for row in sched[128:])
    # Longer equal sequences are cut, each part carrying at most payload - overhead blocks.
    sched, splits = mla_schedule_reference([16384] * 128, 132)
    payload = -(-128 * 261 // 132) + 5
    for row in sched:
        if row[0] < 128 and row[0] == row[2]:
            assert row[3] - row[1] <= payload - 5


def test_schedule_checker_catches_mistakes():
    lens = [1000, 0, 3000]
    sched, splits = mla_schedule_reference(lens, 8)
    check_mla_schedule(lens, sched, splits)
    bad = [row[:] for row in sched]
    for row in bad:
        if row[0] < len(lens) and row[1] > 0:
            row[1] -= 1  # overlaps the previous piece
            break
    with pytest.raises(AssertionError):
        check_mla_schedule(lens, bad, splits)
    with pytest.raises(AssertionError):
        check_mla_schedule(lens, sched, splits[:-1] + [splits[-1] + 1])


def naive_mla(q, kv, bt, lens, causal, scale):
    B, s_q, h_q, _ = q.shape
    page, h_kv = kv.shape[1], kv.shape[2]
    ratio = h_q // h_kv
    out = np.zeros((B, s_q, h_q, 512))
    lse = np.full((B, h_q, s_q), np.inf)
    for b in range(B):
        n = lens[b]
        for t in range(s_q):
            lim = n - (s_q - 1 - t) if causal else n
            for h in range(h_q):
                keys = [kv[bt[b][j // page], j % page, h // ratio].astype(np.float64) for j in range(max(lim, 0))]
                if not keys:
                    continue
                K = np.stack(keys)
                s = K @ q[b, t, h].astype(np.float64) * scale
                m = s.max()
                p = np.exp(s - m)
                out[b, t, h] = (p[:, None] * K[:, :512]).sum(0) / p.sum()
                lse[b, h, t] = m + math.log(p.sum())
    return out, lse


@pytest.mark.parametrize("causal", [False, True])
def test_reference_against_naive(causal):
    rng = np.random.default_rng(1)
    B, s_q, h_q, h_kv, page = 3, 3, 4, 2, 4
    lens = [0, 2, 9]
    q = rng.standard_normal((B, s_q, h_q, 576))
    kv = rng.standard_normal((8, page, h_kv, 576))
    bt = np.array([[5, 6, 7], [1, 0, 2], [3, 4, 0]], dtype=np.int32)
    scale = 0.05
    out, lse = mla_reference(q, kv, bt, np.array(lens, dtype=np.int32), causal, scale)
    out_n, lse_n = naive_mla(q, kv, bt, lens, causal, scale)
    np.testing.assert_allclose(out, out_n, rtol=1e-10, atol=1e-12)
    assert np.array_equal(np.isposinf(lse), np.isposinf(lse_n))
    fin = np.isfinite(lse_n)
    np.testing.assert_allclose(lse[fin], lse_n[fin], rtol=1e-10)
    assert np.isposinf(lse[0]).all() and (out[0] == 0).all()  # empty sequence: out 0, lse +inf


# ---------------------------------------------------------------------------------------
# Argument checks with fake CUDA descriptors (the extension is needed, no GPU)
# ---------------------------------------------------------------------------------------


def names(arg):
    return re.compile(r"(?<![\w])" + re.escape(arg) + r"(?![\w])")


def mla_args(B=2, s_q=1, h_q=16, h_kv=1, d=576, dv=512, page=64, pages=10, max_pages=4,
             parts=8, dtype="bfloat16", **over):
    a = dict(
        q=F((B, s_q, h_q, d), dtype),
        kv_cache=F((pages, page, h_kv, d), dtype),
        block_table=F((B, max_pages), "int32"),
        seqlens_k=F((B,), "int32"),
        tile_scheduler_metadata=F((parts, 8), "int32"),
        num_splits=F((B + 1,), "int32"),
        out=F((B, s_q, h_q, dv), dtype),
        lse=F((B, h_q, s_q), "float32"),
        workspace=F(((B + parts) * h_q * s_q * 513 * 4 + 512,), "uint8"),
        head_dim_v=dv,
    )
    a.update(over)
    return a


def validate(C, a):
    C.mla_decode(a["q"], a["kv_cache"], a["block_table"], a["seqlens_k"],
                 a["tile_scheduler_metadata"], a["num_splits"], a["out"], a["lse"],
                 a["workspace"], a["head_dim_v"], 0.0, False, True)


def test_valid_args_pass(flashkit_ext):
    validate(flashkit_ext._C, mla_args())
    validate(flashkit_ext._C, mla_args(B=3, s_q=4, h_q=128, h_kv=1, page=1))
    validate(flashkit_ext._C, mla_args(h_q=24, h_kv=2, s_q=3, dtype="float16", page=48))


@pytest.mark.parametrize("over, arg, what", [
    (dict(q=F((2, 1, 16, 128), "bfloat16")), "q", "576"),
    (dict(kv_cache=F((10, 64, 1, 512), "bfloat16")), "kv_cache", "576"),
    (dict(head_dim_v=576), "head_dim_v", "512"),
    (dict(q=F((2, 5, 16, 576), "bfloat16"), out=F((2, 5, 16, 512), "bfloat16"),
          lse=F((2, 16, 5), "float32")), "q", "s_q"),
    (dict(kv_cache=F((10, 64, 3, 576), "bfloat16")), "h_kv", "multiple"),
    (dict(q=F((2, 1, 16, 576), "float32")), "q", "float16 or bfloat16"),
    (dict(kv_cache=F((10, 64, 1, 576), "float16")), "kv_cache", "bfloat16"),
    (dict(block_table=F((2, 4), "int64")), "block_table", "int32"),
    (dict(seqlens_k=F((2,), "int64")), "seqlens_k", "int32"),
    (dict(lse=F((2, 16, 1), "bfloat16")), "lse", "float32"),
    (dict(tile_scheduler_metadata=F((8, 4), "int32")), "tile_scheduler_metadata", r"\[num_parts, 8\]"),
    (dict(num_splits=F((2,), "int32")), "num_splits", "B \\+ 1"),
    (dict(workspace=F((100,), "uint8")), "workspace", "mla_workspace_size"),
    (dict(out=F((2, 1, 16, 576), "bfloat16")), "out", "shape"),
    (dict(block_table=F((3, 4), "int32")), "block_table", "rows"),
    (dict(q=F((2, 1, 16, 576), "bfloat16", strides=(9216, 9216, 576, 2))), "q", "contiguous"),
    (dict(q=F((2, 1, 256, 576), "bfloat16"), out=F((2, 1, 256, 512), "bfloat16"),
          lse=F((2, 256, 1), "float32")), "h_q / h_kv", "1..128"),
])
def test_misuse_named(flashkit_ext, over, arg, what):
    with pytest.raises(ValueError) as e:
        validate(flashkit_ext._C, mla_args(**over))
    msg = str(e.value)
    assert names(arg).search(msg) or arg in msg, msg
    assert re.search(what, msg), msg


def test_metadata_misuse(flashkit_ext):
    C = flashkit_ext._C
    with pytest.raises(ValueError, match="seqlens_k.*int32"):
        C.mla_metadata(F((4,), "int64"), F((8, 8), "int32"), F((5,), "int32"))
    with pytest.raises(ValueError, match="num_splits"):
        C.mla_metadata(F((4,), "int32"), F((8, 8), "int32"), F((4,), "int32"))
    with pytest.raises(ValueError, match="tile_scheduler_metadata"):
        C.mla_metadata(F((4,), "int32"), F((0, 8), "int32"), F((5,), "int32"))


def test_sizes(flashkit_ext):
    C = flashkit_ext._C
    assert C.mla_num_parts(132, 128, 1) == 66
    assert C.mla_num_parts(132, 512, 1) == 16
    assert C.mla_num_parts(132, 16, 2) == 66
    assert C.mla_num_parts(4, 512, 8) == 1
    rows, parts, B = 64, 10, 3
    need = C.mla_workspace_size(B, 1, rows, parts)
    assert need >= (B + parts) * rows * 513 * 4 and need % 256 == 0
