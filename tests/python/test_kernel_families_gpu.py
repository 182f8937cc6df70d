"""Both forward kernel families on one GPU.

On compute capability 9.0 (H100/H200) the dispatcher runs the Hopper (sm90, wgmma) kernel
for the head dims that have one and the portable (sm80) kernel for the others; every
other GPU runs the portable kernel. FLASHKIT_FWD_PORTABLE=1 forces the portable kernel, so
on a Hopper GPU the main GPU tests cover the sm90 family and the subprocess below covers
the sm80 family for every head dim (scripts/sanitize_small.py compares each case with the
reference and exits non-zero on any mismatch; its cases include sliding windows and
softcaps). The window and softcap instantiations (kMods) are separate kernels in both
families, so the window/softcap forward tests of test_attention_gpu.py are rerun in a
subprocess with FLASHKIT_FWD_PORTABLE=1 when the main run used the sm90 family.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DTYPES = ("float16", "bfloat16")


def _families(flashkit_ext):
    kernels = set(flashkit_ext.compiled_fwd_kernels())
    variants = flashkit_ext.compiled_fwd_variants()
    assert variants, "no forward variant compiled"
    assert {f"sm80/{v}" for v in variants} <= kernels, "every variant has a portable kernel"
    return kernels, variants


@pytest.mark.gpu
def test_dispatch_picks_the_family_the_build_and_device_allow(flashkit_ext):
    import torch

    kernels, variants = _families(flashkit_ext)
    hopper = torch.cuda.get_device_capability() == (9, 0)
    forced = os.environ.get("FLASHKIT_FWD_PORTABLE") == "1"
    for v in variants:
        dtype, d = v.split("/")
        want = "sm90" if hopper and not forced and f"sm90/{v}" in kernels else "sm80"
        assert flashkit_ext.fwd_kernel_family(dtype, int(d)) == want, v


def test_family_of_uncompiled_variant_is_empty(flashkit_ext):
    assert flashkit_ext.fwd_kernel_family("float16", 40) == ""
    with pytest.raises(ValueError):
        flashkit_ext.fwd_kernel_family("float32", 64)


@pytest.mark.gpu
def test_portable_family_matches_reference(portable_sanitize_small):
    portable_sanitize_small({})


@pytest.mark.gpu
def test_window_and_softcap_portable_family(flashkit_ext):
    """test_attention_gpu.py's window/softcap tests (bf16 and the dtype-free ones, to keep
    the time down) on the portable kernels: a pytest subprocess with FLASHKIT_FWD_PORTABLE=1.
    Skipped where the main run already used them (not a Hopper GPU, or no sm90 kernel)."""
    import torch

    kernels = set(flashkit_ext.compiled_fwd_kernels())
    if torch.cuda.get_device_capability() != (9, 0) or not any(
            k.startswith("sm90/") for k in kernels):
        pytest.skip("the main run already used the portable (sm80) family")
    if os.environ.get("FLASHKIT_FWD_PORTABLE") == "1":
        pytest.skip("this process already runs the portable family")
    env = dict(os.environ, FLASHKIT_FWD_PORTABLE="1")
    env.pop("PYTEST_ADDOPTS", None)  # junit paths etc. of the outer run
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
           str(REPO / "tests" / "python" / "test_attention_gpu.py"),
           "-k", "(window or softcap) and not fp16"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600,
                       cwd=str(REPO / "tests" / "python"))
    assert r.returncode == 0, f"portable window/softcap tests failed:\n{r.stdout[-6000:]}\n" \
                              f"{r.stderr[-2000:]}"
    last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    assert "passed" in last, r.stdout[-2000:]


_TMA_PROBE = r"""
import hashlib, torch, flashkit
g = torch.Generator(device="cuda").manual_seed(11)
out = []
for dtype in (torch.bfloat16, torch.float16):
    for D in (64, 96, 128, 192, 256):
        for causal in (False, True):
            # S_k = 1000: the last key tile runs past the end (tile 0 of the walk, cp.async);
            # GQA 4/2; a strided (non-contiguous) K from a wider buffer
            q = torch.randn(2, 300, 4, D, device="cuda", dtype=dtype, generator=g)
            kb = torch.randn(2, 1000, 2, D + 64, device="cuda", dtype=dtype, generator=g)
            k = kb[..., :D]
            v = torch.randn(2, 1000, 2, D, device="cuda", dtype=dtype, generator=g)
            o, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
            out.append(hashlib.sha256(o.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest())
            # varlen: sequences of 0, 129, 700 keys packed (the rows after a sequence belong
            # to the next one: the TMA tiles must never reach them)
            cu = torch.tensor([0, 0, 129, 829], device="cuda", dtype=torch.int32)
            qv = torch.randn(829, 4, D, device="cuda", dtype=dtype, generator=g)
            kv = torch.randn(829, 2, D, device="cuda", dtype=dtype, generator=g)
            vv = torch.randn(829, 2, D, device="cuda", dtype=dtype, generator=g)
            ov = flashkit.attention_varlen(qv, kv, vv, cu, cu, 700, 700, causal=causal)
            out.append(hashlib.sha256(ov.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest())
            # many more tiles than SMs (a persistent CTA walks ~10 of them: the barrier phases,
            # Q's release and the turns run across tiles), sequences of 0..600 keys, GQA 8/2
            lens = torch.randint(0, 601, (40,), generator=torch.Generator().manual_seed(D))
            cu = torch.zeros(41, dtype=torch.int32)
            cu[1:] = torch.cumsum(lens, 0)
            cu = cu.cuda()
            n = int(cu[-1])
            qv = torch.randn(n, 8, D, device="cuda", dtype=dtype, generator=g)
            kv = torch.randn(n, 2, D, device="cuda", dtype=dtype, generator=g)
            vv = torch.randn(n, 2, D, device="cuda", dtype=dtype, generator=g)
            ov, lv = flashkit.attention_varlen(qv, kv, vv, cu, cu, 600, 600, causal=causal, return_lse=True)
            out.append(hashlib.sha256(ov.contiguous().view(torch.uint8).cpu().numpy().tobytes() +
                                      lv.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest())
        # causal with S_q > S_k: whole 128-row blocks see no key (the early exit writes 0 to
        # every row, NaN-poisoned first); varlen: a sequence with queries and no keys
        q = torch.randn(1, 1000, 2, D, device="cuda", dtype=dtype, generator=g)
        k = torch.randn(1, 300, 2, D, device="cuda", dtype=dtype, generator=g)
        v = torch.randn(1, 300, 2, D, device="cuda", dtype=dtype, generator=g)
        junk = torch.full_like(q, float("nan"))  # freed: the output reuses its block (caching allocator)
        del junk
        o, lse = flashkit.attention(q, k, v, causal=True, return_lse=True)
        assert not o.isnan().any()
        out.append(hashlib.sha256(o.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest())
        cq = torch.tensor([0, 200, 456], device="cuda", dtype=torch.int32)
        ck = torch.tensor([0, 0, 300], device="cuda", dtype=torch.int32)
        qv = torch.randn(456, 2, D, device="cuda", dtype=dtype, generator=g)
        kv = torch.randn(300, 2, D, device="cuda", dtype=dtype, generator=g)
        vv = torch.randn(300, 2, D, device="cuda", dtype=dtype, generator=g)
        junk = torch.full_like(qv, float("nan"))
        del junk
        ov = flashkit.attention_varlen(qv, kv, vv, cq, ck, 256, 300)
        assert not ov.isnan().any()
        out.append(hashlib.sha256(ov.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest())
        # varlen: the rows after sequence 0 (200 keys: a partial key tile) hold inf / nan in
        # K and V; sequence 0's output must not see them (a TMA tile runs into those rows)
        cu = torch.tensor([0, 200, 456], device="cuda", dtype=torch.int32)
        qv = torch.randn(456, 2, D, device="cuda", dtype=dtype, generator=g)
        kv = torch.randn(456, 2, D, device="cuda", dtype=dtype, generator=g)
        vv = torch.randn(456, 2, D, device="cuda", dtype=dtype, generator=g)
        kv[200:260] = float("nan")
        vv[200:230] = float("inf")
        vv[230:260] = float("nan")
        ov = flashkit.attention_varlen(qv, kv, vv, cu, cu, 256, 256)[:200]
        assert ov.isfinite().all()
        out.append(hashlib.sha256(ov.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest())
print(" ".join(out))
"""


@pytest.mark.gpu
def test_sm90_tma_loads_match_cp_async_bitwise(flashkit_ext, run_probe):
    """The Hopper forward loads its K/V tiles after the first by TMA from a producer
    warpgroup (FLASHKIT_FWD_PERSISTENT=0), with cp.async (FLASHKIT_FWD_NO_TMA=1), or runs
    persistent CTAs that load Q and every K/V tile by TMA (FLASHKIT_FWD_PERSISTENT=1; by
    default where use_persistent says so) and store O by TMA (or with the threads:
    FLASHKIT_FWD_TMA_STORE=0); each switch is read once,
    so a subprocess each. The shared-memory tiles hold the same values every way and the
    math is the same, so the outputs must be bitwise equal: dense and varlen, every head
    dim, both dtypes, causal and not, a strided K, rows that see no key, and a varlen
    sequence followed by rows of inf/nan."""
    import torch

    kernels = set(flashkit_ext.compiled_fwd_kernels())
    if torch.cuda.get_device_capability() != (9, 0) or "sm90/bfloat16/128" not in kernels:
        pytest.skip("no Hopper forward on this GPU / build")
    # the TMA runs must really use TMA where the variant exists (a failed map would silently
    # fall back). D 64: the one-CTA kernels of two consumer warpgroups in the first two runs (the
    # producer warpgroup's TMA kernel, then the cp.async one), the persistent kernel of three
    # consumer warpgroups in the others
    drop = ["FLASHKIT_FWD_PORTABLE", "FLASHKIT_FWD_NO_TMA", "FLASHKIT_FWD_REQUIRE_TMA", "FLASHKIT_FWD_PERSISTENT",
            "FLASHKIT_FWD_TMA_STORE", "FLASHKIT_FWD_D64_WG3"]
    runs = [run_probe(_TMA_PROBE, {"FLASHKIT_FWD_REQUIRE_TMA": "1", "FLASHKIT_FWD_PERSISTENT": "0"}, drop).split(),
            run_probe(_TMA_PROBE, {"FLASHKIT_FWD_NO_TMA": "1"}, drop).split(),
            run_probe(_TMA_PROBE, {"FLASHKIT_FWD_REQUIRE_TMA": "1", "FLASHKIT_FWD_PERSISTENT": "1"}, drop).split(),
            # the persistent kernel's epilogue with thread stores instead of TMA stores
            run_probe(_TMA_PROBE, {"FLASHKIT_FWD_REQUIRE_TMA": "1", "FLASHKIT_FWD_PERSISTENT": "1",
                                   "FLASHKIT_FWD_TMA_STORE": "0"}, drop).split()]
    assert len(runs[0]) == 90
    assert runs[0] == runs[1], "TMA variant != cp.async kernel"
    assert runs[2] == runs[1], "persistent kernel != cp.async kernel"
    assert runs[3] == runs[2], "persistent kernel, thread-store epilogue != TMA-store epilogue"


# The start of the cluster and grid TMA-store probes: a digest of tensors, and dense inputs with a strided K whose
# output block was poisoned (NaN) just before, so that the call must write every element.
_DENSE_PROBE_HELPERS = r"""
import hashlib, torch, flashkit
def h(*ts):
    return hashlib.sha256(b"".join(t.contiguous().view(torch.uint8).cpu().numpy().tobytes() for t in ts)).hexdigest()
def strided_inputs(B, Sq, Sk, Hq, Hkv, D, dtype, g):
    q = torch.randn(B, Sq, Hq, D, device="cuda", dtype=dtype, generator=g)
    kb = torch.randn(B, Sk, Hkv, D + 64, device="cuda", dtype=dtype, generator=g)
    k = kb[..., :D]  # (strided)
    v = torch.randn(B, Sk, Hkv, D, device="cuda", dtype=dtype, generator=g)
    junk = torch.full((B, Sq, Hq, D), float("nan"), device="cuda", dtype=dtype)
    del junk  # (the output reuses its block: every row must be written)
    return q, k, v
"""


_CLUSTER_PROBE = _DENSE_PROBE_HELPERS + r"""
import torch.nn.functional as F
g = torch.Generator(device="cuda").manual_seed(11)
out = []
for dtype in (torch.bfloat16, torch.float16):
    for D in (96, 128, 192):
        # (B, S_q, S_k, H_q, H_kv, causal). Clusters take the calls without a mask whose row blocks are even in number:
        # 2 blocks; 8 with a partial last one (1000 rows) over 77 keys (a partial key tile: the upper half of the
        # multicast box lies past the end); one key; 256 units over at most 66 clusters (each walks several, the
        # 32-tile K / V ring wraps); GQA. The others (3 blocks; causal) run one CTA per SM in both processes.
        for B, Sq, Sk, Hq, Hkv, causal in ((2, 256, 1000, 4, 2, False), (1, 1000, 77, 8, 2, False),
                                          (3, 256, 1, 4, 4, False), (4, 1024, 4096, 16, 4, False),
                                          (2, 384, 500, 4, 2, False), (2, 512, 512, 4, 2, True)):
            q, k, v = strided_inputs(B, Sq, Sk, Hq, Hkv, D, dtype, g)
            o, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
            out.append(h(o, lse))
            if B * Sq * Sk * Hq <= 2 ** 22:  # the fp32 reference where it is cheap
                qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))
                kf = kf.repeat_interleave(Hq // Hkv, dim=1)
                vf = vf.repeat_interleave(Hq // Hkv, dim=1)
                ref = F.scaled_dot_product_attention(qf, kf, vf, is_causal=causal).transpose(1, 2)
                err = (o.float() - ref).abs().max().item()
                assert err < 2e-2, (str(dtype), D, B, Sq, Sk, Hq, Hkv, causal, err)
print(" ".join(out))
"""


@pytest.mark.gpu
def test_sm90_cluster_multicast_matches_single_cta_bitwise(flashkit_ext, run_probe):
    """FLASHKIT_FWD_CLUSTER=1: calls without a mask whose row blocks are even in number run in clusters of two CTAs
    that share every K / V tile by TMA multicast, each CTA one row block of a pair (kernel_persistent.cuh kCluster).
    Same tiles, same MMAs in the same order as one CTA per SM, so the outputs and LSEs are bitwise equal; with
    FLASHKIT_FWD_REQUIRE_TMA=1 a cluster that cannot be placed is an error, not a silent fallback. D 96 / 128 / 192,
    both dtypes, partial and single-key tiles, many units per cluster, GQA, a strided K, NaN-poisoned outputs, the
    fp32 reference; calls the clusters do not take (odd row blocks, causal) in the same run."""
    import torch

    kernels = set(flashkit_ext.compiled_fwd_kernels())
    if torch.cuda.get_device_capability() != (9, 0) or not {f"sm90/{t}/{d}" for t in ("bfloat16", "float16")
                                                             for d in (96, 128, 192)} <= kernels:
        pytest.skip("no Hopper forward at D 96 / 128 / 192 on this GPU / build")
    drop = ["FLASHKIT_FWD_PORTABLE", "FLASHKIT_FWD_NO_TMA", "FLASHKIT_FWD_PERSISTENT", "FLASHKIT_FWD_CLUSTER",
            "FLASHKIT_FWD_TMA_STORE"]
    single = run_probe(_CLUSTER_PROBE, {"FLASHKIT_FWD_REQUIRE_TMA": "1", "FLASHKIT_FWD_CLUSTER": "0"}, drop).split()
    pairs = run_probe(_CLUSTER_PROBE, {"FLASHKIT_FWD_REQUIRE_TMA": "1", "FLASHKIT_FWD_CLUSTER": "1"}, drop).split()
    assert len(single) == 36
    assert pairs == single, "clusters of two != one CTA per SM"


_GRID_TMA_STORE_PROBE = _DENSE_PROBE_HELPERS + r"""
import itertools
from flashkit.testing import attention_reference
g = torch.Generator(device="cuda").manual_seed(13)
out = []
def ref(q, k, v, causal, window=(-1, -1), softcap=0.0):
    return attention_reference(q, k, v, causal=causal, window=window, softcap=softcap)[0]
for dtype in (torch.bfloat16, torch.float16):
    # The non-persistent TMA kernel: D 256 without a mask and causal past 512 rows; D 96 / 128 / 192 causal past 64
    # row blocks. Partial last row blocks (1000, 8200 rows: the map clips them), one row, GQA, a strided K, a window,
    # a softcap, NaN-poisoned outputs.
    for D, B, Sq, Sk, Hq, Hkv, causal, window, cap in (
            (256, 2, 256, 1000, 4, 2, False, (-1, -1), 0.0), (256, 1, 1000, 77, 8, 2, False, (-1, -1), 0.0),
            (256, 3, 1, 5, 4, 4, False, (-1, -1), 0.0), (256, 2, 1024, 1024, 4, 2, True, (-1, -1), 0.0),
            (256, 1, 700, 900, 4, 4, True, (300, -1), 0.0), (256, 2, 640, 640, 2, 1, False, (-1, -1), 30.0),
            (128, 1, 8320, 8320, 2, 1, True, (-1, -1), 0.0), (96, 1, 8200, 8200, 1, 1, True, (-1, -1), 0.0),
            (192, 1, 8320, 8320, 1, 1, True, (-1, -1), 0.0)):
        q, k, v = strided_inputs(B, Sq, Sk, Hq, Hkv, D, dtype, g)
        o, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True, window=window, softcap=cap)
        out.append(h(o, lse))
        if B * Sq * Sk * Hq <= 2 ** 22:  # the fp32 reference where it is cheap
            err = (o.float() - ref(q, k, v, causal, window, cap)).abs().max().item()
            assert err < 2e-2, (str(dtype), D, B, Sq, Sk, Hq, Hkv, causal, window, cap, err)
        else:
            assert torch.isfinite(o).all().item(), (str(dtype), D, Sq)
    # varlen D 256 without a mask: full row blocks store by TMA, partial ones (and an empty sequence) with the threads
    lens = [300, 128, 0, 1, 700, 256]
    cu = torch.tensor([0, *itertools.accumulate(lens)], dtype=torch.int32, device="cuda")
    n = int(cu[-1])
    qv = torch.randn(n, 4, 256, device="cuda", dtype=dtype, generator=g)
    kv = torch.randn(n, 2, 256, device="cuda", dtype=dtype, generator=g)
    vv = torch.randn(n, 2, 256, device="cuda", dtype=dtype, generator=g)
    junk = torch.full((n, 4, 256), float("nan"), device="cuda", dtype=dtype)
    del junk
    ov = flashkit.attention_varlen(qv, kv, vv, cu, cu, max(lens), max(lens))
    out.append(h(ov))
    for i, L in enumerate(lens):
        if L:
            a, b = int(cu[i]), int(cu[i + 1])
            r = ref(qv[None, a:b], kv[None, a:b], vv[None, a:b], False)[0]
            err = (ov[a:b].float() - r).abs().max().item()
            assert err < 2e-2, (str(dtype), "varlen", i, L, err)
print(" ".join(out))
"""


@pytest.mark.gpu
def test_sm90_grid_tma_store_matches_thread_stores_bitwise(flashkit_ext, run_probe):
    """FLASHKIT_FWD_GRID_TMA_STORE=1: the non-persistent TMA forward kernel (fwd_kernel<.., kTma>: D 256, and causal
    calls of more than 64 row blocks at D 96 / 128 / 192) stores O by TMA from its staging tile instead of the
    threads' 16-byte stores. Same staged bytes, so the outputs and LSEs are bitwise those of the thread stores;
    fixed-length partial row blocks (the map clips them at each sequence's end), varlen blocks (full ones by TMA,
    partial ones with the threads), windows, softcaps, GQA, both dtypes, NaN-poisoned outputs, the fp32 reference.
    With FLASHKIT_FWD_REQUIRE_TMA=1 an O map that cannot be made fails the call, so the switch's run does store by
    TMA wherever a block's rows allow it (not a silent fallback to the thread stores)."""
    import torch

    kernels = set(flashkit_ext.compiled_fwd_kernels())
    if torch.cuda.get_device_capability() != (9, 0) or not {f"sm90/{t}/{d}" for t in ("bfloat16", "float16")
                                                             for d in (96, 128, 192, 256)} <= kernels:
        pytest.skip("no Hopper forward at D 96 / 128 / 192 / 256 on this GPU / build")
    drop = ["FLASHKIT_FWD_PORTABLE", "FLASHKIT_FWD_NO_TMA", "FLASHKIT_FWD_PERSISTENT", "FLASHKIT_FWD_TMA_STORE",
            "FLASHKIT_FWD_GRID_TMA_STORE", "FLASHKIT_FWD_MODS_CP_ASYNC"]
    threads = run_probe(_GRID_TMA_STORE_PROBE, {"FLASHKIT_FWD_REQUIRE_TMA": "1", "FLASHKIT_FWD_GRID_TMA_STORE": "0"},
                        drop).split()
    tma = run_probe(_GRID_TMA_STORE_PROBE, {"FLASHKIT_FWD_REQUIRE_TMA": "1", "FLASHKIT_FWD_GRID_TMA_STORE": "1"},
                    drop).split()
    assert len(threads) == 20
    assert tma == threads, "TMA stores != thread stores"


_WALK_ROTATE_PROBE = r"""
import hashlib, torch, flashkit
g = torch.Generator(device="cuda").manual_seed(7)
out = []
sms = torch.cuda.get_device_properties(0).multi_processor_count
# causal calls whose persistent walk has more units than CTAs and U units per (batch, head) pair
# (pairs of row blocks: 192-row blocks at D 64, 128-row ones otherwise) with U dividing the SM count:
# the launcher rotates them (launch/fwd_sched.h fwd_walk_rotate); printed: U and whether it divides
for dtype in (torch.bfloat16, torch.float16):
    for D, B, H, S, bm in ((64, 4, 12, 1024, 192), (64, 1, 24, 2048, 192), (64, 2, 8, 4096, 192),
                           (128, 1, 40, 1024, 128), (96, 3, 12, 512, 128), (192, 1, 36, 768, 128)):
        u = ((S + bm - 1) // bm + 1) // 2
        q = torch.randn(B, S, H, D, device="cuda", dtype=dtype, generator=g)
        k = torch.randn(B, S, H // 4 if H % 4 == 0 else H, D, device="cuda", dtype=dtype, generator=g)
        v = torch.randn(k.shape, device="cuda", dtype=k.dtype, generator=g)
        o, lse = flashkit.attention(q, k, v, causal=True, return_lse=True)
        out.append(f"{D}:{u}:{int(sms % u == 0 and B * H * u > sms)}:" +
                   hashlib.sha256(o.view(torch.uint8).cpu().numpy().tobytes() +
                                  lse.view(torch.uint8).cpu().numpy().tobytes()).hexdigest()[:16])
    # varlen causal: 60 sequences of 400-600 tokens (num_m_blocks from the longest)
    lens = torch.randint(400, 601, (60,), generator=torch.Generator().manual_seed(3))
    cu = torch.zeros(61, dtype=torch.int32)
    cu[1:] = torch.cumsum(lens, 0)
    cu = cu.cuda()
    n = int(cu[-1])
    for D in (64, 128):
        qv = torch.randn(n, 8, D, device="cuda", dtype=dtype, generator=g)
        kv = torch.randn(n, 2, D, device="cuda", dtype=dtype, generator=g)
        vv = torch.randn(n, 2, D, device="cuda", dtype=dtype, generator=g)
        ov = flashkit.attention_varlen(qv, kv, vv, cu, cu, 600, 600, causal=True)
        out.append(f"v{D}:" + hashlib.sha256(ov.view(torch.uint8).cpu().numpy().tobytes()).hexdigest()[:16])
print(" ".join(out))
"""


@pytest.mark.gpu
def test_sm90_walk_rotation_bitwise(flashkit_ext, run_probe):
    """The persistent forward's causal walk with each pair's units rotated by the round
    (FwdParams::walk_rotate, the default where launch/fwd_sched.h allows it) computes the same
    tiles as the snake walk without it (FLASHKIT_FWD_WALK_ROTATE=0): bitwise equal outputs and
    LSE, dense (D 64's 192-row units and the 128-row ones) and varlen. The probe's shapes are
    chosen so that U divides the SM count with more units than CTAs, the launcher's condition
    (launch/fwd_sched.h fwd_walk_rotate, tested in tests/cpp/test_fwd_sched.cpp with the kernel's
    own decode); the flags below restate that choice for this GPU, they do not observe the
    launcher (no hook reports walk_rotate)."""
    import torch

    kernels = set(flashkit_ext.compiled_fwd_kernels())
    if torch.cuda.get_device_capability() != (9, 0) or "sm90/bfloat16/128" not in kernels:
        pytest.skip("no Hopper forward on this GPU / build")
    drop = ["FLASHKIT_FWD_PORTABLE", "FLASHKIT_FWD_NO_TMA", "FLASHKIT_FWD_PERSISTENT", "FLASHKIT_FWD_D64_WG3",
            "FLASHKIT_FWD_SCHED_GROUP", "FLASHKIT_FWD_WALK_ROTATE"]
    on = run_probe(_WALK_ROTATE_PROBE, {}, drop).split()
    off = run_probe(_WALK_ROTATE_PROBE, {"FLASHKIT_FWD_WALK_ROTATE": "0"}, drop).split()
    assert len(on) == 16 and on == off
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if sms % 6 == 0:  # (H100 / H200 SXM: 132) the shape choice: D 64 at 1k and 2k meet the rotation's condition
        assert sum(x.split(":")[2] == "1" for x in on if not x.startswith("v")) >= 4


_D64_EDGE_PROBE = r"""
import hashlib, sys, torch, flashkit
from flashkit.testing import (attention_pytorch, attention_reference, check_close, check_lse,
                              check_written, poison_)
g = torch.Generator(device="cuda").manual_seed(64)
stream = torch.cuda.current_stream().cuda_stream
out, bad = [], []
# query lengths around the 192-row tiles of the three-warpgroup kernel and its 64-row
# warpgroups (1, a partial warpgroup, whole ones, one row past a tile), key lengths equal,
# longer and shorter (bottom-right causal: rows that see no key), GQA 4/1 and MHA
for dt in (torch.bfloat16, torch.float16):
    for s_q in (1, 63, 65, 191, 192, 193, 383, 385, 577):
        for s_k in sorted({s_q, s_q + 77, max(1, s_q - 50)}):
            for causal in (False, True):
                hq, hkv = (4, 1) if (s_q + s_k) % 2 else (2, 2)
                q = torch.randn(2, s_q, hq, 64, device="cuda", dtype=dt, generator=g)
                k = torch.randn(2, s_k, hkv, 64, device="cuda", dtype=dt, generator=g)
                v = torch.randn(2, s_k, hkv, 64, device="cuda", dtype=dt, generator=g)
                o = poison_(torch.empty_like(q))
                lse = poison_(torch.empty(2, hq, s_q, device="cuda", dtype=torch.float32))
                flashkit._C.attention_fwd(q, k, v, o, lse=lse, causal=causal, stream=stream)
                torch.cuda.synchronize()
                qc, kc, vc = q.cpu(), k.cpu(), v.cpu()
                ref, lse_ref = attention_reference(qc, kc, vc, causal=causal, compute_dtype=torch.float64)
                pt = attention_pytorch(qc, kc, vc, causal=causal)
                for r in (check_written(o, ref), check_close(o.cpu(), ref, pt), check_lse(lse, lse_ref)):
                    if not r.ok:
                        bad.append(f"{dt} s_q={s_q} s_k={s_k} causal={causal}: {r.message}")
                out.append(hashlib.sha256(o.view(torch.uint8).cpu().numpy().tobytes() +
                                          lse.view(torch.uint8).cpu().numpy().tobytes()).hexdigest())
# windows (causal and two-sided) and softcaps: the kMods instantiations of both kernels
for dt in (torch.bfloat16, torch.float16):
    for s_q, s_k in ((65, 65), (193, 300), (385, 385), (577, 500), (1000, 1000)):
        for causal, window, cap in ((True, (64, -1), 0.0), (False, (100, 50), 0.0), (True, (-1, -1), 5.0),
                                    (False, (37, 0), 5.0)):
            q = torch.randn(2, s_q, 4, 64, device="cuda", dtype=dt, generator=g) * (4.0 if cap else 1.0)
            k = torch.randn(2, s_k, 2, 64, device="cuda", dtype=dt, generator=g)
            v = torch.randn(2, s_k, 2, 64, device="cuda", dtype=dt, generator=g)
            o = poison_(torch.empty_like(q))
            lse = poison_(torch.empty(2, 4, s_q, device="cuda", dtype=torch.float32))
            flashkit._C.attention_fwd(q, k, v, o, lse=lse, causal=causal, stream=stream, window_left=window[0],
                                      window_right=window[1], softcap=cap)
            torch.cuda.synchronize()
            qc, kc, vc = q.cpu(), k.cpu(), v.cpu()
            ref, lse_ref = attention_reference(qc, kc, vc, causal=causal, compute_dtype=torch.float64,
                                               window=window, softcap=cap)
            pt = attention_pytorch(qc, kc, vc, causal=causal, window=window, softcap=cap)
            for r in (check_written(o, ref), check_close(o.cpu(), ref, pt), check_lse(lse, lse_ref)):
                if not r.ok:
                    bad.append(f"{dt} s_q={s_q} s_k={s_k} causal={causal} window={window} softcap={cap}: "
                               f"{r.message}")
            out.append(hashlib.sha256(o.view(torch.uint8).cpu().numpy().tobytes() +
                                      lse.view(torch.uint8).cpu().numpy().tobytes()).hexdigest())
if bad:
    sys.exit("\n".join(bad[:20]))
print(" ".join(out))
"""


@pytest.mark.gpu
def test_sm90_d64_three_warpgroups_edges(flashkit_ext, run_probe):
    """d64 on Hopper runs 192-row tiles of three consumer warpgroups (windows and softcaps
    on its kMods instantiation); FLASHKIT_FWD_D64_WG3=0 runs the one-CTA kernels of two
    consumer warpgroups and 128-row tiles instead. Query lengths around both tile sizes and their 64-row warpgroups (warpgroups
    whose rows lie past the end, or see no key under a bottom-right causal mask, skip their
    MMAs): each run must pass the reference checks into NaN-poisoned out/lse, and the two
    kernels must agree bitwise (the same MMAs and softmax per row)."""
    import torch

    kernels = set(flashkit_ext.compiled_fwd_kernels())
    if torch.cuda.get_device_capability() != (9, 0) or "sm90/bfloat16/64" not in kernels:
        pytest.skip("no Hopper d64 forward on this GPU / build")
    drop = ["FLASHKIT_FWD_PORTABLE", "FLASHKIT_FWD_NO_TMA", "FLASHKIT_FWD_REQUIRE_TMA", "FLASHKIT_FWD_PERSISTENT",
            "FLASHKIT_FWD_TMA_STORE", "FLASHKIT_FWD_D64_WG3"]
    three = run_probe(_D64_EDGE_PROBE, {"FLASHKIT_FWD_REQUIRE_TMA": "1"}, drop).split()
    two = run_probe(_D64_EDGE_PROBE, {"FLASHKIT_FWD_D64_WG3": "0"}, drop).split()  # two warpgroups
    assert len(three) == 2 * 2 * (2 + 8 * 3) + 2 * 5 * 4  # + windows / softcaps: dtypes x shapes x modes
    assert three == two, "d64: three-warpgroup kernel != two-warpgroup kernel"


_MODS_PROBE = r"""
import hashlib, sys, torch, flashkit
from flashkit.testing import (attention_pytorch, attention_reference, check_close, check_lse,
                              check_written, poison_)
g = torch.Generator(device="cuda").manual_seed(96)
stream = torch.cuda.current_stream().cuda_stream
out, bad = [], []
# windows (causal and two-sided, one skipping whole key tiles), a right bound only and softcaps
# at the head dims of the producer-warpgroup kernels, around their 128-row tiles and 64/128-key
# tiles (by default D 96-192 run the persistent kernel here, D 256 the non-persistent one)
for D in (96, 128, 192, 256):
    for dt in (torch.bfloat16, torch.float16):
        for s_q, s_k in ((1, 300), (65, 65), (129, 300), (300, 129), (1000, 1000)):
            for causal, window, cap in ((True, (200, -1), 0.0), (False, (100, 50), 0.0), (False, (-1, 0), 0.0),
                                        (True, (-1, -1), 20.0), (False, (64, 0), 20.0)):
                q = torch.randn(2, s_q, 4, D, device="cuda", dtype=dt, generator=g) * (4.0 if cap else 1.0)
                k = torch.randn(2, s_k, 2, D, device="cuda", dtype=dt, generator=g)
                v = torch.randn(2, s_k, 2, D, device="cuda", dtype=dt, generator=g)
                o = poison_(torch.empty_like(q))
                lse = poison_(torch.empty(2, 4, s_q, device="cuda", dtype=torch.float32))
                flashkit._C.attention_fwd(q, k, v, o, lse=lse, causal=causal, stream=stream,
                                          window_left=window[0], window_right=window[1], softcap=cap)
                torch.cuda.synchronize()
                if s_q <= 300:  # (the reference of the 1000-row cases is slow on the CPU)
                    qc, kc, vc = q.cpu(), k.cpu(), v.cpu()
                    ref, lse_ref = attention_reference(qc, kc, vc, causal=causal, compute_dtype=torch.float64,
                                                       window=window, softcap=cap)
                    pt = attention_pytorch(qc, kc, vc, causal=causal, window=window, softcap=cap)
                    for r in (check_written(o, ref), check_close(o.cpu(), ref, pt), check_lse(lse, lse_ref)):
                        if not r.ok:
                            bad.append(f"D{D} {dt} s_q={s_q} s_k={s_k} causal={causal} window={window} "
                                       f"softcap={cap}: {r.message}")
                elif not (o.isfinite().all() and lse.isfinite().all()):
                    bad.append(f"D{D} {dt} s_q={s_q} causal={causal} window={window} softcap={cap}: not written")
                out.append(hashlib.sha256(o.view(torch.uint8).cpu().numpy().tobytes() +
                                          lse.view(torch.uint8).cpu().numpy().tobytes()).hexdigest())
if bad:
    sys.exit("\n".join(bad[:20]))
print(" ".join(out))
"""


@pytest.mark.gpu
def test_sm90_mods_on_tma_kernels(flashkit_ext, run_probe):
    """Windows and softcaps at D 96-256 on Hopper run the producer-warpgroup kernels' kMods
    instantiations (persistent or not, as the other calls; FLASHKIT_FWD_PERSISTENT=0 forces the
    non-persistent one); FLASHKIT_FWD_MODS_CP_ASYNC=1 keeps them on the cp.async kernel's. Each
    run must pass the reference checks into NaN-poisoned out/lse (FLASHKIT_FWD_REQUIRE_TMA: no
    silent fallback), and the three must agree bitwise."""
    import torch

    kernels = set(flashkit_ext.compiled_fwd_kernels())
    if torch.cuda.get_device_capability() != (9, 0) or "sm90/bfloat16/128" not in kernels:
        pytest.skip("no Hopper forward on this GPU / build")
    drop = ["FLASHKIT_FWD_PORTABLE", "FLASHKIT_FWD_NO_TMA", "FLASHKIT_FWD_REQUIRE_TMA", "FLASHKIT_FWD_PERSISTENT",
            "FLASHKIT_FWD_TMA_STORE", "FLASHKIT_FWD_MODS_CP_ASYNC"]
    tma = run_probe(_MODS_PROBE, {"FLASHKIT_FWD_REQUIRE_TMA": "1"}, drop).split()
    flat = run_probe(_MODS_PROBE, {"FLASHKIT_FWD_REQUIRE_TMA": "1", "FLASHKIT_FWD_PERSISTENT": "0"}, drop).split()
    cp = run_probe(_MODS_PROBE, {"FLASHKIT_FWD_MODS_CP_ASYNC": "1"}, drop).split()
    assert len(tma) == 4 * 2 * 5 * 5  # head dims x dtypes x shapes x modes
    assert tma == cp, "windows / softcaps: TMA kernels (default dispatch) != cp.async kernel"
    assert flat == cp, "windows / softcaps: non-persistent TMA kernel != cp.async kernel"
