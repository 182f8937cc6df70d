"""GPU tests of the paged decode (flashkit.decode / DecodePlan / append_kv).

Every case: random inputs (never zeros), a randomly permuted block table, NaN written into
every cache slot that no sequence uses (and past every length), outputs poisoned with NaN;
out checked with the SPEC §3 rule against a float64 reference on a contiguous gather of the
cache (PyTorch's SDPA in the same dtype as the baseline), lse against the reference, and
the device error word clear afterwards. Plus: lengths 0 / 1 / page_size +- 1 / mixed, a 1M
token sequence, s_q up to 16 (causal and not), GQA 1..16, every page size of the issue, NHD
and HND layouts, fixed split sizes (bitwise batch invariance), determinism, CUDA-graph
replay with new lengths and block tables, torch.compile, out-of-range block ids and
lengths (error bit, never a fault), append_kv.

Run: ``pytest -m gpu tests/python/test_decode_gpu.py``.
"""

import math
import zlib

import pytest

torch = pytest.importorskip("torch")

try:
    import flashkit
    from flashkit.testing import (check_close, check_lse, decode_pytorch, decode_reference,
                                  poison_)
except ImportError as e:
    pytest.skip(f"flashkit does not import: {e}", allow_module_level=True)

pytestmark = pytest.mark.gpu

DT = {"bf16": torch.bfloat16, "fp16": torch.float16}


@pytest.fixture(autouse=True)
def _poisoned_allocated_outputs(monkeypatch):
    """flashkit.decode and DecodePlan.run (without out=) allocate out / lse with torch.empty:
    fill them with NaN before the kernels run, so an element the kernels leave unwritten fails
    the checks instead of passing on stale memory (e.g. zeros for an empty sequence)."""
    from flashkit import _torch_decode_ops as ops

    alloc_o, alloc_out = ops._alloc_o, ops._alloc_out  # alloc_out takes o from ops._alloc_o

    def alloc_out_poisoned(q, v_cache, return_lse):
        o, lse = alloc_out(q, v_cache, return_lse)
        return o, poison_(lse)

    monkeypatch.setattr(ops, "_alloc_o", lambda q, v_cache: poison_(alloc_o(q, v_cache)))
    monkeypatch.setattr(ops, "_alloc_out", alloc_out_poisoned)
    flashkit.device_errors(clear=True)  # (tests that read the error word read only their own calls' bits)


def _gen(seed):
    g = torch.Generator(device="cuda")
    g.manual_seed(zlib.crc32(repr(seed).encode()))
    return g


def make_case(lens, s_q=1, h_q=8, h_kv=2, d=128, page=16, dtype=torch.bfloat16, hnd=False,
              extra_pages=3, seed=0, fill=float("nan")):
    """q, caches (unused slots = `fill`), permuted block table, seqlens."""
    g = _gen(("case", tuple(lens), s_q, h_q, h_kv, d, page, str(dtype), hnd, seed))
    B = len(lens)
    pages_per = [max(1, math.ceil(n / page)) for n in lens]
    max_pages = max(pages_per) + 1
    num_pages = sum(pages_per) + extra_pages
    if hnd:  # physical [P, H, page, D] viewed as [P, page, H, D]
        k_cache = torch.full((num_pages, h_kv, page, d), fill, dtype=dtype, device="cuda").transpose(1, 2)
        v_cache = torch.full((num_pages, h_kv, page, d), fill, dtype=dtype, device="cuda").transpose(1, 2)
    else:
        k_cache = torch.full((num_pages, page, h_kv, d), fill, dtype=dtype, device="cuda")
        v_cache = torch.full((num_pages, page, h_kv, d), fill, dtype=dtype, device="cuda")
    perm = torch.randperm(num_pages, generator=g, device="cuda").int()
    block_table = torch.full((B, max_pages), -7, dtype=torch.int32, device="cuda")  # junk past the end
    i = 0
    for b, n in enumerate(lens):
        block_table[b, :pages_per[b]] = perm[i:i + pages_per[b]]
        i += pages_per[b]
        if n:
            pos = torch.arange(n, device="cuda")
            pg = block_table[b].long()[pos // page]
            k_cache[pg, pos % page] = torch.randn((n, h_kv, d), generator=g, device="cuda").to(dtype)
            v_cache[pg, pos % page] = torch.randn((n, h_kv, d), generator=g, device="cuda").to(dtype)
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    q = torch.randn((B, s_q, h_q, d), generator=g, device="cuda").to(dtype)
    return q, k_cache, v_cache, block_table, seqlens


def run_checked(q, k_cache, v_cache, block_table, seqlens, causal=True, split_size=0, scale=None,
                expect_errors=0):
    flashkit.device_errors(clear=True)
    B, s_q, h_q, _ = q.shape
    out = poison_(torch.empty((B, s_q, h_q, v_cache.shape[3]), dtype=q.dtype, device="cuda"))
    lse = poison_(torch.empty((B, h_q, s_q), dtype=torch.float32, device="cuda"))
    plan = flashkit.DecodePlan(B, s_q, h_q, k_cache.shape[2], q.shape[3], device="cuda",
                               split_size=split_size,
                               max_seqlen_k=block_table.shape[1] * k_cache.shape[1] if split_size else 0)
    plan.plan(seqlens)
    flashkit._C.decode_run(q, k_cache, v_cache, block_table, seqlens, out, lse, plan.workspace,
                           scale or 0.0, causal, split_size, plan.max_seqlen_k, False, False,
                           torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    assert flashkit.device_errors(clear=True) == expect_errors
    return out, lse


def check(q, k_cache, v_cache, block_table, seqlens, out, lse, causal=True, scale=None):
    ref, lse_ref = decode_reference(q, k_cache, v_cache, block_table, seqlens, causal, scale)
    pt = decode_pytorch(q, k_cache, v_cache, block_table, seqlens, causal, scale)
    res = check_close(out, ref, pt)
    assert res.ok, res.message
    res = check_lse(lse, lse_ref)
    assert res.ok, res.message


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("heads", [(8, 8), (8, 2), (32, 8), (16, 1)])
def test_accuracy_dtypes_dims_gqa(dtype, d, heads):
    h_q, h_kv = heads
    case = make_case([1, 17, 300, 1000], h_q=h_q, h_kv=h_kv, d=d, dtype=DT[dtype], seed=1)
    out, lse = run_checked(*case)
    check(*case, out, lse)


@pytest.mark.parametrize("heads,s_q", [((32, 8), 1), ((8, 8), 2)])
def test_batch_of_1024(heads, s_q):
    """B = 1024, the issue's largest batch: short lengths 0..300 (some empty), so the balanced
    plan makes about one item per (sequence, head-row) and the split kernel's grid is the whole
    batch; every output row against the reference."""
    h_q, h_kv = heads
    lens = [(b * 37) % 301 for b in range(1024)]
    case = make_case(lens, s_q=s_q, h_q=h_q, h_kv=h_kv, seed=1024)
    out, lse = run_checked(*case)
    check(*case, out, lse)


@pytest.mark.parametrize("page", [1, 8, 16, 32, 48, 64, 128, 256])
def test_page_sizes(page):
    case = make_case([0, 1, page - 1 if page > 1 else 2, page, page + 1, 777, 2049], page=page,
                     h_q=16, h_kv=4, seed=page)
    out, lse = run_checked(*case)
    check(*case, out, lse)


@pytest.mark.parametrize("s_q", [1, 2, 3, 4, 7, 16])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("heads", [(4, 4), (32, 8), (64, 8), (16, 1)])
def test_multi_token_queries(s_q, causal, heads):
    h_q, h_kv = heads
    case = make_case([s_q, s_q + 5, 130, 1500], s_q=s_q, h_q=h_q, h_kv=h_kv, seed=(s_q, causal))
    out, lse = run_checked(*case, causal=causal)
    check(*case, out, lse, causal=causal)


def test_fewer_cached_tokens_than_queries():
    # len < s_q: the first query tokens see no key (out 0, lse -inf).
    case = make_case([2, 0, 5], s_q=4, h_q=8, h_kv=2, seed=3)
    out, lse = run_checked(*case)
    check(*case, out, lse)
    assert torch.isneginf(lse[0, :, :2]).all() and (out[0, :2] == 0).all()


@pytest.mark.parametrize("hnd", [False, True])
def test_layouts_and_scale(hnd):
    case = make_case([5, 64, 65, 4000], h_q=8, h_kv=4, page=32, hnd=hnd, seed=hnd)
    out, lse = run_checked(*case, scale=0.05)
    check(*case, out, lse, scale=0.05)


def test_mixed_batch_and_inf_in_unused_slots():
    lens = [0, 3, 9000, 1, 15, 16, 17, 20000, 64, 2]
    case = make_case(lens, h_q=32, h_kv=8, fill=float("inf"), seed=5)
    out, lse = run_checked(*case)
    check(*case, out, lse)


def test_million_token_sequence():
    case = make_case([1 << 20], h_q=8, h_kv=1, d=128, page=256, seed=6)
    out, lse = run_checked(*case)
    check(*case, out, lse)


@pytest.mark.parametrize("split", [64, 256, 1024])
@pytest.mark.parametrize("heads,s_q", [((16, 4), 1), ((64, 8), 4)])
def test_batch_invariance_fixed_split(split, heads, s_q):
    # (64, 8) x s_q 4: 32 rows per KV head, where a balanced plan of a tiny grid (one sequence here)
    # would take 16-row items; with a fixed split size the rows must not depend on the batch.
    lens = [3000, 17, 700, 5000]
    h_q, h_kv = heads
    q, k, v, bt, sl = make_case(lens, s_q=s_q, h_q=h_q, h_kv=h_kv, seed=7)
    out_all, lse_all = run_checked(q, k, v, bt, sl, split_size=split)
    check(q, k, v, bt, sl, out_all, lse_all)
    for b in range(len(lens)):
        o1, l1 = run_checked(q[b:b + 1], k, v, bt[b:b + 1], sl[b:b + 1], split_size=split)
        assert torch.equal(o1, out_all[b:b + 1]), f"sequence {b}: output depends on the batch"
        assert torch.equal(l1, lse_all[b:b + 1])


@pytest.mark.parametrize("heads,s_q", [((3, 1), 1), ((12, 1), 1), ((16, 1), 1), ((8, 1), 4), ((32, 8), 1),
                                       ((64, 8), 4)])
def test_combine_many_splits(heads, s_q):
    # 64-token splits of a 20k-token sequence: ~313 partials per (sequence, head-row group),
    # more than one staged batch of LSEs and of partial O at 3, 12, 16 and 32 valid rows (a fixed
    # split size: 32-row items at GQA 8 x s_q 4 whatever the batch).
    h_q, h_kv = heads
    case = make_case([20000, 640, 1], s_q=s_q, h_q=h_q, h_kv=h_kv, seed=(h_q, s_q))
    out, lse = run_checked(*case, split_size=64)
    check(*case, out, lse)


@pytest.mark.parametrize("lens,s_q,heads,kind", [([4096], 4, (32, 8), None), ([4096], 8, (32, 2), None),
                                                  ([4000, 0, 90], 2, (64, 8), None), ([8192], 4, (32, 8), "fp8"),
                                                  ([4096], 8, (32, 8), "int8")])
def test_split_cap_of_short_calls_with_many_rows(lens, s_q, heads, kind):
    # Short balanced calls whose items hold >= 16 rows cap their splits per sequence (plan_math.h
    # split_cap: at most min(512 / rows, target / (2 h_kv))): a sequence's splits are fewer and longer
    # than the balanced target's, and must still cover it exactly (poisoned outputs, NaN past the ends).
    h_q, h_kv = heads
    q, k, v, bt, sl = make_case(lens, s_q=s_q, h_q=h_q, h_kv=h_kv, seed=("cap", s_q, h_q, kind))
    if kind is None:
        out, lse = run_checked(q, k, v, bt, sl)
        check(q, k, v, bt, sl, out, lse)
        return
    check_quantized(q, k, v, bt, sl, kind)


def test_deterministic():
    case = make_case([5000, 12000, 3, 800], h_q=32, h_kv=8, seed=8)
    o1, l1 = run_checked(*case)
    o2, l2 = run_checked(*case)
    assert torch.equal(o1, o2) and torch.equal(l1, l2)


def test_one_call_and_lse_optional():
    q, k, v, bt, sl = make_case([100, 3000], h_q=8, h_kv=2, seed=9)
    out = flashkit.decode(q, k, v, bt, sl)
    out2, lse = flashkit.decode(q, k, v, bt, sl, return_lse=True)
    assert torch.equal(out, out2)
    check(q, k, v, bt, sl, out, lse)


# Self-planned split CTAs (kernels/decode/self_plan.cuh: Hopper, one-call form, B <= 32): each split
# CTA computes its item from seqlens_k instead of waiting for the plan kernel. The items must be the
# plan kernel's exactly: outputs bitwise equal to FLASHKIT_DECODE_SELF_PLAN=0, and with =verify
# every self-planned CTA compares its item and the item count with the plan kernel's (error bit on
# a difference). Cases: one tile, many splits (combine kernel), 2-4 splits (fused merge), empty
# sequences, the split cap (s_q 4), many head-row groups, a full warp of sequences (32) and one more
# (33: not self-planned), D 64 / 256, a fixed split size, the 8-bit caches.
_LENS32 = [(i * 977 + 13) % 3100 for i in range(32)]
SELF_PLAN_CASES = [
    ([1], 1, (8, 2), 128, 0, None),
    ([0, 0], 1, (8, 2), 128, 0, None),
    ([65], 1, (32, 8), 128, 0, None),
    ([300], 1, (32, 8), 128, 0, None),
    ([20000], 1, (32, 8), 128, 0, None),
    ([5000, 12000, 3, 800], 2, (16, 4), 128, 0, None),
    ([4096], 4, (32, 8), 128, 0, None),
    ([4096, 1000], 4, (64, 2), 128, 0, None),
    (_LENS32, 1, (32, 8), 128, 0, None),
    (_LENS32 + [2222], 1, (8, 2), 128, 0, None),
    ([3000, 1, 0, 700], 1, (16, 4), 64, 0, None),
    ([3000, 2500], 1, (8, 1), 256, 0, None),
    ([5000, 100, 2049], 1, (16, 4), 128, 256, None),
    ([9000, 0, 300], 1, (32, 8), 128, 0, "fp8"),
    ([9000, 77], 2, (32, 8), 128, 0, "int8"),
]


@pytest.mark.parametrize("lens,s_q,heads,d,split,kind", SELF_PLAN_CASES)
def test_self_planned_split_ctas_match_the_plan(monkeypatch, lens, s_q, heads, d, split, kind):
    h_q, h_kv = heads
    q, k, v, bt, sl = make_case(lens, s_q=s_q, h_q=h_q, h_kv=h_kv, d=d, seed=("self-plan", len(lens), s_q, d, kind))
    extra = {}
    if kind is not None:
        k, v, ks, vs = quantize_case(q, k, v, bt, sl, kind)
        extra = dict(k_scale=ks, v_scale=vs)
    if split:
        extra.update(split_size=split, max_seqlen_k=bt.shape[1] * k.shape[1])

    def one_call(mode):
        if mode is None:
            monkeypatch.delenv("FLASHKIT_DECODE_SELF_PLAN", raising=False)
        else:
            monkeypatch.setenv("FLASHKIT_DECODE_SELF_PLAN", mode)
        flashkit.device_errors(clear=True)
        out, lse = flashkit.decode(q, k, v, bt, sl, return_lse=True, **extra)
        torch.cuda.synchronize()
        assert flashkit.device_errors(clear=True) == 0, mode
        return out, lse

    out, lse = one_call(None)
    for mode in ("0", "verify"):
        o, l = one_call(mode)
        assert torch.equal(o, out) and torch.equal(l, lse), mode
    if kind is None:
        check(q, k, v, bt, sl, out, lse)
    else:
        kf = torch.nan_to_num(dequantized(k, extra["k_scale"]))
        vf = torch.nan_to_num(dequantized(v, extra["v_scale"]))
        ref, lse_ref = decode_reference(q.float(), kf, vf, bt, sl)
        res = check_close(out, ref, decode_pytorch(q, kf.to(q.dtype), vf.to(q.dtype), bt, sl))
        assert res.ok, res.message
        res = check_lse(lse, lse_ref)
        assert res.ok, res.message


def test_self_planned_out_of_range_lengths(monkeypatch):
    # Lengths outside [0, capacity] in the one-call form: the self-planned CTAs plan with the plan
    # kernel's lengths (only negative ones clamped there; the split kernel clamps to the table) and
    # must agree with it (verify mode would add kDecodeErrPlan); the error bits are the plan's (8) and
    # the junk block ids the clamped length reaches (4), the outputs bitwise those of the switch off.
    q, k, v, bt, sl = make_case([200, 500], h_q=8, h_kv=2, page=16, seed=("self-plan-bad",), fill=0.25)
    bad = torch.tensor([-3, 10 ** 9], dtype=torch.int32, device="cuda")
    res = []
    for mode in (None, "0", "verify"):
        if mode is None:
            monkeypatch.delenv("FLASHKIT_DECODE_SELF_PLAN", raising=False)
        else:
            monkeypatch.setenv("FLASHKIT_DECODE_SELF_PLAN", mode)
        flashkit.device_errors(clear=True)
        out, lse = flashkit.decode(q, k, v, bt, bad, causal=False, return_lse=True)
        torch.cuda.synchronize()
        assert flashkit.device_errors(clear=True) == 8 | 4, mode
        res.append((out, lse))
    for o, l in res[1:]:
        assert torch.equal(o, res[0][0]) and torch.equal(l, res[0][1])
    assert (res[0][0][0] == 0).all() and torch.isneginf(res[0][1][0]).all()


def test_self_planned_one_call_in_cuda_graph_with_new_lengths(monkeypatch):
    # The one-call form captured once and replayed with new lengths: the self-planned CTAs read
    # seqlens_k at replay time (verify mode: their items are the plan kernel's at every replay).
    monkeypatch.setenv("FLASHKIT_DECODE_SELF_PLAN", "verify")
    B, h_q, h_kv = 3, 32, 8
    q, k, v, bt, sl = make_case([6000, 6000, 6000], h_q=h_q, h_kv=h_kv, seed=("self-plan-graph",))
    sl_buf = sl.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        flashkit.decode(q, k, v, bt, sl_buf, return_lse=True)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = flashkit.decode(q, k, v, bt, sl_buf, return_lse=True)
    flashkit.device_errors(clear=True)
    for lens in ([6000, 1, 0], [3, 5999, 700], [0, 0, 64], [6000, 6000, 6000]):
        sl_buf.copy_(torch.tensor(lens, dtype=torch.int32))
        poison_(out), poison_(lse)
        graph.replay()
        torch.cuda.synchronize()
        assert flashkit.device_errors(clear=True) == 0, lens
        check(q, k, v, bt, sl_buf, out, lse)


def test_cuda_graph_replay_with_new_lengths_and_tables():
    B, h_q, h_kv, d, page = 4, 16, 4, 128, 16
    q, k, v, bt, sl = make_case([4000, 4000, 4000, 4000], h_q=h_q, h_kv=h_kv, d=d, page=page, seed=10)
    plan = flashkit.DecodePlan(B, 1, h_q, h_kv, d, device="cuda")
    sl_buf, bt_buf, q_buf = sl.clone(), bt.clone(), q.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):  # warm-up outside capture
            plan.plan(sl_buf)
            plan.run(q_buf, k, v, bt_buf, sl_buf)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.plan(sl_buf)
        out_g, lse_g = plan.run(q_buf, k, v, bt_buf, sl_buf, return_lse=True)
    for step, lens in enumerate([[4000, 1, 0, 3999], [17, 2500, 4000, 64], [4000, 4000, 4000, 4000]]):
        sl_buf.copy_(torch.tensor(lens, dtype=torch.int32))
        perm = torch.randperm(B, generator=_gen(("perm", step)), device="cuda")
        bt_buf.copy_(bt[perm])  # other sequences' pages: a new block table
        q_buf.copy_(torch.randn(q.shape, generator=_gen(("q", step)), device="cuda").to(q.dtype))
        poison_(out_g), poison_(lse_g)
        graph.replay()
        torch.cuda.synchronize()
        check(q_buf, k, v, bt_buf, sl_buf, out_g, lse_g)
    assert flashkit.device_errors() == 0


@pytest.mark.parametrize("split", [0, 512])
def test_fused_merge_over_repeated_runs(split):
    # Sequences of a few splits are merged by their last split CTA (arrival counters in the
    # workspace, reset by that CTA): one plan, several runs with new queries, each exact
    # against the reference; split 512 mixes fused (n = 3, 4) and combine-kernel sequences (n = 5,
    # 6, 10, 40: the fused merge takes at most 4 splits, api/decode.cpp kFusedMaxSplits).
    lens = [3000, 5000, 200, 1100, 20000, 2048, 2049]
    q, k, v, bt, sl = make_case(lens, h_q=16, h_kv=4, seed=12)
    B = len(lens)
    plan = flashkit.DecodePlan(B, 1, 16, 4, 128, device="cuda", split_size=split,
                               max_seqlen_k=bt.shape[1] * k.shape[1] if split else 0)
    plan.plan(sl)
    for step in range(3):
        q = torch.randn(q.shape, generator=_gen(("fused", split, step)), device="cuda").to(q.dtype)
        out, lse = plan.run(q, k, v, bt, sl, return_lse=True)
        torch.cuda.synchronize()
        check(q, k, v, bt, sl, out, lse)
    assert flashkit.device_errors() == 0


def test_run_into_caller_buffers():
    # DecodePlan.run(out=, lse=): written in place and returned, bitwise equal to the
    # allocating call; a strided out (a slice of a larger buffer) leaves the rest untouched;
    # the dispatcher path (under a TorchDispatchMode the direct path is not taken) and
    # torch.compile(fullgraph) write the same bits; wrong shapes / dtypes / devices raise
    # before anything is written.
    from torch.utils._python_dispatch import TorchDispatchMode

    lens = [3000, 1, 0, 700]
    q, k, v, bt, sl = make_case(lens, h_q=16, h_kv=4, seed=21)
    B, h_q = len(lens), 16
    plan = flashkit.DecodePlan(B, 1, h_q, 4, 128, device="cuda")
    plan.plan(sl)
    ref_out, ref_lse = plan.run(q, k, v, bt, sl, return_lse=True)
    check(q, k, v, bt, sl, ref_out, ref_lse)
    assert torch.equal(plan.run(q, k, v, bt, sl), ref_out)

    out = poison_(torch.empty_like(ref_out))
    lse = poison_(torch.empty_like(ref_lse))
    got = plan.run(q, k, v, bt, sl, out=out)
    assert got is out and torch.equal(out, ref_out)
    poison_(out)
    got_out, got_lse = plan.run(q, k, v, bt, sl, return_lse=True, out=out, lse=lse)
    assert got_out is out and got_lse is lse
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)
    poison_(lse)
    got_out, got_lse = plan.run(q, k, v, bt, sl, return_lse=True, lse=lse)  # out allocated
    assert got_lse is lse and torch.equal(lse, ref_lse) and torch.equal(got_out, ref_out)

    big = poison_(torch.empty((B, 1, 2 * h_q, 128), dtype=q.dtype, device="cuda"))
    before = big.clone()
    strided = big[:, :, 1::2]  # every other head: non-contiguous, last dim contiguous
    plan.run(q, k, v, bt, sl, out=strided)
    assert torch.equal(strided, ref_out)
    assert torch.equal(big[:, :, 0::2].nan_to_num(7.0), before[:, :, 0::2].nan_to_num(7.0))

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    poison_(out), poison_(lse)
    with Passthrough():
        plan.run(q, k, v, bt, sl, return_lse=True, out=out, lse=lse)
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)

    @torch.compile(fullgraph=True)
    def step(q, out, lse):
        return plan.run(q * 1.0, k, v, bt, sl, return_lse=True, out=out, lse=lse)

    poison_(out), poison_(lse)
    step(q, out, lse)
    torch.cuda.synchronize()
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)

    poison_(out)
    keep = out.clone()
    with pytest.raises(ValueError, match="out"):
        plan.run(q, k, v, bt, sl, out=out[:, :, :8])
    with pytest.raises(ValueError, match="out"):
        plan.run(q, k, v, bt, sl, out=out.float())
    with pytest.raises(ValueError, match="lse"):
        plan.run(q, k, v, bt, sl, return_lse=True, out=out, lse=lse[:, :4])
    with pytest.raises(ValueError, match="return_lse"):
        plan.run(q, k, v, bt, sl, out=out, lse=lse)
    with pytest.raises(TypeError, match="out"):
        plan.run(q, k, v, bt, sl, out=out.float().cpu().numpy())
    with pytest.raises(ValueError):
        plan.run(q, k, v, bt, sl, out=out.cpu())
    torch.cuda.synchronize()
    assert torch.equal(out.nan_to_num(7.0), keep.nan_to_num(7.0))


def test_run_into_buffers_in_cuda_graph():
    # A captured step that writes the caller's buffers: replays with new lengths land in them.
    B, h_q, h_kv = 2, 8, 2
    q, k, v, bt, sl = make_case([2000, 2000], h_q=h_q, h_kv=h_kv, seed=22)
    plan = flashkit.DecodePlan(B, 1, h_q, h_kv, 128, device="cuda")
    out = torch.empty((B, 1, h_q, 128), dtype=q.dtype, device="cuda")
    lse = torch.empty((B, h_q, 1), dtype=torch.float32, device="cuda")
    sl_buf = sl.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        plan.plan(sl_buf)
        plan.run(q, k, v, bt, sl_buf, return_lse=True, out=out, lse=lse)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.plan(sl_buf)
        plan.run(q, k, v, bt, sl_buf, return_lse=True, out=out, lse=lse)
    for lens in ([2000, 1], [5, 1999]):
        sl_buf.copy_(torch.tensor(lens, dtype=torch.int32))
        poison_(out), poison_(lse)
        graph.replay()
        torch.cuda.synchronize()
        check(q, k, v, bt, sl_buf, out, lse)
    assert flashkit.device_errors() == 0


def test_torch_compile_fullgraph():
    q, k, v, bt, sl = make_case([300, 2000], h_q=8, h_kv=2, seed=11)

    @torch.compile(fullgraph=True)
    def step(q, k, v, bt, sl):
        return flashkit.decode(q * 1.0, k, v, bt, sl) + 0

    out = step(q, k, v, bt, sl)
    check_res = check_close(out, *[decode_reference(q, k, v, bt, sl)[0],
                                   decode_pytorch(q, k, v, bt, sl)])
    assert check_res.ok, check_res.message


def test_out_of_range_block_ids_are_skipped_and_reported():
    q, k, v, bt, sl = make_case([200, 500, 33], h_q=8, h_kv=2, page=16, seed=12)
    bad = bt.clone()
    bad[1, 3] = k.shape[0] + 100   # past the pool
    bad[1, 7] = -5                  # negative
    bad[2, 0] = 2 ** 31 - 1
    out, lse = run_checked(q, k, v, bad, sl, causal=False, expect_errors=4)
    ref, lse_ref = decode_reference(q, k, v, bad, sl, causal=False)
    pt = decode_pytorch(q, k, v, bad, sl, causal=False)
    res = check_close(out, ref, pt)
    assert res.ok, res.message
    res = check_lse(lse, lse_ref)
    assert res.ok, res.message
    assert torch.isfinite(out).all()


def test_out_of_range_lengths_are_clamped_and_reported():
    # Unused slots hold finite junk here: a length clamped to the table's capacity makes
    # the tail of the last allocated page part of the sequence.
    q, k, v, bt, sl = make_case([200, 500], h_q=8, h_kv=2, page=16, seed=13, fill=0.25)
    bad = torch.tensor([-3, 10 ** 9], dtype=torch.int32, device="cuda")
    # 8: lengths out of range; 4: the clamped length reaches junk block ids (-7)
    out, lse = run_checked(q, k, v, bt, bad, causal=False, expect_errors=8 | 4)
    assert (out[0] == 0).all() and torch.isneginf(lse[0]).all()
    ref, lse_ref = decode_reference(q, k, v, bt, bad, causal=False)  # clamps and skips the same
    res = check_close(out, ref, decode_pytorch(q, k, v, bt, bad, causal=False))
    assert res.ok, res.message
    res = check_lse(lse, lse_ref)
    assert res.ok, res.message


def test_append_kv_writes_exactly_the_new_slots():
    B, s_new, h_kv, d, page = 3, 2, 4, 128, 16
    lens = [5, 16, 40]
    # pages for the grown lengths (make_case fills them; append overwrites the new slots)
    q, k, v, bt, sl = make_case([n + s_new for n in lens], h_q=8, h_kv=h_kv, d=d, page=page,
                                seed=14)
    sl = sl - s_new
    k0, v0 = k.clone(), v.clone()
    g = _gen("append")
    k_new = torch.randn((B, s_new, h_kv, d), generator=g, device="cuda").to(k.dtype)
    v_new = torch.randn((B, s_new, h_kv, d), generator=g, device="cuda").to(k.dtype)
    new_lens = sl + s_new
    bt2 = bt.clone()
    flashkit.device_errors(clear=True)
    flashkit.append_kv(k, v, k_new, v_new, bt2, new_lens)
    torch.cuda.synchronize()
    assert flashkit.device_errors() == 0
    expect_k, expect_v = k0.clone(), v0.clone()
    for b in range(B):
        for t in range(s_new):
            pos = lens[b] + t
            pg = int(bt2[b, pos // page])
            expect_k[pg, pos % page] = k_new[b, t]
            expect_v[pg, pos % page] = v_new[b, t]
    assert torch.equal(k.nan_to_num(7.0), expect_k.nan_to_num(7.0))
    assert torch.equal(v.nan_to_num(7.0), expect_v.nan_to_num(7.0))
    # then decode over the appended cache with the new tokens as queries
    out, lse = run_checked(q, k, v, bt2, new_lens)
    check(q, k, v, bt2, new_lens, out, lse)


def test_append_kv_bad_slot_is_skipped_and_reported():
    q, k, v, bt, sl = make_case([5], h_q=8, h_kv=2, page=16, seed=15)
    k0 = k.clone()
    k_new = torch.randn((1, 1, 2, 128), device="cuda").to(k.dtype)
    bad_len = torch.tensor([10 ** 6], dtype=torch.int32, device="cuda")  # beyond the table
    flashkit.device_errors(clear=True)
    flashkit.append_kv(k, v, k_new, k_new.clone(), bt, bad_len)
    torch.cuda.synchronize()
    assert flashkit.device_errors() == 16
    assert torch.equal(k.nan_to_num(7.0), k0.nan_to_num(7.0))


def test_bad_arguments_write_nothing():
    q, k, v, bt, sl = make_case([10], h_q=8, h_kv=2, seed=16)
    bits = [x.clone().view(torch.int16) for x in (q, k, v)]  # (bit patterns: the caches hold NaN)
    with pytest.raises(ValueError, match="block_table"):
        flashkit.decode(q, k, v, bt.long(), sl)
    with pytest.raises(ValueError, match="seqlens_k"):
        flashkit.decode(q, k, v, bt, sl.float())
    with pytest.raises(ValueError, match="H_q"):
        flashkit.decode(q[:, :, :3], k, v, bt, sl)
    with pytest.raises(ValueError, match="s_q"):
        flashkit.decode(torch.randn((1, 17, 8, 128), device="cuda").to(q.dtype), k, v, bt, sl)
    with pytest.raises(ValueError, match="split_size"):
        flashkit.decode(q, k, v, bt, sl, split_size=100)
    plan = flashkit.DecodePlan(1, 1, 8, 2, 128, device="cuda")
    with pytest.raises(ValueError, match="differ from the plan"):
        plan.run(q[:, :, :4], k[:, :, :1], v[:, :, :1], bt, sl)
    # a refused call into caller buffers leaves them as they were (NaN), and no input changed
    plan.plan(sl)
    out, lse = poison_(torch.empty_like(q)), poison_(torch.empty((1, 8, 1), dtype=torch.float32, device="cuda"))
    with pytest.raises(ValueError, match="block_table"):
        plan.run(q, k, v, bt.long(), sl, return_lse=True, out=out, lse=lse)
    with pytest.raises(ValueError, match="seqlens_k"):
        plan.run(q, k, v, bt, sl.float(), return_lse=True, out=out, lse=lse)
    torch.cuda.synchronize()
    assert torch.isnan(out).all() and torch.isnan(lse).all()
    assert all(torch.equal(x.view(torch.int16), b) for x, b in zip((q, k, v), bits))
    assert flashkit.device_errors(clear=True) == 0


def test_check_mode_names_the_bad_entry():
    q, k, v, bt, sl = make_case([200, 500], h_q=8, h_kv=2, page=16, seed=17)
    bad = bt.clone()
    bad[1, 3] = k.shape[0] + 5
    with pytest.raises(ValueError, match="block_table"):
        flashkit.decode(q, k, v, bad, sl, check_inputs=True)
    with pytest.raises(ValueError, match="seqlens_k"):
        flashkit.decode(q, k, v, bt, torch.tensor([-1, 5], dtype=torch.int32, device="cuda"),
                        check_inputs=True)
    out = flashkit.decode(q, k, v, bt, sl, check_inputs=True)  # valid: runs as usual
    assert torch.equal(out, flashkit.decode(q, k, v, bt, sl))
    assert flashkit.device_errors() == 0


# --- quantized caches (int8 / fp8 e4m3, fp32 scales per token and head) -----------------

KV_DTYPES = {"int8": torch.int8, "fp8": torch.float8_e4m3fn}


def quantize_case(q, k, v, bt, sl, kind, unused=0x7F):
    """The same sequences in a quantized cache, written by append_kv one sequence at a time;
    unused slots hold `unused` bytes (0x7F is NaN in e4m3fn) and NaN scales."""
    kv = KV_DTYPES[kind]
    P, page, H, D = k.shape
    kq = torch.full((P, page, H, D), unused, dtype=torch.uint8, device="cuda").view(kv)
    vq = torch.full((P, page, H, D), unused, dtype=torch.uint8, device="cuda").view(kv)
    ks = torch.full((P, page, H), float("nan"), device="cuda")
    vs = torch.full((P, page, H), float("nan"), device="cuda")
    flashkit.device_errors(clear=True)
    for b in range(q.shape[0]):
        n = int(sl[b])
        if n == 0:
            continue
        pos = torch.arange(n, device="cuda")
        pg = bt[b].long()[pos // page]
        kn = k[pg, pos % page].unsqueeze(0).contiguous()  # [1, n, H, D]
        vn = v[pg, pos % page].unsqueeze(0).contiguous()
        flashkit.append_kv(kq, vq, kn, vn, bt[b:b + 1], sl[b:b + 1], k_scale=ks, v_scale=vs)
    torch.cuda.synchronize()
    assert flashkit.device_errors() == 0
    return kq, vq, ks, vs


def check_quantized(q, k, v, bt, sl, kind, table=None, causal=True, errors=0):
    """The case in a quantized cache (quantize_case, written through `bt`): one decode call with LSE through
    `table` (default `bt`), the device error bits `errors`, output and LSE against the reference on the
    dequantized cache (unused slots never read). Returns the output."""
    kq, vq, ks, vs = quantize_case(q, k, v, bt, sl, kind)
    table = bt if table is None else table
    flashkit.device_errors(clear=True)
    out, lse = flashkit.decode(q, kq, vq, table, sl, causal=causal, return_lse=True, k_scale=ks, v_scale=vs)
    torch.cuda.synchronize()
    assert flashkit.device_errors(clear=True) == errors
    kf = torch.nan_to_num(dequantized(kq, ks))
    vf = torch.nan_to_num(dequantized(vq, vs))
    ref, lse_ref = decode_reference(q.float(), kf, vf, table, sl, causal=causal)
    res = check_close(out, ref, decode_pytorch(q, kf.to(q.dtype), vf.to(q.dtype), table, sl, causal=causal))
    assert res.ok, res.message
    res = check_lse(lse, lse_ref)
    assert res.ok, res.message
    return out


def dequantized(cq, sc):
    return cq.float() * sc[..., None]


@pytest.mark.parametrize("kind", ["int8", "fp8"])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_quantized_cache_matches_its_dequantized_reference(kind, dtype, d):
    q, k, v, bt, sl = make_case([0, 1, 17, 300, 2500], s_q=2, h_q=16, h_kv=4, d=d, dtype=DT[dtype],
                                seed=("quant", kind, d))
    kq, vq, ks, vs = quantize_case(q, k, v, bt, sl, kind)
    flashkit.device_errors(clear=True)
    out, lse = flashkit.decode(q, kq, vq, bt, sl, return_lse=True, k_scale=ks, v_scale=vs)
    out2 = flashkit.decode(q, kq, vq, bt, sl, k_scale=ks, v_scale=vs, split_size=256)
    torch.cuda.synchronize()
    assert flashkit.device_errors() == 0
    kf = torch.nan_to_num(dequantized(kq, ks))  # unused slots: never read by the reference
    vf = torch.nan_to_num(dequantized(vq, vs))
    ref, lse_ref = decode_reference(q.float(), kf, vf, bt, sl)
    pt = decode_pytorch(q, kf.to(q.dtype), vf.to(q.dtype), bt, sl)
    for o in (out, out2):
        res = check_close(o, ref, pt)
        assert res.ok, res.message
    res = check_lse(lse, lse_ref)
    assert res.ok, res.message


# A quantized K cache whose two pages lie 2^36 bytes apart inside one 64 GB allocation: the narrow kernels' 32-bit
# offsets (16-byte units) cannot describe page 1, so the launch must take the 16-row kernels, whose offsets are 64-bit
# (decode.md "32-bit offset rings"); B = 1 also runs the pre-wait L2 prefetch over that page. Output and LSE against
# the reference on the same values in a compact cache. Needs ~64 GB of free GPU memory (skipped otherwise).
@pytest.mark.parametrize("kind", ["int8", "fp8"])
def test_quantized_cache_beyond_32_bit_offsets(kind):
    stride = 1 << 36  # bytes between the view's pages
    q, k, v, bt, sl = make_case([29], s_q=1, h_q=8, h_kv=2, extra_pages=0, seed=("off32", kind))  # 4 rows: narrow
    P, page, H, D = k.shape
    assert P == 2
    torch.cuda.empty_cache()
    if torch.cuda.mem_get_info()[0] < stride + (4 << 30):
        pytest.skip("needs ~68 GB of free GPU memory")
    kq, vq, ks, vs = quantize_case(q, k, v, bt, sl, kind)
    store = torch.empty(stride + page * H * D, dtype=torch.uint8, device="cuda")
    try:
        kbig = store.as_strided((P, page, H, D), (stride, H * D, D, 1)).view(KV_DTYPES[kind])
        kbig.copy_(kq)
        flashkit.device_errors(clear=True)
        out, lse = flashkit.decode(q, kbig, vq, bt, sl, return_lse=True, k_scale=ks, v_scale=vs)
        torch.cuda.synchronize()
        assert flashkit.device_errors(clear=True) == 0
    finally:
        del store
        kbig = None
        torch.cuda.empty_cache()
    kf = torch.nan_to_num(dequantized(kq, ks))
    vf = torch.nan_to_num(dequantized(vq, vs))
    ref, lse_ref = decode_reference(q.float(), kf, vf, bt, sl)
    res = check_close(out, ref, decode_pytorch(q, kf.to(q.dtype), vf.to(q.dtype), bt, sl))
    assert res.ok, res.message
    res = check_lse(lse, lse_ref)
    assert res.ok, res.message


# The same for a bf16 cache: pages 2^35 elements (64 GB) apart, offsets past 32 bits in the 16-bit kernels' 64-bit
# rings and the pre-wait prefetch (B = 1).
def test_bf16_cache_beyond_32_bit_offsets():
    stride = 1 << 35  # elements between the view's pages
    q, k, v, bt, sl = make_case([29], s_q=1, h_q=8, h_kv=2, extra_pages=0, seed="off32-bf16")
    P, page, H, D = k.shape
    torch.cuda.empty_cache()
    if torch.cuda.mem_get_info()[0] < 2 * stride + (4 << 30):
        pytest.skip("needs ~68 GB of free GPU memory")
    store = torch.empty(stride + page * H * D, dtype=k.dtype, device="cuda")
    try:
        kbig = store.as_strided((P, page, H, D), (stride, H * D, D, 1))
        kbig.copy_(k)
        out, lse = run_checked(q, kbig, v, bt, sl)
    finally:
        del store
        kbig = None
        torch.cuda.empty_cache()
    check(q, k, v, bt, sl, out, lse)


# Rows per item (ratio * s_q) around the narrow form's limit (decode.md "The narrow form": the 8-bit kernels take
# keys as the MMAs' M dimension when every item holds at most 8 rows): 1 (MHA), 3, 8 (GQA 8; GQA 2 x s_q 4 with
# causal rows), then 9 and 12 on the 16-row form; odd lengths, an empty sequence, NaN bytes and scales in the
# unused slots.
@pytest.mark.parametrize("kind", ["int8", "fp8"])
@pytest.mark.parametrize("h_q,h_kv,s_q", [(4, 4, 1), (6, 2, 1), (32, 4, 1), (8, 4, 4), (12, 4, 3), (24, 8, 4)])
def test_quantized_cache_rows_per_item(kind, h_q, h_kv, s_q):
    q, k, v, bt, sl = make_case([1, 63, 0, 1000, 3333], s_q=s_q, h_q=h_q, h_kv=h_kv,
                                seed=("quant-rows", kind, h_q, h_kv, s_q))
    check_quantized(q, k, v, bt, sl, kind)


# Out-of-range block ids in a quantized cache, inside tiles that are otherwise full (the 8-bit kernels copy a tile
# whose rows are all valid without the zero fill: a bad page must keep its tile on the zero-filled path), at 4 rows
# per item (the narrow form) and 12 (the 16-row form).
@pytest.mark.parametrize("kind", ["int8", "fp8"])
@pytest.mark.parametrize("h_q", [8, 24])
def test_quantized_cache_out_of_range_block_ids(kind, h_q):
    q, k, v, bt, sl = make_case([200, 700, 33], h_q=h_q, h_kv=2, page=16, seed=("quant-bad", kind, h_q))
    bad = bt.clone()
    bad[1, 1] = k.shape[0] + 100  # tokens 16-31: inside the first 64-token tile
    bad[1, 20] = -5                # tokens 320-335: inside the sixth
    bad[0, 12] = 2 ** 31 - 1       # tokens 192-199: the last (partial) tile
    # Non-causal: the reference does not model causal rows with skipped tokens. 4 = kDecodeErrBlockId.
    out = check_quantized(q, k, v, bt, sl, kind, table=bad, causal=False, errors=4)
    assert torch.isfinite(out).all()


# Measured on an H200 (2026-11-23): int8 0.010 / fp8 0.035 on random data; with outlier
# channels int8 0.114 (a 30x channel sets each token's scale, so the other channels keep
# ~4 bits: per-channel K scales would be the fix) and fp8 0.019 (its exponent absorbs it).
@pytest.mark.parametrize("kind, outliers, bound", [("int8", False, 0.02), ("fp8", False, 0.06),
                                                    ("int8", True, 0.15), ("fp8", True, 0.04)])
def test_quantized_cache_close_to_the_16_bit_cache(kind, outliers, bound):
    """Error of the quantized cache against the bf16 cache it was made from (relative L2 of
    the output), with and without outlier channels (some K/V channels 30x larger)."""
    q, k, v, bt, sl = make_case([4000, 1500, 64], h_q=32, h_kv=8, seed=("outlier", kind, outliers))
    if outliers:
        k[..., 5] *= 30
        v[..., 77] *= 30
    kq, vq, ks, vs = quantize_case(q, k, v, bt, sl, kind)
    out_q = flashkit.decode(q, kq, vq, bt, sl, k_scale=ks, v_scale=vs).float()
    out = flashkit.decode(q, k, v, bt, sl).float()
    rel = float((out_q - out).norm() / out.norm())
    print(f"{kind} outliers={outliers}: rel_l2 vs bf16 cache {rel:.4f}")
    assert rel < bound, f"{kind}: relative L2 {rel:.4f} against the bf16 cache (bound {bound})"


def test_quantized_cache_arguments():
    q, k, v, bt, sl = make_case([10], h_q=8, h_kv=2, seed=18)
    kq, vq, ks, vs = quantize_case(q, k, v, bt, sl, "int8")
    with pytest.raises(ValueError, match="k_scale"):
        flashkit.decode(q, kq, vq, bt, sl)                          # scales missing
    with pytest.raises(ValueError, match="k_scale"):
        flashkit.decode(q, k, v, bt, sl, k_scale=ks, v_scale=vs)    # scales on a bf16 cache
    with pytest.raises(ValueError, match="v_cache"):
        flashkit.decode(q, kq, vq.view(torch.float8_e4m3fn), bt, sl, k_scale=ks, v_scale=vs)
    with pytest.raises(ValueError, match="k_scale"):
        flashkit.decode(q, kq, vq, bt, sl, k_scale=ks[:, :, :1], v_scale=vs)
    with pytest.raises(ValueError, match="k_cache"):
        flashkit.decode(q, kq.view(torch.uint8), vq.view(torch.uint8), bt, sl, k_scale=ks, v_scale=vs)
    # a plan is made for one cache kind: the other kinds are refused on the host, before any launch
    B, s_q, h_q, d = q.shape
    plan16 = flashkit.DecodePlan(B, s_q, h_q, k.shape[2], d, device="cuda")
    plan8 = flashkit.DecodePlan(B, s_q, h_q, k.shape[2], d, device="cuda", kv_dtype=torch.int8)
    plan16.plan(sl)
    plan8.plan(sl)
    with pytest.raises(ValueError, match="kv_dtype=None"):
        plan16.run(q, kq, vq, bt, sl, k_scale=ks, v_scale=vs)
    with pytest.raises(ValueError, match="kv_dtype=int8"):
        plan8.run(q, k, v, bt, sl)
    with pytest.raises(ValueError, match="kv_dtype=int8"):
        plan8.run(q, kq.view(torch.float8_e4m3fn), vq.view(torch.float8_e4m3fn), bt, sl, k_scale=ks, v_scale=vs)
    flashkit.device_errors(clear=True)
    out = plan8.run(q, kq, vq, bt, sl, k_scale=ks, v_scale=vs)  # the matching kinds run
    torch.testing.assert_close(out, plan16.run(q, k, v, bt, sl), atol=0.1, rtol=0.1)
    torch.cuda.synchronize()
    assert flashkit.device_errors() == 0


# The narrow form for the 16-bit caches (FLASHKIT_DECODE_NARROW16, read once per process: decode.md "The narrow form for
# the 16-bit caches"). Each arm in a fresh process: every case against the float64 reference (run_checked / check:
# poisoned outputs, NaN in the unused slots, device errors clear), and the split kernels the calls launched, read from
# torch.profiler, so that the switch's arm is shown to run the narrow kernels (DecodeTraits<.., 0, true>) and the other
# arm not. Rows per item 1, 4, 6 (s_q 3, causal), 8 (GQA 8; GQA 4 x s_q 2), fixed split sizes (partials and the
# combine), lengths 0 / 1 / 3 / page +- 1 / 1000 / 3333, D 64 / 128 / 256, bf16 and fp16; the 16-row form's 9+ rows too.
_NARROW16_PROBE = r"""
import json, sys, torch
sys.path.insert(0, sys.argv[1])
from test_decode_gpu import make_case, run_checked, check
cases = []
for dt in (torch.bfloat16, torch.float16):
    for d in (64, 128, 256):
        for (h_q, h_kv, s_q, split) in ((4, 4, 1, 0), (8, 2, 1, 0), (16, 2, 1, 64), (8, 2, 2, 0), (6, 2, 3, 0),
                                        (12, 4, 3, 0), (8, 1, 2, 128)):
            cases.append((dt, d, h_q, h_kv, s_q, split))
n = 0
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
    for (dt, d, h_q, h_kv, s_q, split) in cases:
        q, k, v, bt, sl = make_case([1, 0, 3, 15, 17, 1000, 3333], s_q=s_q, h_q=h_q, h_kv=h_kv, d=d, dtype=dt,
                                    seed=("narrow16", str(dt), d, h_q, h_kv, s_q, split))
        out, lse = run_checked(q, k, v, bt, sl, causal=True, split_size=split)
        check(q, k, v, bt, sl, out, lse, causal=True)
        n += 1
names = {e.name for e in prof.events() if "decode_split_kernel" in e.name}
print(json.dumps({"cases": n, "kernels": sorted(names)}))
"""


@pytest.mark.parametrize("arm", ["0", "1"])
def test_narrow_form_for_16_bit_caches(run_probe, arm):
    import json
    from pathlib import Path

    res = json.loads(run_probe(_NARROW16_PROBE, {"FLASHKIT_DECODE_NARROW16": arm},
                               ["FLASHKIT_DECODE_NARROW", "FLASHKIT_DECODE_NARROW16"],
                               args=[str(Path(__file__).resolve().parent)]).strip().splitlines()[-1])
    assert res["cases"] == 42
    narrow = [k for k in res["kernels"] if "0, true>" in k]
    wide = [k for k in res["kernels"] if "0, false>" in k]
    assert wide, res["kernels"]  # the 16-row form: 12 rows per item, and every call without the switch
    if arm == "1":
        assert len(narrow) == 6, res["kernels"]  # bf16 / fp16 x D 64 / 128 / 256
    else:
        assert not narrow, res["kernels"]
