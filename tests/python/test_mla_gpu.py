"""GPU tests of the MLA decode (flashkit.mla, FlashMLA's interface).

Every case: random inputs, a randomly permuted block table, NaN in every cache slot past
each length and in unused pages, outputs poisoned with NaN (every element must be written),
out checked with the SPEC §3 rule against a float32 reference per sequence (PyTorch's
attention in the same dtype as the baseline), lse (natural log, +inf for rows that see no
key) against the reference, the device error word clear afterwards. Plus: the GPU scheduler
against its CPU mirror on random length mixes, zero lengths, every page size, s_q 1..4,
h_q 16..128 (and 24, 72), h_kv 1 and 2, causal and not, strided q / cache, determinism,
CUDA-graph replay with new lengths and block tables, torch.compile, out-of-range block ids
and lengths (error bits, no fault), check mode, misuse, and the FlashMLA sweep shape's time.

The split kernel is whichever the dispatcher picks; the ``kernel`` parameter also forces the
portable one (FLASHKIT_MLA_PORTABLE=1, read per call) where another one is compiled.

Run: ``pytest -m gpu tests/python/test_mla_gpu.py``.
"""

import math
import random
import zlib

import pytest

torch = pytest.importorskip("torch")

try:
    import flashkit
    import flashkit.mla as flash_mla
    from flashkit.testing import (check_close, check_lse, check_mla_schedule, mla_pytorch,
                                  mla_reference, mla_schedule_reference, paged_pool, run_mla_decode_poisoned)
except ImportError as e:
    pytest.skip(f"flashkit does not import: {e}", allow_module_level=True)

pytestmark = pytest.mark.gpu

DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
D, DV = 576, 512


def _gen(seed):
    g = torch.Generator(device="cuda")
    g.manual_seed(zlib.crc32(repr(seed).encode()))
    return g


@pytest.fixture(params=["default", "portable"])
def kernel(request, monkeypatch):
    """Runs the test with the dispatcher's choice, and with the portable kernel forced."""
    if request.param == "portable":
        default = flash_mla.split_kernel_family(torch.bfloat16)
        monkeypatch.setenv("FLASHKIT_MLA_PORTABLE", "1")
        assert flash_mla.split_kernel_family(torch.bfloat16) == "sm80"
        if default == "sm80":
            pytest.skip("the default split kernel is the portable one already")
    return request.param


def make_case(lens, s_q=1, h_q=16, h_kv=1, page=64, dtype=torch.bfloat16, extra_pages=3, seed=0,
              fill=float("nan"), pad=0):
    """q, kv cache (unused slots = `fill`), permuted block table, seqlens. pad > 0: q and the
    cache are views of tensors with `pad` more elements per row (strided)."""
    g = _gen(("mla", tuple(lens), s_q, h_q, h_kv, page, str(dtype), seed, pad))
    num_pages, bt, slots = paged_pool(lens, page, extra_pages, g)
    kv = torch.full((num_pages, page, h_kv, D + pad), fill, dtype=dtype, device="cuda")[..., :D]
    for n, at in zip(lens, slots):
        if at is not None:
            kv[at] = torch.randn((n, h_kv, D), generator=g, device="cuda").to(dtype)
    sl = torch.tensor(lens, dtype=torch.int32, device="cuda")
    q = torch.randn((len(lens), s_q, h_q, D + pad), generator=g, device="cuda").to(dtype)[..., :D]
    return q, kv, bt, sl


def run(q, kv, bt, sl, causal=False, scale=None, expect_errors=0):
    """get_mla_metadata + the decode into NaN-poisoned out / lse; checks the error word."""
    return run_mla_decode_poisoned(q, kv, bt, sl, causal, scale, expect_errors, head_dim_v=DV)


def check_mla_lse(lse, lse_ref):
    pos = torch.isposinf(lse_ref)
    assert torch.equal(torch.isposinf(lse), pos), "lse: +inf rows differ from the reference"
    a = torch.where(pos, torch.full_like(lse, -math.inf), lse)
    r = torch.where(pos, torch.full_like(lse_ref, -math.inf), lse_ref)
    res = check_lse(a, r)
    assert res.ok, res.message


def check_cos(out, ref, lse, lse_ref):
    """FlashMLA's own test measure on top of the SPEC §3 rule: cos_diff = 1 - 2·Σxy / Σ(x² + y²)
    below 1e-5, on out and on the finite entries of lse (rows with keys)."""
    from flashkit.bench.mla_runner import cos_diff

    if bool((ref != 0).any()):
        d = cos_diff(torch, out, ref)
        assert d < 1e-5, f"out: cos_diff {d:.3g}"
    fin = torch.isfinite(lse_ref)
    if bool(fin.any()):
        d = cos_diff(torch, lse[fin], lse_ref[fin])
        assert d < 1e-5, f"lse: cos_diff {d:.3g}"


def check(q, kv, bt, sl, out, lse, causal=False, scale=None):
    # The references repeat K/V per query head (GQA): large cases need the cached blocks
    # of earlier tests back first (xdist workers share the GPU).
    torch.cuda.empty_cache()
    ref, lse_ref = mla_reference(q, kv, bt, sl, causal, scale)
    pt = mla_pytorch(q, kv, bt, sl, causal, scale)
    res = check_close(out, ref, pt)
    assert res.ok, res.message
    check_mla_lse(lse, lse_ref)
    check_cos(out, ref, lse, lse_ref)


# --- scheduler ---------------------------------------------------------------------------


def _mixes():
    rng = random.Random(7)
    cases = [([0], 16), ([1], 1), ([1 << 20], 132), ([0] * 5, 7), ([-3, 10, -1], 4)]
    for B in (1, 2, 7, 64, 1000, 4096, 5000):
        for kind in ("uniform", "zeros", "huge"):
            if kind == "uniform":
                lens = [rng.randint(0, 30000) for _ in range(B)]
            elif kind == "zeros":
                lens = [rng.choice([0, 0, 1, 64, 65, 2000]) for _ in range(B)]
            else:
                lens = [rng.randint(0, 200) for _ in range(B)]
                lens[rng.randrange(B)] = 1 << 22
            cases.append((lens, rng.choice([1, 3, 16, 66, 132, 1000])))
    return cases


@pytest.mark.parametrize("case", range(len(_mixes())))
def test_metadata_matches_cpu_mirror(case):
    lens, parts = _mixes()[case]
    sl = torch.tensor(lens, dtype=torch.int32, device="cuda")
    sched = torch.full((parts, 8), -99, dtype=torch.int32, device="cuda")
    splits = torch.full((len(lens) + 1,), -99, dtype=torch.int32, device="cuda")
    flashkit._C.mla_metadata(sl, sched, splits, torch.cuda.current_stream().cuda_stream)
    ref_sched, ref_splits = mla_schedule_reference(lens, parts)
    assert splits.tolist() == ref_splits
    assert sched.tolist() == ref_sched
    check_mla_schedule(lens, sched.tolist(), splits.tolist())


def test_get_mla_metadata_shapes():
    sl = torch.tensor([100, 0, 5000], dtype=torch.int32, device="cuda")
    sched, splits = flash_mla.get_mla_metadata(sl, 128, 1)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert sched.shape == (max(1, sms // 2), 8) and sched.dtype == torch.int32
    assert splits.shape == (4,) and splits.dtype == torch.int32
    check_mla_schedule([100, 0, 5000], sched.tolist(), splits.tolist())


# --- accuracy ----------------------------------------------------------------------------

HEADS = [(16, 1), (32, 1), (64, 1), (128, 1), (24, 1), (72, 1), (32, 2), (128, 2)]


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("s_q", [1, 2, 3, 4])
@pytest.mark.parametrize("heads", HEADS, ids=[f"{a}x{b}" for a, b in HEADS])
@pytest.mark.parametrize("causal", [False, True])
def test_accuracy(kernel, dtype, s_q, heads, causal):
    h_q, h_kv = heads
    case = make_case([1, 130, 700, 2100], s_q=s_q, h_q=h_q, h_kv=h_kv, dtype=DT[dtype],
                     seed=(s_q, heads, causal))
    out, lse = run(*case, causal=causal)
    check(*case, out, lse, causal=causal)


@pytest.mark.parametrize("page", [1, 16, 32, 48, 64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_page_sizes(kernel, page, causal):
    lens = [0, 1, max(2, page - 1), page, page + 1, 777, 2049 if page > 1 else 300]
    case = make_case(lens, s_q=2, h_q=16, page=page, seed=page)
    out, lse = run(*case, causal=causal)
    check(*case, out, lse, causal=causal)


def _run_layout(lens, page, h_q, s_q, dtype, seed, h_kv=1):
    """A cache whose sequences own consecutive page ids (every 64-token block of pages is a
    run), with two blocks broken on purpose (sequence 0: two pages of one block swapped;
    sequence 2: its pages in descending order), NaN in unused slots and pages. Returns q, kv,
    bt, sl."""
    g = _gen(("runs", tuple(lens), page, h_q, s_q, dtype, seed, h_kv))
    num_pages, bt, _ = paged_pool(lens, page, 5, g, ordered=True)
    pages_per = [max(1, math.ceil(n / page)) for n in lens]
    per_block = 64 // page
    if pages_per[0] >= 2 * per_block:
        bt[0, [per_block, per_block + 1]] = bt[0, [per_block + 1, per_block]].clone()
    if len(lens) > 2:
        bt[2, :pages_per[2]] = bt[2, :pages_per[2]].flip(0)
    kv = torch.full((num_pages, page, h_kv, D), float("nan"), dtype=dtype, device="cuda")
    for b, n in enumerate(lens):
        pos = torch.arange(n, device="cuda")
        kv[bt[b].long()[pos // page], pos % page] = torch.randn((n, h_kv, D), generator=g, device="cuda").to(dtype)
    q = torch.randn((len(lens), s_q, h_q, D), generator=g, device="cuda").to(dtype)
    return q, kv, bt, torch.tensor(lens, dtype=torch.int32, device="cuda")


@pytest.mark.parametrize("page", [16, 32])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("h_q,h_kv,s_q,causal", [(16, 1, 1, False), (128, 1, 2, True), (32, 2, 1, True)])
def test_page_runs_match_scattered_pages_bitwise(page, dtype, h_q, h_kv, s_q, causal):
    """Pages of 16 / 32 tokens: a 64-token block whose pages have consecutive ids is loaded by
    one TMA copy per chunk (the run map, docs/kernels/mla.md); any other block by one copy per
    page. The same cache with its pages moved to random ids (no runs) must give the same bits,
    and both pass the reference check. Lengths end mid-page, mid-block and on block edges; h_kv 2
    puts the head between the slot and page coordinates."""
    lens = [1000, 64 * 5, 777, 64 * 10 + page * 3 + 5, 1, 64]
    q, kv, bt, sl = _run_layout(lens, page, h_q, s_q, DT[dtype], seed=(page, h_q), h_kv=h_kv)
    out, lse = run(q, kv, bt, sl, causal=causal)
    check(q, kv, bt, sl, out, lse, causal=causal)
    perm = torch.randperm(kv.shape[0], generator=_gen(("scatter", page, dtype)), device="cuda")
    kv2 = torch.empty_like(kv)
    kv2[perm] = kv
    bt2 = torch.where(bt >= 0, perm.int()[bt.clamp(min=0).long()], bt)
    out2, lse2 = run(q, kv2, bt2, sl, causal=causal)
    assert torch.equal(out, out2), "out: the run copies and the per-page copies differ"
    assert torch.equal(lse, lse2), "lse: the run copies and the per-page copies differ"


_Q_TMA_PROBE = r"""
import hashlib, torch, flashkit.mla as fm
from flashkit.testing import check_close, mla_pytorch, mla_reference, run_mla_decode_poisoned
g = torch.Generator(device="cuda").manual_seed(23)
out = []
# (lengths, s_q, h_q, h_kv, page, q row padding): head ratios 16 (4 tokens a box, rows past s_q
# zero-filled), 128 (two m-blocks), 32 with h_kv 2, 64 with strided q; zero and short lengths (a
# prefetched Q left to drain); pages 64 and 16 / 32 (both TMA kernels); 24 (cp.async either way).
for lens, s_q, h_q, h_kv, page, pad in [([0, 300, 1, 4100, 2000, 0], 3, 16, 1, 64, 0),
                                        ([700, 0, 2600], 2, 128, 1, 64, 64),
                                        ([513, 64, 1900, 5], 1, 64, 2, 16, 0),
                                        ([1200, 33, 0, 0, 900], 4, 32, 1, 32, 0),
                                        ([450, 2000], 2, 64, 1, 64, 64),
                                        ([800, 70], 1, 24, 1, 64, 0)]:
    B = len(lens)
    per = max(1, -(-max(lens) // page))
    kv = torch.randn(B * per + 3, page, h_kv, 576, device="cuda", dtype=torch.bfloat16, generator=g)
    bt = torch.randperm(B * per + 3, device="cuda", generator=g)[: B * per].int().view(B, per)
    q = torch.randn(B, s_q, h_q, 576 + pad, device="cuda", dtype=torch.bfloat16, generator=g)[..., :576]
    sl = torch.tensor(lens, dtype=torch.int32, device="cuda")
    # (NaN-poisoned out / lse, the error word checked; then each arm against the reference, so that an element
    # both arms left unwritten cannot pass as equal bits)
    o, lse = run_mla_decode_poisoned(q, kv, bt, sl, True)
    res = check_close(o, mla_reference(q, kv, bt, sl, True)[0], mla_pytorch(q, kv, bt, sl, True))
    assert res.ok, res.message
    for x in (o, lse):
        out.append(hashlib.sha256(x.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest()[:16])
print(" ".join(out))
"""


@pytest.mark.parametrize("switch", ["FLASHKIT_MLA_Q_TMA", "FLASHKIT_MLA_O_TMA"])
def test_tma_copy_paths_match_bitwise(run_probe, switch):
    """Hopper kernel, the same bits with a TMA copy path on (1) and off (0; read once per process,
    hence two subprocesses):
    - FLASHKIT_MLA_Q_TMA: Q by TMA (one box per chunk of an m-block, the next sequence's Q copied
      during the previous piece's epilogue) against cp.async at each piece's start; the same values
      land in the same shared-memory tile, rows past s_q as zeros;
    - FLASHKIT_MLA_O_TMA (pages of >= 64 tokens): a final output stored by TMA from the swizzled
      staging tile against the 64 row copies; rows past s_q are clipped by the map, not written
      (h_q 16 s_q 3: a box spans 4 tokens).
    (That the TMA paths are taken shows in the dev harness's timings, docs/kernels/mla.md v22, v23.)"""
    if flash_mla.split_kernel_family(torch.bfloat16) != "sm90":
        pytest.skip("the Hopper MLA kernel is not what runs here")
    # (FLASHKIT_MLA_NO_TMA inherited from the caller would take both runs off the TMA maps: dropped)
    runs = [run_probe(_Q_TMA_PROBE, {switch: v}, ["FLASHKIT_MLA_PORTABLE", "FLASHKIT_MLA_NO_TMA", switch],
                      timeout=300).split()
            for v in ("1", "0")]
    assert len(runs[0]) == 12 and runs[0] == runs[1], runs


def test_many_sequences_per_part_bad_first_ids_and_lengths(kernel):
    """Many short sequences per part (h_q 128 s_q 2: 4 m-blocks, 33 parts), page 64, so that pieces
    follow each other in a CTA (final outputs by TMA, the next sequence's Q copied in the epilogue):
    first-block ids out of range, a negative length and one past the table's capacity: those
    tokens are left out and reported (bits 4 | 8), everything else matches the reference."""
    rng = random.Random(41)
    lens = [rng.choice([0, 1, 63, 64, 65, 130, 200, 333]) for _ in range(60)]
    q, kv, bt, sl = make_case(lens, s_q=2, h_q=128, page=64, seed=41)
    bad_bt = bt.clone()
    bad_sl = sl.clone()
    for i in range(3, 60, 7):
        bad_bt[i, 0] = kv.shape[0] + i if i % 2 else -1 - i
    bad_sl[10] = -3
    bad_sl[20] = bt.shape[1] * 64 + 500  # clamped to the capacity: past its pages the ids are junk
    # (not causal: the reference does not model causal rows with skipped tokens)
    out, lse = run(q, kv, bad_bt, bad_sl, expect_errors=8 | 4)
    keep = [i for i in range(60) if i not in (10, 20)]
    assert (out[10] == 0).all() and torch.isposinf(lse[10]).all()
    ki = torch.tensor(keep, device="cuda")
    check(q[ki], kv, bad_bt[ki], sl[ki], out[ki], lse[ki])


@pytest.mark.parametrize("page", [16, 32])
def test_page_runs_with_a_bad_id_inside(page):
    """A block otherwise a run, with one page id out of range: that block goes page by page,
    its bad page's tokens are left out and reported (bit 4), the other blocks stay runs."""
    lens = [600, 300]
    q, kv, bt, sl = _run_layout(lens, page, 16, 1, torch.bfloat16, seed=("bad", page))
    bad = bt.clone()
    bad[0, 64 // page + 1] = kv.shape[0] + 3
    bad[1, 0] = -2
    out, lse = run(q, kv, bad, sl, expect_errors=4)
    check(q, kv, bad, sl, out, lse)


@pytest.mark.parametrize("mean", [300, 4096])
def test_variable_lengths(kernel, mean):
    rng = random.Random(mean)
    lens = [max(0, int(rng.gauss(mean, mean / 4))) for _ in range(24)]
    case = make_case(lens, s_q=2, h_q=64, seed=("var", mean))
    out, lse = run(*case, causal=True)
    check(*case, out, lse, causal=True)


def test_zero_lengths_and_rows_without_keys(kernel):
    case = make_case([0, 0, 0], s_q=1, h_q=16, seed=1)
    out, lse = run(*case)
    assert (out == 0).all() and torch.isposinf(lse).all()
    # len < s_q with causal: the first query tokens see no key.
    case = make_case([2, 0, 5, 1], s_q=4, h_q=32, seed=2)
    out, lse = run(*case, causal=True)
    check(*case, out, lse, causal=True)
    assert torch.isposinf(lse[0, :, :2]).all() and (out[0, :2] == 0).all()


def test_strided_inputs_and_scale(kernel):
    case = make_case([5, 64, 65, 3000], s_q=2, h_q=32, page=32, pad=64, seed=3)
    assert not case[0].is_contiguous() and not case[1].is_contiguous()
    out, lse = run(*case, scale=0.03)
    check(*case, out, lse, scale=0.03)


@pytest.mark.parametrize("layout", ["padded_rows", "heads_outer"])
@pytest.mark.parametrize("h_q,s_q", [(16, 1), (128, 2)])
def test_caller_strided_out(kernel, layout, h_q, s_q):
    """The C++ API writes a caller-allocated `out` of any (16-byte-aligned) strides, last dim
    contiguous; the Hopper kernel's epilogue copies its rows from shared memory with one bulk
    copy each. Rows padded to 520 elements (nothing may be written into the padding), and
    heads outermost; sequences with one piece (written by the split kernel) and split ones
    (by the combine). A 2-byte-shifted `out` is refused by the validation."""
    lens = [37, 1, 64, 5000, 9000, 129]
    q, kv, bt, sl = make_case(lens, s_q=s_q, h_q=h_q, page=64, seed=11)
    B = len(lens)
    if layout == "padded_rows":
        big = torch.full((B, s_q, h_q, DV + 8), float("nan"), dtype=q.dtype, device="cuda")
        out = big[..., :DV]
    else:
        big = torch.full((h_q, B, s_q, DV), float("nan"), dtype=q.dtype, device="cuda")
        out = big.permute(1, 2, 0, 3)
    assert not out.is_contiguous()
    lse = torch.full((B, h_q, s_q), float("nan"), dtype=torch.float32, device="cuda")
    sched, splits = flash_mla.get_mla_metadata(sl, s_q * h_q, 1)
    assert int(splits[-1]) > B  # some sequences are split
    ws = torch.empty((flash_mla.mla_workspace_size(B, s_q, h_q, sched.shape[0]),), dtype=torch.uint8,
                     device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    flashkit.device_errors(clear=True)
    flashkit._C.mla_decode(q, kv, bt, sl, sched, splits, out, lse, ws, DV, 0.0, True, False, stream)
    torch.cuda.synchronize()
    assert flashkit.device_errors(clear=True) == 0
    check(q, kv, bt, sl, out, lse, causal=True)
    if layout == "padded_rows":
        assert torch.isnan(big[..., DV:]).all(), "written past a row"
        with pytest.raises(ValueError, match="out"):
            flashkit._C.mla_decode(q, kv, bt, sl, sched, splits, big[..., 1:DV + 1], lse, ws, DV, 0.0, True,
                                   False, stream)


def test_one_long_sequence_many_splits(kernel):
    # h_q 16 (one m-block, so all SMs are parts of this one sequence): with h_q 128 the
    # head-repeating references alone need ~105 GiB at 200k tokens.
    case = make_case([200000], s_q=1, h_q=16, page=64, seed=4)
    sched, splits = flash_mla.get_mla_metadata(case[3], 16, 1)
    assert int(splits[1]) > 1  # really split
    out, lse = run(*case)
    check(*case, out, lse)


def test_deterministic(kernel):
    case = make_case([100, 5000, 20000, 3], s_q=2, h_q=64, seed=5)
    out1, lse1 = run(*case, causal=True)
    out2, lse2 = run(*case, causal=True)
    assert torch.equal(out1, out2) and torch.equal(lse1, lse2)


def test_flash_mla_interface_allocates():
    q, kv, bt, sl = make_case([300, 2000], s_q=2, h_q=32, seed=6)
    sched, splits = flash_mla.get_mla_metadata(sl, 2 * 32, 1)
    out, lse = flash_mla.flash_mla_with_kvcache(q, kv, bt, sl, DV, sched, splits, causal=True)
    assert out.shape == (2, 2, 32, DV) and lse.shape == (2, 32, 2) and lse.dtype == torch.float32
    check(q, kv, bt, sl, out, lse, causal=True)


# --- graphs, compile ---------------------------------------------------------------------


def test_cuda_graph_replay_with_new_lengths_and_tables():
    B, h_q = 4, 64
    q, kv, bt, sl = make_case([4000] * B, s_q=2, h_q=h_q, page=64, seed=10)
    sl_buf, bt_buf, q_buf = sl.clone(), bt.clone(), q.clone()

    def step():
        sched, splits = flash_mla.get_mla_metadata(sl_buf, 2 * h_q, 1)
        return flash_mla.flash_mla_with_kvcache(q_buf, kv, bt_buf, sl_buf, DV, sched, splits,
                                                causal=True)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out_g, lse_g = step()
    for i, lens in enumerate([[4000, 1, 0, 3999], [17, 2500, 4000, 64], [4000] * 4]):
        sl_buf.copy_(torch.tensor(lens, dtype=torch.int32))
        perm = torch.randperm(B, generator=_gen(("perm", i)), device="cuda")
        bt_buf.copy_(bt[perm])
        q_buf.copy_(torch.randn(q.shape, generator=_gen(("q", i)), device="cuda").to(q.dtype))
        out_g.fill_(float("nan"))
        lse_g.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        check(q_buf, kv, bt_buf, sl_buf, out_g, lse_g, causal=True)
    assert flashkit.device_errors() == 0


def test_torch_compile_fullgraph():
    q, kv, bt, sl = make_case([300, 2000], s_q=1, h_q=16, seed=11)
    sched, splits = flash_mla.get_mla_metadata(sl, 16, 1)

    @torch.compile(fullgraph=True)
    def step(q, kv, bt, sl, sched, splits):
        out, lse = flash_mla.flash_mla_with_kvcache(q * 1.0, kv, bt, sl, DV, sched, splits)
        return out + 0, lse

    out, lse = step(q, kv, bt, sl, sched, splits)
    check(q, kv, bt, sl, out, lse)


# --- bad index data, misuse --------------------------------------------------------------


def test_out_of_range_block_ids_are_skipped_and_reported(kernel):
    q, kv, bt, sl = make_case([200, 500, 33], h_q=16, page=16, seed=12)
    bad = bt.clone()
    bad[1, 3] = kv.shape[0] + 100
    bad[1, 7] = -5
    bad[2, 0] = 2 ** 31 - 1
    out, lse = run(q, kv, bad, sl, expect_errors=4)
    check(q, kv, bad, sl, out, lse)


def test_bad_lengths_are_clamped_and_reported(kernel):
    q, kv, bt, sl = make_case([200, 500, 33], h_q=16, page=16, seed=13)
    bad = sl.clone()
    bad[0] = -4                       # negative: 0 (out 0, lse +inf)
    bad[2] = bt.shape[1] * 16 + 1000  # beyond the block table: clamped to its capacity, whose
    # pages past the sequence hold junk ids (-7, skipped: bit 4) and NaN slots (read: garbage in)
    out, lse = run(q, kv, bt, bad, expect_errors=8 | 4)
    assert (out[0] == 0).all() and torch.isposinf(lse[0]).all()
    check(q[1:2], kv, bt[1:2], sl[1:2], out[1:2], lse[1:2])


def test_check_inputs_names_the_entry():
    q, kv, bt, sl = make_case([100, 200], h_q=16, page=16, seed=14)
    bad = bt.clone()
    bad[1, 2] = 10 ** 6
    sched, splits = flash_mla.get_mla_metadata(sl, 16, 1)
    with pytest.raises(ValueError, match="block_table"):
        flash_mla.flash_mla_with_kvcache(q, kv, bad, sl, DV, sched, splits, check_inputs=True)


def test_misuse_raises_clear_errors():
    q, kv, bt, sl = make_case([100, 200], s_q=1, h_q=16, seed=15)
    sched, splits = flash_mla.get_mla_metadata(sl, 16, 1)
    f = flash_mla.flash_mla_with_kvcache
    with pytest.raises(ValueError, match="q.*576"):
        f(q[..., :512], kv, bt, sl, DV, sched, splits)
    with pytest.raises(ValueError, match="kv_cache.*576"):
        f(q, kv[..., :512], bt, sl, DV, sched, splits)
    with pytest.raises(ValueError, match="head_dim_v"):
        f(q, kv, bt, sl, 576, sched, splits)
    kv3 = kv.expand(-1, -1, 3, -1)
    with pytest.raises(ValueError, match="multiple of h_kv"):
        f(q, kv3, bt, sl, DV, sched, splits)
    q5 = torch.zeros((2, 5, 16, D), dtype=q.dtype, device="cuda")
    with pytest.raises(ValueError, match="s_q"):
        f(q5, kv, bt, sl, DV, sched, splits)
    with pytest.raises(ValueError, match="q.*float16 or bfloat16"):
        f(q.float(), kv, bt, sl, DV, sched, splits)
    with pytest.raises(ValueError, match="kv_cache.*same as q"):
        f(q, kv.half(), bt, sl, DV, sched, splits)
    with pytest.raises(ValueError, match="block_table.*int32"):
        f(q, kv, bt.long(), sl, DV, sched, splits)
    with pytest.raises(ValueError, match="num_splits"):
        f(q, kv, bt, sl, DV, sched, splits[:-1])
    with pytest.raises(ValueError, match="tile_scheduler_metadata"):
        f(q, kv, bt, sl, DV, sched[:, :4], splits)
    with pytest.raises(TypeError, match="cache_seqlens"):
        f(q, kv, bt, [100, 200], DV, sched, splits)


# --- the FlashMLA sweep shape ------------------------------------------------------------


@pytest.mark.parametrize("s_q", [1, 4])
def test_sweep_shape_time(kernel, s_q):
    B, h_q, n = 128, 128, 16384
    g = _gen(("sweep", s_q))
    page = 64
    num_pages = B * n // page
    kv = torch.randn((num_pages, page, 1, D), generator=g, device="cuda").to(torch.bfloat16)
    bt = torch.randperm(num_pages, generator=g, device="cuda").int().view(B, n // page)
    sl = torch.full((B,), n, dtype=torch.int32, device="cuda")
    q = torch.randn((B, s_q, h_q, D), generator=g, device="cuda").to(torch.bfloat16)
    sched, splits = flash_mla.get_mla_metadata(sl, s_q * h_q, 1)
    out, lse = flash_mla.flash_mla_with_kvcache(q, kv, bt, sl, DV, sched, splits, causal=True)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        flash_mla.flash_mla_with_kvcache(q, kv, bt, sl, DV, sched, splits, causal=True)
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / 3
    flops = 2 * B * s_q * h_q * n * (D + DV)
    print(f"\nMLA sweep b={B} h_q={h_q} s_q={s_q} n={n} ({flash_mla.split_kernel_family(torch.bfloat16)}): "
          f"{ms:.2f} ms, {flops / ms / 1e9:.0f} TFLOP/s")
    assert ms < 100, f"{ms:.1f} ms per call"
    for b in (0, 77):  # accuracy of two sequences
        sub = (q[b:b + 1], kv, bt[b:b + 1], sl[b:b + 1])
        ref, lse_ref = mla_reference(*sub, True)
        pt = mla_pytorch(*sub, True)
        res = check_close(out[b:b + 1], ref, pt)
        assert res.ok, res.message
        check_mla_lse(lse[b:b + 1], lse_ref)
