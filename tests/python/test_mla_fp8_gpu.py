"""GPU tests of the MLA decode over FlashMLA's FP8 latent cache (``is_fp8_kvcache=True``).

The cache: per token 656 bytes, 512 float8_e4m3fn NoPE values, 4 fp32 scales (one per 128
values), 64 bf16 RoPE values (``flashkit.mla.quantize_kv_cache_fp8``). The kernel
dequantizes to q's dtype on load, so the reference is the float32 attention over the
dequantized cache rounded to q's dtype (what the kernel multiplies), with PyTorch's
attention in q's dtype on the same values as the SPEC §3 baseline. Every case: random
inputs, a permuted block table, 0xFF bytes (NaN values, NaN scales) in every slot past each
length and in unused pages, NaN-poisoned outputs, the device error word checked. Plus the
layout helpers' round trip, the accuracy against the bf16 cache it was made from (random
data and outlier channels), page sizes 1/16/64, s_q 1..4 causal, empty sequences, bad
block ids, CUDA-graph replay, torch.compile, and the argument errors.

Run: ``pytest -m gpu tests/python/test_mla_fp8_gpu.py``.
"""

import math
import os
import zlib

import pytest

torch = pytest.importorskip("torch")

try:
    import flashkit
    import flashkit.mla as flash_mla
    from flashkit.testing import (check_close, check_lse, mla_pytorch, mla_reference, paged_pool, poison_,
                                  run_mla_decode_poisoned)
except ImportError as e:
    pytest.skip(f"flashkit does not import: {e}", allow_module_level=True)

pytestmark = pytest.mark.gpu

DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
D, DV, TOKEN = 576, 512, 656


def _gen(seed):
    g = torch.Generator(device="cuda")
    g.manual_seed(zlib.crc32(repr(seed).encode()))
    return g


def make_case(lens, s_q=1, h_q=16, h_kv=1, page=64, dtype=torch.bfloat16, extra_pages=3, seed=0,
              outliers=False):
    """q, the FP8 cache (0xFF bytes in every unused slot), the bf16 cache it was made from
    (NaN in unused slots), a permuted block table, seqlens."""
    g = _gen(("mla-fp8", tuple(lens), s_q, h_q, h_kv, page, str(dtype), seed, outliers))
    num_pages, bt, slots = paged_pool(lens, page, extra_pages, g)
    kv16 = torch.full((num_pages, page, h_kv, D), float("nan"), dtype=torch.bfloat16, device="cuda")
    kv8 = torch.full((num_pages, page, h_kv, TOKEN), 0xFF, dtype=torch.uint8, device="cuda")
    for n, at in zip(lens, slots):
        if at is not None:
            x = torch.randn((n, h_kv, D), generator=g, device="cuda")
            if outliers:  # two channels 30x larger than the rest
                x[..., 7] *= 30
                x[..., 300] *= 30
            x = x.to(torch.bfloat16)
            kv16[at] = x
            kv8[at] = flash_mla.quantize_kv_cache_fp8(x)
    sl = torch.tensor(lens, dtype=torch.int32, device="cuda")
    q = torch.randn((len(lens), s_q, h_q, D), generator=g, device="cuda").to(dtype)
    return q, kv8, kv16, bt, sl


def run(q, kv8, bt, sl, causal=False, expect_errors=0):
    return run_mla_decode_poisoned(q, kv8, bt, sl, causal, expect_errors=expect_errors, head_dim_v=DV)


def check(q, kv8, bt, sl, out, lse, causal=False):
    """Against the float32 reference on the dequantized cache in q's dtype."""
    torch.cuda.empty_cache()
    kv = flash_mla.dequantize_kv_cache_fp8(kv8, q.dtype)
    ref, lse_ref = mla_reference(q, kv, bt, sl, causal)
    pt = mla_pytorch(q, kv, bt, sl, causal)
    res = check_close(out, ref, pt)
    assert res.ok, res.message
    pos = torch.isposinf(lse_ref)
    assert torch.equal(torch.isposinf(lse), pos), "lse: +inf rows differ from the reference"
    a = torch.where(pos, torch.full_like(lse, -math.inf), lse)
    r = torch.where(pos, torch.full_like(lse_ref, -math.inf), lse_ref)
    res = check_lse(a, r)
    assert res.ok, res.message


# --- the layout helpers ------------------------------------------------------------------


def test_quantize_round_trip_and_layout():
    g = _gen("round-trip")
    x = torch.randn((3, 5, 1, D), generator=g, device="cuda").to(torch.bfloat16)
    x[0, 0, 0, :128] = 0  # an all-zero group: scale 1, values 0
    q8 = flash_mla.quantize_kv_cache_fp8(x)
    assert q8.shape == (3, 5, 1, TOKEN) and q8.dtype == torch.uint8
    scales = q8[..., 512:528].contiguous().view(torch.float32)
    groups = x[..., :512].float().reshape(3, 5, 1, 4, 128)
    amax = groups.abs().amax(-1)
    expect = torch.where(amax > 0, amax / 448, torch.ones_like(amax))
    assert torch.equal(scales, expect)
    assert torch.equal(q8[..., 528:].contiguous().view(torch.bfloat16), x[..., 512:])  # RoPE as is
    y = flash_mla.dequantize_kv_cache_fp8(q8)
    assert y.dtype == torch.float32 and y.shape == x.shape
    err = (y[..., :512] - x[..., :512].float()).abs()
    # e4m3: 3 mantissa bits (half-ulp 2^-4 relative), subnormal step 2^-9 times the scale
    bound = x[..., :512].float().abs() / 16 + (amax / 448).repeat_interleave(128, -1) * 2 ** -9
    assert (err <= bound * 1.0001).all()
    assert (y[0, 0, 0, :128] == 0).all()
    # float8_e4m3fn views read the same
    assert torch.equal(flash_mla.dequantize_kv_cache_fp8(q8.view(torch.float8_e4m3fn)), y)


# --- accuracy ----------------------------------------------------------------------------

HEADS = [(16, 1), (128, 1), (72, 1), (32, 2)]


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("s_q", [1, 4])
@pytest.mark.parametrize("heads", HEADS, ids=[f"{a}x{b}" for a, b in HEADS])
@pytest.mark.parametrize("causal", [False, True])
def test_accuracy(dtype, s_q, heads, causal):
    h_q, h_kv = heads
    q, kv8, _, bt, sl = make_case([1, 130, 700, 2100], s_q=s_q, h_q=h_q, h_kv=h_kv, dtype=DT[dtype],
                                  seed=(s_q, heads, causal))
    out, lse = run(q, kv8, bt, sl, causal=causal)
    check(q, kv8, bt, sl, out, lse, causal=causal)


@pytest.mark.parametrize("page", [1, 16, 64])
def test_page_sizes(page):
    lens = [0, 1, max(2, page - 1), page, page + 1, 777]
    q, kv8, _, bt, sl = make_case(lens, s_q=2, h_q=16, page=page, seed=page)
    out, lse = run(q, kv8, bt, sl, causal=True)
    check(q, kv8, bt, sl, out, lse, causal=True)


def test_zero_lengths_and_one_long_sequence():
    q, kv8, _, bt, sl = make_case([0, 0], h_q=16, seed=1)
    out, lse = run(q, kv8, bt, sl)
    assert (out == 0).all() and torch.isposinf(lse).all()
    q, kv8, _, bt, sl = make_case([60000], h_q=16, seed=2)
    sched, splits = flash_mla.get_mla_metadata(sl, 16, 1)
    assert int(splits[1]) > 1  # split across parts: the combine runs
    out, lse = run(q, kv8, bt, sl)
    check(q, kv8, bt, sl, out, lse)


@pytest.mark.parametrize("outliers", [False, True])
def test_error_against_the_bf16_cache(outliers):
    """What the quantization costs: out from the FP8 cache against out from the bf16 cache
    it was made from (both through flashkit). Per-128 scales keep an outlier channel's
    damage to its group."""
    q, kv8, kv16, bt, sl = make_case([500, 3000], s_q=1, h_q=64, seed=("vs-bf16", outliers),
                                     outliers=outliers)
    out8, _ = run(q, kv8, bt, sl)
    out16, _ = run(q, kv16, bt, sl)
    rel = ((out8.float() - out16.float()).norm() / out16.float().norm()).item()
    print(f"relative L2 of out, FP8 vs bf16 cache (outliers={outliers}): {rel:.4f}")
    assert rel < 0.08


def test_bad_block_ids_are_skipped_and_reported():
    q, kv8, _, bt, sl = make_case([200, 500, 33], h_q=16, page=16, seed=12)
    bad = bt.clone()
    bad[1, 3] = kv8.shape[0] + 100
    bad[2, 0] = -5
    out, lse = run(q, kv8, bad, sl, expect_errors=4)
    check(q, kv8, bad, sl, out, lse)


def test_interface_graph_and_compile():
    q, kv8, _, bt, sl = make_case([300, 2000], s_q=2, h_q=32, seed=6)
    sched, splits = flash_mla.get_mla_metadata(sl, 64, 1)
    out, lse = flash_mla.flash_mla_with_kvcache(q, kv8, bt, sl, DV, sched, splits, causal=True,
                                                is_fp8_kvcache=True)
    check(q, kv8, bt, sl, out, lse, causal=True)
    # float8_e4m3fn storage of the same bytes
    out2, _ = flash_mla.flash_mla_with_kvcache(q, kv8.view(torch.float8_e4m3fn), bt, sl, DV, sched,
                                               splits, causal=True, is_fp8_kvcache=True)
    assert torch.equal(out, out2)
    # CUDA graph: captured once, replayed with new lengths (metadata re-run inside)
    sl_buf = sl.clone()
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            flash_mla.flash_mla_with_kvcache(q, kv8, bt, sl_buf, DV, *flash_mla.get_mla_metadata(sl_buf, 64, 1),
                                             causal=True, is_fp8_kvcache=True)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(graph):
        g_sched, g_splits = flash_mla.get_mla_metadata(sl_buf, 64, 1)
        g_out, g_lse = flash_mla.flash_mla_with_kvcache(q, kv8, bt, sl_buf, DV, g_sched, g_splits,
                                                        causal=True, is_fp8_kvcache=True)
    sl_buf.copy_(torch.tensor([17, 1999], dtype=torch.int32, device="cuda"))
    poison_(g_out)
    poison_(g_lse)
    flashkit.device_errors(clear=True)
    graph.replay()
    torch.cuda.synchronize()
    assert flashkit.device_errors(clear=True) == 0
    check(q, kv8, bt, sl_buf, g_out, g_lse, causal=True)

    @torch.compile(fullgraph=True)
    def step(q, kv, bt, sl, sched, splits):
        o, l = flash_mla.flash_mla_with_kvcache(q * 1.0, kv, bt, sl, DV, sched, splits,
                                                is_fp8_kvcache=True)
        return o + 0, l

    out, lse = step(q, kv8, bt, sl, sched, splits)
    check(q, kv8, bt, sl, out, lse)


_STAGING_PROBE = r"""
import hashlib, torch, flashkit, flashkit.mla as flash_mla
from flashkit.testing import check_close, mla_pytorch, mla_reference, paged_pool, run_mla_decode_poisoned
g = torch.Generator(device="cuda").manual_seed(21)
out = []
for lens, s_q, h_q, page, causal in (([0, 77, 1000, 5000], 1, 16, 64, False), ([300, 2049], 2, 32, 16, True),
                                     ([64, 1], 4, 128, 1, True)):
    num_pages, bt, slots = paged_pool(lens, page, 2, g)
    kv8 = torch.full((num_pages, page, 1, 656), 0xFF, dtype=torch.uint8, device="cuda")
    for n, at in zip(lens, slots):
        if at is not None:
            x = torch.randn((n, 1, 576), generator=g, device="cuda").to(torch.bfloat16)
            kv8[at] = flash_mla.quantize_kv_cache_fp8(x)
    sl = torch.tensor(lens, dtype=torch.int32, device="cuda")
    q = torch.randn((len(lens), s_q, h_q, 576), generator=g, device="cuda").to(torch.bfloat16)
    # (NaN-poisoned out / lse, the error word checked; then against the reference on the dequantized cache)
    o, lse = run_mla_decode_poisoned(q, kv8, bt, sl, causal)
    kv = flash_mla.dequantize_kv_cache_fp8(kv8, q.dtype)
    res = check_close(o, mla_reference(q, kv, bt, sl, causal)[0], mla_pytorch(q, kv, bt, sl, causal))
    assert res.ok, res.message
    for x in (o, lse):
        out.append(hashlib.sha256(x.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest())
print(" ".join(out))
"""


@pytest.mark.gpu
def test_staged_and_direct_fp8_loads_match_bitwise(run_probe):
    """The portable kernel's two FP8 variants (raw tokens staged one block ahead by
    cp.async where the shared memory allows, or dequantized straight from global memory:
    FLASHKIT_MLA_FP8_SYNC=1, read once, so a subprocess each) write the same bytes into
    the same tile: bitwise equal out and lse (empty, split, page 1 and causal cases)."""
    runs = [run_probe(_STAGING_PROBE, {"FLASHKIT_MLA_FP8_SYNC": v, "FLASHKIT_MLA_FP8_PORTABLE": "1"},
                      ["FLASHKIT_MLA_PORTABLE"]).split()
            for v in ("0", "1")]
    assert len(runs[0]) == 6 and runs[0] == runs[1]


def test_misuse_raises_clear_errors():
    q, kv8, kv16, bt, sl = make_case([100, 200], h_q=16, seed=15)
    sched, splits = flash_mla.get_mla_metadata(sl, 16, 1)
    f = flash_mla.flash_mla_with_kvcache
    with pytest.raises(ValueError, match="is_fp8_kvcache=True"):
        f(q, kv8, bt, sl, DV, sched, splits)  # FP8 bytes without the flag
    with pytest.raises(ValueError, match="656 bytes per token"):
        f(q, kv16.to(torch.bfloat16), bt, sl, DV, sched, splits, is_fp8_kvcache=True)
    with pytest.raises(ValueError, match="656 bytes per token"):
        f(q, kv8[..., :576], bt, sl, DV, sched, splits, is_fp8_kvcache=True)
    with pytest.raises(NotImplementedError, match="indices"):
        f(q, kv8, bt, sl, DV, sched, splits, is_fp8_kvcache=True, indices=bt)
    hopper = torch.cuda.get_device_capability() == (9, 0) and not os.environ.get("FLASHKIT_MLA_PORTABLE")
    assert flash_mla.split_kernel_family(torch.bfloat16, fp8_kv_cache=True) == ("sm90" if hopper else "sm80")
    assert flash_mla.split_kernel_family(torch.float16, fp8_kv_cache=True) == "sm80"
    with pytest.raises(ValueError, match="576"):
        flash_mla.quantize_kv_cache_fp8(kv16[..., :512])


# --- the Hopper kernel's FP8 path (sm90_kernel.cuh, Traits::kFp8) ----------------------------

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
needs_hopper = pytest.mark.skipif(not HOPPER, reason="the FP8 path of the Hopper MLA kernel needs an sm_90 GPU")


def _both_kernels(q, kv8, bt, sl, causal, monkeypatch, expect_errors=0, hopper_runs=True):
    """(out, lse) of the Hopper kernel and of the portable one (FLASHKIT_MLA_FP8_PORTABLE=1, read per
    call), each checked against the reference on the dequantized cache. Each arm's split kernels are read from
    torch.profiler: the Hopper arm must launch `mla_split_kernel` and not the portable `mla_split_sm80_kernel`, and the
    portable arm the reverse, so a launcher that handed the call back could not make the comparison vacuous
    (hopper_runs=False: calls the Hopper kernel has no instantiation for, both arms portable)."""
    res = []
    for portable in (False, True):
        if portable:
            monkeypatch.setenv("FLASHKIT_MLA_FP8_PORTABLE", "1")
        else:
            monkeypatch.delenv("FLASHKIT_MLA_FP8_PORTABLE", raising=False)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            out, lse = run(q, kv8, bt, sl, causal=causal, expect_errors=expect_errors)
        names = {e.name for e in prof.events()}
        ran_sm90 = any("mla_split_kernel<" in n for n in names)
        ran_sm80 = any("mla_split_sm80_kernel" in n for n in names)
        sm90 = hopper_runs and not portable
        assert (ran_sm90, ran_sm80) == (sm90, not sm90), sorted(n for n in names if "mla" in n)
        check(q, kv8, bt, sl, out, lse, causal=causal)
        res.append((out, lse))
    monkeypatch.delenv("FLASHKIT_MLA_FP8_PORTABLE", raising=False)
    return res


FP8_SM90_CASES = [
    # lens, s_q, h_q, h_kv, page, causal
    ([1, 63, 64, 65, 1000], 1, 16, 1, 64, False),
    ([0, 130, 2100, 5000], 2, 128, 1, 64, True),
    ([777, 3, 4096], 4, 16, 1, 128, True),
    ([500, 129, 1], 1, 64, 2, 64, False),
    ([9000, 200], 1, 72, 1, 256, True),
]


@needs_hopper
@pytest.mark.parametrize("case", FP8_SM90_CASES, ids=[f"{c[1]}x{c[2]}x{c[3]}-p{c[4]}-{'c' if c[5] else 'n'}"
                                                       for c in FP8_SM90_CASES])
def test_hopper_fp8_kernel_matches_the_portable_one(case, monkeypatch):
    """The Hopper kernel reads FlashMLA's FP8 cache for bf16 q at pages of multiples of 64 tokens:
    dequantized in place by its converter warpgroup with the portable kernel's arithmetic (e4m3 ->
    fp16 exactly, times the fp32 group scale, rounded to bf16), so both kernels see the same tile.
    Partly filled pages hold 0xFF bytes (NaN e4m3 values and NaN scales) after the last token."""
    lens, s_q, h_q, h_kv, page, causal = case
    assert flash_mla.split_kernel_family(torch.bfloat16, fp8_kv_cache=True) == "sm90"
    if os.environ.get("FLASHKIT_MLA_NO_TMA", "").startswith("1"):  # (dispatch::env_flag's reading)
        # (read once per process: the Hopper FP8 launcher then hands every call to the portable kernel, and this
        # test would compare that kernel with itself)
        pytest.skip("FLASHKIT_MLA_NO_TMA is set: the Hopper FP8 kernel does not run in this process")
    q, kv8, _, bt, sl = make_case(lens, s_q=s_q, h_q=h_q, h_kv=h_kv, page=page, seed=("sm90", case))
    (o9, l9), (o8, l8) = _both_kernels(q, kv8, bt, sl, causal, monkeypatch)
    # different MMA shapes and orders, the same inputs: as close as two bf16 kernels get
    assert torch.isfinite(o9).all()
    err = (o9.float() - o8.float()).abs().max().item()
    assert err <= 2e-2 * o8.float().abs().max().item() + 1e-3, err
    fin = torch.isfinite(l8)
    assert torch.equal(fin, torch.isfinite(l9)) and torch.allclose(l9[fin], l8[fin], atol=1e-3, rtol=1e-4)


@needs_hopper
def test_hopper_fp8_kernel_bad_block_ids(monkeypatch):
    """Block ids out of range at page 64 (whole-block boxes): those tokens are left out and reported, in
    the Hopper kernel as in the portable one."""
    q, kv8, _, bt, sl = make_case([200, 500, 33], h_q=16, page=64, seed=31)
    bad = bt.clone()
    bad[1, 3] = kv8.shape[0] + 100
    bad[2, 0] = -5
    _both_kernels(q, kv8, bad, sl, False, monkeypatch, expect_errors=4)


@needs_hopper
def test_hopper_fp8_kernel_falls_back_where_it_has_no_kernel(monkeypatch):
    """fp16 q and pages that are not multiples of 64 tokens go to the portable kernel (same results
    with FLASHKIT_MLA_FP8_PORTABLE=1, bitwise)."""
    for dtype, page in ((torch.float16, 64), (torch.bfloat16, 32)):
        q, kv8, _, bt, sl = make_case([100, 700], s_q=2, h_q=16, page=page, dtype=dtype, seed=("fb", page))
        (a, la), (b, lb) = _both_kernels(q, kv8, bt, sl, True, monkeypatch, hopper_runs=False)
        assert torch.equal(a, b) and torch.equal(la, lb)
