"""Both backward kernel families on one GPU.

On compute capability 9.0 the dispatcher runs the Hopper (sm90, wgmma) backward for every
head dim it has (64, 96, 128, 192, 256: D 96 and 192 on the tiles of D 128 and 256) and the
portable (sm80) kernel for the others. The main
GPU tests (test_backward_gpu.py) therefore cover the sm90 family on a Hopper GPU; the
subprocess below runs scripts/sanitize_bwd.py (every result checked against the float64
reference, non-zero exit on a mismatch) with FLASHKIT_BWD_PORTABLE=1, so the portable
kernels stay covered there too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _sanitize_bwd(args, set_env, drop=()):
    """scripts/sanitize_bwd.py ARGS in a subprocess with SET_ENV set and DROP unset: every case
    against the float64 reference; asserts it passed."""
    env = {k: v for k, v in os.environ.items() if k not in set(drop)}  # (then SET_ENV: a name in both is set)
    env.update(set_env)
    # (the CPU reference's small float64 ops: several of these subprocesses run at once on the GPU machine, each
    # with as many OpenMP threads as cores by default; 60 % of a run's time was the reference on 2026-11-29)
    env.setdefault("OMP_NUM_THREADS", "2")
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "sanitize_bwd.py"), *args], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert "cases passed" in r.stdout, r.stdout[-2000:]
    print(r.stdout.strip().splitlines()[-1])  # the count and where the time went (pytest -rP shows it)


@pytest.mark.gpu
def test_dispatch_picks_the_backward_family(flashkit_ext):
    import torch

    hopper = torch.cuda.get_device_capability() == (9, 0)
    # As the dispatcher reads it: a value starting with '1' forces the portable kernels.
    forced = os.environ.get("FLASHKIT_BWD_PORTABLE", "").startswith("1")
    # The Hopper backward is compiled exactly when the build targets sm_90a, as the Hopper
    # forward (which exists for D 128 whenever sm_90a is built).
    kernels = set(flashkit_ext.compiled_fwd_kernels())
    for v in flashkit_ext.compiled_fwd_variants():
        dtype, d = v.split("/")
        sm90_built = any(k.startswith(f"sm90/{dtype}/") for k in kernels)
        want = "sm90" if hopper and not forced and sm90_built and int(d) in (64, 96, 128, 192, 256) else "sm80"
        assert flashkit_ext.bwd_kernel_family(dtype, int(d)) == want, v


# One head dim per test: the whole portable run (every sanitize_bwd case at five head dims) took over 420 s on an
# H200 (2026-11-29), past what one test of this file may take; split, each is ~1/5 of it.
@pytest.mark.gpu
@pytest.mark.parametrize("D", [64, 96, 128, 192, 256])
def test_portable_backward_matches_reference(flashkit_ext, D):
    if not any(v.endswith(f"/{D}") for v in flashkit_ext.compiled_fwd_variants()):
        pytest.skip(f"D {D} not compiled")
    env = dict(os.environ, FLASHKIT_BWD_PORTABLE="1")
    probe = ("import flashkit; print(sorted({flashkit.bwd_kernel_family(v.split('/')[0], "
             "int(v.split('/')[1])) for v in flashkit.compiled_fwd_variants()}))")
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "['sm80']", r.stdout
    _sanitize_bwd(["--dims", str(D)], {"FLASHKIT_BWD_PORTABLE": "1"})


@pytest.mark.gpu
def test_sm90_v1_backward_matches_reference(flashkit_ext):
    """On a Hopper GPU, D 64/128 run the ping-pong kernel and D 256 the key-split kernel;
    FLASHKIT_BWD_SM90_V1=1 and FLASHKIT_BWD_D256_V1=1 + FLASHKIT_BWD_D256_DUP=1 select the
    first versions (kept for A/B runs): they stay checked against the reference here."""
    import torch

    kernels = set(flashkit_ext.compiled_fwd_kernels())
    if torch.cuda.get_device_capability() != (9, 0) or not any(k.startswith("sm90/") for k in kernels):
        pytest.skip("no Hopper backward on this GPU / build")
    _sanitize_bwd(["--quick", "--dims", "64", "128", "256"],
                  {"FLASHKIT_BWD_SM90_V1": "1", "FLASHKIT_BWD_D256_V1": "1", "FLASHKIT_BWD_D256_DUP": "1"},
                  drop=("FLASHKIT_BWD_PORTABLE",))


@pytest.mark.gpu
@pytest.mark.parametrize("env", [{"FLASHKIT_BWD_NO_TMA": "1"}, {"FLASHKIT_BWD_DQ_TMA": "0"},
                                 {"FLASHKIT_BWD_DET_TURNS": "1"}, {"FLASHKIT_BWD_SM90_V1": "1", "FLASHKIT_BWD_D256_V1": "1"}],
                         ids=["no_tma", "dq_reds", "det_turns", "v1_switches"])
def test_padded_head_dims_other_paths(flashkit_ext, env):
    """D 96 and 192 on the Hopper kernels (launch_bwd_sm90_padded): the cp.async loads with
    per-thread dQ reds (FLASHKIT_BWD_NO_TMA=1, FLASHKIT_BWD_DQ_TMA=0: the fast mode's fallback when
    a TMA map cannot be made), and the calls handed to the portable family (deterministic with
    FLASHKIT_BWD_DET_TURNS=1; the v1 A/B switches): every case of scripts/sanitize_bwd.py, windows
    and softcaps included, against the float64 reference."""
    import torch

    kernels = set(flashkit_ext.compiled_fwd_kernels())
    if torch.cuda.get_device_capability() != (9, 0) or not any(k.startswith("sm90/") for k in kernels):
        pytest.skip("no Hopper backward on this GPU / build")
    _sanitize_bwd(["--dims", "96", "192"], env, drop=("FLASHKIT_BWD_PORTABLE",))


@pytest.mark.gpu
def test_gqa_split_backward_matches_reference(flashkit_ext):
    """FLASHKIT_BWD_GQA_SPLIT=8 splits every GQA call of the D 64 / 128 ping-pong kernels, fast and
    deterministic, over clusters of up to 8 CTAs per key block (the default splits only where
    src/launch/bwd_gqa_split.h's table says): the sanitize set's GQA cases (h_ratio 2 and 4, causal
    and not, S_q != S_k, windows, softcaps, varlen, strided and poisoned gradients) against
    float64; then test_backward_gpu.py's test_gqa_split_grads (long GQA 8 / 16 causal calls) in
    processes with =8 (clusters of 8) and =0 (never split)."""
    import torch

    kernels = set(flashkit_ext.compiled_fwd_kernels())
    if torch.cuda.get_device_capability() != (9, 0) or not any(k.startswith("sm90/") for k in kernels):
        pytest.skip("no Hopper backward on this GPU / build")
    _sanitize_bwd(["--quick", "--dims", "64", "128"], {"FLASHKIT_BWD_GQA_SPLIT": "8"},
                  drop=("FLASHKIT_BWD_PORTABLE",))
    for split in ("8", "0"):
        env = dict(os.environ, FLASHKIT_BWD_GQA_SPLIT=split)
        env.pop("FLASHKIT_BWD_PORTABLE", None)
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
                            str(REPO / "tests" / "python" / "test_backward_gpu.py"), "-k", "gqa_split_grads"],
                           env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, (split, (r.stdout + r.stderr)[-4000:])
        assert " passed" in r.stdout and "skipped" not in r.stdout and "failed" not in r.stdout, r.stdout[-2000:]


_D256_PROBE = r"""
import hashlib, math, torch, flashkit
C = flashkit._C
g = torch.Generator(device="cuda").manual_seed(7)
out = []
for causal in (False, True):
    B, S, H, Hk, D = 2, 200, 4, 2, 256
    q, dout = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    k, v = (torch.randn(B, S, Hk, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    o, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
    dq, dk, dv = flashkit.attention_backward(dout, q, k, v, o, lse, causal=causal, deterministic=True)
    for x in (dq, dk, dv):
        out.append(hashlib.sha256(x.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest())
print(" ".join(out))
"""


@pytest.mark.gpu
def test_d256_split_sdp_matches_duplicated_bitwise(flashkit_ext, run_probe):
    """D 256, the role-split kernel (FLASHKIT_BWD_D256_V1=1): splitting S^T / dP^T between
    the warpgroups computes the same bits as each computing both (FLASHKIT_BWD_D256_DUP=1): the same
    products, the same fp32 P, the same bf16 dS^T (deterministic mode for dq)."""
    import torch

    kernels = set(flashkit_ext.compiled_fwd_kernels())
    if torch.cuda.get_device_capability() != (9, 0) or "sm90/bfloat16/256" not in kernels:
        pytest.skip("no Hopper D 256 backward on this GPU / build")
    runs = [run_probe(_D256_PROBE, {"FLASHKIT_BWD_D256_V1": "1", "FLASHKIT_BWD_D256_DUP": dup},
                      ["FLASHKIT_BWD_PORTABLE"], timeout=300).split()
            for dup in ("0", "1")]
    assert len(runs[0]) == 6 and runs[0] == runs[1]


_KS_DET_PROBE = r"""
import hashlib, torch, flashkit
g = torch.Generator(device="cuda").manual_seed(11)
out = []
for causal in (False, True):
    # GQA, S not a multiple of the 64-row / 64-key blocks, and a varlen batch with an empty
    # sequence and partial row blocks (the TMA boxes cover rows of the next sequence)
    B, S, H, Hk, D = 2, 333, 4, 2, 256
    q, dout = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    k, v = (torch.randn(B, S, Hk, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    o, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
    res = list(flashkit.attention_backward(dout, q, k, v, o, lse, causal=causal, deterministic=True))
    cu = torch.tensor([0, 70, 70, 200, 333], device="cuda", dtype=torch.int32)
    qv, dov = (torch.randn(333, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    kv, vv = (torch.randn(333, Hk, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    ov, lsev = flashkit.attention_varlen(qv, kv, vv, cu, cu, 133, 133, causal=causal, return_lse=True)
    res += list(flashkit.attention_varlen_backward(dov, qv, kv, vv, ov, lsev, cu, cu, 133, 133, causal=causal,
                                                   deterministic=True))
    for x in res:
        assert torch.isfinite(x).all()
        out.append(hashlib.sha256(x.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest())
print(" ".join(out))
"""


@pytest.mark.gpu
def test_d256_deterministic_tma_adds_match_reds_bitwise(flashkit_ext, run_probe):
    """D 256, deterministic mode with the turns (FLASHKIT_BWD_DET_TURNS=1; the default since
    2026-11-28 is the fixed-point dQ, which the reds path does not take): dQ by per-warp TMA
    reduce-adds and by per-thread reds (FLASHKIT_BWD_DQ_TMA=0) add the same per-CTA values in the
    same turn order, so dq, dk and dv agree bitwise (dense GQA and varlen, causal and not)."""
    import torch

    kernels = set(flashkit_ext.compiled_fwd_kernels())
    if torch.cuda.get_device_capability() != (9, 0) or "sm90/bfloat16/256" not in kernels:
        pytest.skip("no Hopper D 256 backward on this GPU / build")
    runs = [run_probe(_KS_DET_PROBE, {"FLASHKIT_BWD_DQ_TMA": tma, "FLASHKIT_BWD_DET_TURNS": "1"},
                      ["FLASHKIT_BWD_PORTABLE", "FLASHKIT_BWD_D256_V1"], timeout=300).split()
            for tma in ("1", "0")]
    assert len(runs[0]) == 12 and runs[0] == runs[1]


_PP_TMA_PROBE = r"""
import sys, torch, flashkit
g = torch.Generator(device="cuda").manual_seed(5)
res = {}
for dtype in (torch.bfloat16, torch.float16):
    for D in (64, 128):
        for causal in (False, True):
            # dense, S not a multiple of the 64-row block (TMA: rows past S_q read as zeros)
            B, S, H, Hk = 2, 200, 4, 2
            q, dout = (torch.randn(B, S, H, D, device="cuda", dtype=dtype, generator=g) for _ in range(2))
            k, v = (torch.randn(B, S, Hk, D, device="cuda", dtype=dtype, generator=g) for _ in range(2))
            o, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
            res[f"dense {dtype} {D} {causal}"] = flashkit.attention_backward(dout, q, k, v, o, lse, causal=causal)
            # varlen: the rows after a sequence's last row block belong to the next sequence,
            # and the rows past the last one (333..399) are NaN: such partial row blocks
            # must not read them (the kernel copies them with cp.async, zero-filled)
            cu = torch.tensor([0, 70, 200, 333], device="cuda", dtype=torch.int32)
            qv, dov = (torch.randn(400, H, D, device="cuda", dtype=dtype, generator=g) for _ in range(2))
            qv[333:] = float("nan")
            dov[333:] = float("nan")
            kv, vv = (torch.randn(333, Hk, D, device="cuda", dtype=dtype, generator=g) for _ in range(2))
            ov, lsev = flashkit.attention_varlen(qv, kv, vv, cu, cu, 133, 133, causal=causal, return_lse=True)
            res[f"varlen {dtype} {D} {causal}"] = flashkit.attention_varlen_backward(
                dov, qv, kv, vv, ov, lsev, cu, cu, 133, 133, causal=causal)
torch.save({k: [x.cpu() for x in v] for k, v in res.items()}, sys.argv[1])
"""


@pytest.mark.gpu
def test_pp_tma_loads_match_cp_async(flashkit_ext, tmp_path, run_probe):
    """The ping-pong backward loads Q / dO with TMA (default) or cp.async
    (FLASHKIT_BWD_NO_TMA=1), and in fast mode with TMA sends dQ to the fp32 accumulator by
    TMA reduce-adds (default) or per-thread reds (FLASHKIT_BWD_DQ_TMA=0); the switches are
    read once: a subprocess each. dK and dV are reduced inside each CTA, so they must match
    bitwise; dQ goes through fp32 atomics, whose order varies from run to run, so it is
    compared within a few ulps. Dense with a partial row block (TMA zero rows; the
    reduce-adds clip rows past S_q) and varlen with NaN rows past the last sequence (a
    partial row block of a varlen sequence is copied with its tail zero-filled, never read
    by TMA, and adds exact zeros to the next sequence's dQ rows)."""
    import torch

    kernels = set(flashkit_ext.compiled_fwd_kernels())
    if torch.cuda.get_device_capability() != (9, 0) or "sm90/bfloat16/128" not in kernels:
        pytest.skip("no Hopper backward on this GPU / build")
    configs = [  # the first is the default; REQUIRE_TMA makes a failed map an error
        {"FLASHKIT_BWD_NO_TMA": "0", "FLASHKIT_BWD_DQ_TMA": "1", "FLASHKIT_BWD_REQUIRE_TMA": "1"},
        {"FLASHKIT_BWD_NO_TMA": "0", "FLASHKIT_BWD_DQ_TMA": "0", "FLASHKIT_BWD_REQUIRE_TMA": "1"},
        {"FLASHKIT_BWD_NO_TMA": "1", "FLASHKIT_BWD_DQ_TMA": "1", "FLASHKIT_BWD_REQUIRE_TMA": "0"},
    ]
    runs = []
    for i, env in enumerate(configs):
        path = tmp_path / f"pp-{i}.pt"
        run_probe(_PP_TMA_PROBE, env, ["FLASHKIT_BWD_PORTABLE", "FLASHKIT_BWD_SM90_V1"], args=[path])
        runs.append(torch.load(path))
    assert all(r.keys() == runs[0].keys() for r in runs) and len(runs[0]) == 16
    for other in runs[1:]:
        for key, (a, b) in ((k, (runs[0][k], other[k])) for k in runs[0]):
            dq_a, dk_a, dv_a = a
            dq_b, dk_b, dv_b = b
            assert torch.isfinite(dk_a).all() and torch.isfinite(dv_a).all(), key
            assert torch.equal(dk_a, dk_b) and torch.equal(dv_a, dv_b), key
            valid = dq_a[:333] if key.startswith("varlen") else dq_a  # (rows past cu_seqlens[-1]: not written)
            assert torch.isfinite(valid).all(), key
            if key.startswith("varlen"):
                dq_a, dq_b = dq_a[:333], dq_b[:333]
            tol = 4 * torch.finfo(dq_a.dtype).eps * dq_b.float().abs().max().item() + 1e-3
            assert (dq_a.float() - dq_b.float()).abs().max().item() <= tol, key


def _needs_hopper(flashkit_ext, D):
    import torch

    kernels = set(flashkit_ext.compiled_fwd_kernels())
    if torch.cuda.get_device_capability() != (9, 0) or f"sm90/bfloat16/{D}" not in kernels:
        pytest.skip(f"no Hopper D {D} backward on this GPU / build")


@pytest.mark.gpu
@pytest.mark.parametrize("D", [256, 192], ids=lambda d: f"D{d}")
def test_d256_pair_kernel_matches_reference(flashkit_ext, D):
    """D 256 and 192 (on D 256's tiles), the 2-CTA kernel wherever it can run (FLASHKIT_BWD_KS_PAIR=1,
    kernel_ks_pair.cuh: pairs of key blocks exchange dS and each adds half of dQ's columns): every
    sanitize_bwd.py case against the float64 reference (its non-varlen ones run the pair kernel,
    fast and, by fixed point, deterministic: causal, windows, softcaps, odd key-block counts,
    strided; the others fall back to the key-split kernel)."""
    _needs_hopper(flashkit_ext, D)
    _sanitize_bwd(["--dims", str(D)], {"FLASHKIT_BWD_KS_PAIR": "1"},
                  drop=("FLASHKIT_BWD_PORTABLE", "FLASHKIT_BWD_D256_V1"))


_PAIR_PROBE = r"""
import hashlib, os, torch, flashkit
g = torch.Generator(device="cuda").manual_seed(13)
out = []
for causal, window, S in ((False, None, 300), (True, None, 333), (True, (100, -1), 460), (False, None, 64)):
    # GQA; 300 keys: five key blocks (the last pair's second CTA has none), the last partial; 333:
    # six; 64: one key block
    B, H, Hk, D = 2, 4, 2, int(os.environ["FK_PAIR_D"])
    q, dout = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    k, v = (torch.randn(B, S, Hk, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    kw = {} if window is None else {"window": window}
    o, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True, **kw)
    dq, dk, dv = flashkit.attention_backward(dout, q, k, v, o, lse, causal=causal, **kw)
    for x in (dk, dv):
        out.append(hashlib.sha256(x.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest())
    out.append("%.6e" % dq.float().abs().sum().item())
print(" ".join(out))
"""


@pytest.mark.gpu
@pytest.mark.parametrize("D", [256, 192], ids=lambda d: f"D{d}")
def test_d256_pair_kernel_dk_dv_match_single_cta_bitwise(flashkit_ext, run_probe, D):
    """The pair kernel computes S, dP, P, dS, dV and dK of its key block exactly as the key-split
    kernel (same products in the same order), so dk and dv agree bitwise; dq only up to the order
    of its fp32 sums (each CTA sums over two key blocks before its adds). D 192 on D 256's tiles too."""
    _needs_hopper(flashkit_ext, D)
    runs = [run_probe(_PAIR_PROBE, {"FLASHKIT_BWD_KS_PAIR": pair, "FK_PAIR_D": str(D)},
                      ["FLASHKIT_BWD_PORTABLE", "FLASHKIT_BWD_D256_V1"], timeout=300).split()
            for pair in ("1", "0")]
    assert len(runs[0]) == 12 and len(runs[1]) == 12
    for i in range(0, 12, 3):
        assert runs[0][i:i + 2] == runs[1][i:i + 2], i  # dk, dv
        a, b = float(runs[0][i + 2]), float(runs[1][i + 2])
        assert abs(a - b) <= 1e-3 * abs(b), (i, a, b)  # |dq| summed: the same up to fp32 order


_PAIR_DET_PROBE = r"""
import hashlib, torch, flashkit
g = torch.Generator(device="cuda").manual_seed(17)
out = []
for causal, window, S in ((False, None, 300), (True, None, 333), (True, (100, -1), 460), (False, None, 640)):
    B, H, Hk, D = 2, 4, 2, 256
    q, dout = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    k, v = (torch.randn(B, S, Hk, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    kw = {} if window is None else {"window": window}
    o, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True, **kw)
    runs = [flashkit.attention_backward(dout, q, k, v, o, lse, causal=causal, deterministic=True, **kw)
            for _ in range(3)]
    assert all(torch.equal(a, b) for r in runs[1:] for a, b in zip(runs[0], r)), "not reproducible"
    for x in runs[0]:
        out.append(hashlib.sha256(x.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest())
    out.append("%.6e" % runs[0][0].float().abs().sum().item())
print(" ".join(out))
"""


@pytest.mark.gpu
def test_d256_pair_kernel_deterministic(flashkit_ext, run_probe):
    """The pair kernel's deterministic mode (FLASHKIT_BWD_KS_PAIR_DET=1 with FLASHKIT_BWD_KS_PAIR=1;
    one dq turn per pair, BwdCta::dq_turn_pair): bitwise reproducible over 3 calls; dk and dv bitwise
    equal to the key-split kernel's deterministic mode (the same products in the same order); dq
    equal to it up to the order of fp32 sums. Correctness against float64: sanitize_bwd.py below.
    (The first GPU run, 2026-11-27, compared against the rotated walk and failed on dk: a test
    error, the rotation changes the order of dk's sums.) Since 2026-11-28 the deterministic mode's
    default is the fixed-point dQ, whose launch path takes neither the turns nor the rotated walk:
    the probes ask for the turns (FLASHKIT_BWD_DET_TURNS=1; until 2026-11-29 they did not, and
    compared the fixed-point pair kernel with the fixed-point key-split one), and sanitize_bwd.py
    runs both the turns and the fixed point on the pair kernel."""
    _needs_hopper(flashkit_ext, 256)
    drop = ["FLASHKIT_BWD_PORTABLE", "FLASHKIT_BWD_D256_V1", "FLASHKIT_BWD_DET_TURNS", "FLASHKIT_BWD_DET_ROTATE",
            "FLASHKIT_BWD_KS_PAIR", "FLASHKIT_BWD_KS_PAIR_DET"]
    turns = {"FLASHKIT_BWD_DET_TURNS": "1"}
    pair = run_probe(_PAIR_DET_PROBE, {"FLASHKIT_BWD_KS_PAIR": "1", "FLASHKIT_BWD_KS_PAIR_DET": "1", **turns}, drop,
                     timeout=300).split()
    # The key-split kernel's deterministic mode in its ascending order (without a mask it would
    # rotate its walk at these lengths, and dk / dv would differ in the order of their sums).
    single = run_probe(_PAIR_DET_PROBE, {"FLASHKIT_BWD_KS_PAIR": "0", "FLASHKIT_BWD_DET_ROTATE": "0", **turns}, drop,
                       timeout=300).split()
    assert len(pair) == 16 and len(single) == 16
    for i in range(0, 16, 4):
        assert pair[i + 1:i + 3] == single[i + 1:i + 3], i  # dk, dv
        a, b = float(pair[i + 3]), float(single[i + 3])
        assert abs(a - b) <= 1e-3 * abs(b), (i, a, b)
    _sanitize_bwd(["--dims", "256"], {"FLASHKIT_BWD_KS_PAIR": "1", "FLASHKIT_BWD_KS_PAIR_DET": "1", **turns}, drop)
    # (and the default deterministic mode on the pairs: the fixed-point dQ)
    _sanitize_bwd(["--dims", "256"], {"FLASHKIT_BWD_KS_PAIR": "1", "FLASHKIT_BWD_KS_PAIR_DET": "1"}, drop)


@pytest.mark.gpu
@pytest.mark.parametrize("m128", ["1", "0"])
def test_d64_m128_kernel_matches_reference(flashkit_ext, m128):
    """D 64 with 128-row blocks (the default since 2026-11-27; pp_traits.cuh, kernel_pp.cuh's
    kRowSplit: m64n128 S^T / dP^T, dQ split by rows, two stages) and, with FLASHKIT_BWD_D64_M128=0,
    the 64-row kernel it replaced: every sanitize_bwd.py case at D 64 against the float64 reference,
    fast and deterministic (varlen tails and empty sequences, causal, windows, GQA, strided;
    softcapped calls run the 64-row kernel either way)."""
    _needs_hopper(flashkit_ext, 64)
    _sanitize_bwd(["--dims", "64"], {"FLASHKIT_BWD_D64_M128": m128},
                  drop=("FLASHKIT_BWD_PORTABLE", "FLASHKIT_BWD_SM90_V1", "FLASHKIT_BWD_NO_TMA", "FLASHKIT_BWD_DQ_TMA"))


_M128_PROBE = r"""
import torch, flashkit
g = torch.Generator(device="cuda").manual_seed(29)
out = []
# (causal, window, S_q, S_k, deterministic): odd lengths (a last 128-row block with one or both
# 64-row halves partial or empty), S 1, GQA 4 / 2, cross lengths
cases = ((False, None, 1000, 1000, False), (True, None, 333, 333, False), (True, (100, -1), 460, 460, False),
         (False, None, 1, 77, False), (True, None, 200, 520, False), (False, None, 1000, 1000, True),
         (True, None, 333, 333, True), (False, None, 65, 300, True))
for causal, window, Sq, Sk, det in cases:
    B, H, Hk, D = 2, 4, 2, 64
    q, dout = (torch.randn(B, Sq, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    k, v = (torch.randn(B, Sk, Hk, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    kw = {} if window is None else {"window": window}
    o, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True, **kw)
    grads = flashkit.attention_backward(dout, q, k, v, o, lse, causal=causal, deterministic=det, **kw)
    if det:
        again = flashkit.attention_backward(dout, q, k, v, o, lse, causal=causal, deterministic=det, **kw)
        assert all(torch.equal(a, b) for a, b in zip(grads, again)), "deterministic mode not reproducible"
    torch.save([x.cpu() for x in grads], f"{__import__('sys').argv[1]}/{len(out)}.pt")
    out.append(str(len(out)))
print(" ".join(out))
"""


@pytest.mark.gpu
def test_d64_m128_kernel_matches_64_row_kernel(flashkit_ext, run_probe, tmp_path):
    """The 128-row D 64 kernel against the 64-row one on the same inputs (fast and deterministic,
    reproducible over two calls): dq, dk, dv agree to a few bf16 ulps of their scale (the products
    are the same; only the order of dq's fp32 sums and the key blocks' walks differ)."""
    import torch

    _needs_hopper(flashkit_ext, 64)
    drop = ("FLASHKIT_BWD_PORTABLE", "FLASHKIT_BWD_SM90_V1", "FLASHKIT_BWD_NO_TMA", "FLASHKIT_BWD_DQ_TMA")
    dirs = {}
    for m128 in ("1", "0"):
        d = tmp_path / f"m128_{m128}"
        d.mkdir()
        run_probe(_M128_PROBE, {"FLASHKIT_BWD_D64_M128": m128}, env_drop=drop, args=(str(d),), timeout=300)
        dirs[m128] = d
    n = len(list(dirs["1"].glob("*.pt")))
    assert n == 8
    for i in range(n):
        a = torch.load(dirs["1"] / f"{i}.pt")
        b = torch.load(dirs["0"] / f"{i}.pt")
        for name, x, y in zip(("dq", "dk", "dv"), a, b):
            assert torch.isfinite(x.float()).all(), (i, name)
            tol = 4 * torch.finfo(torch.bfloat16).eps * y.float().abs().max().item() + 1e-3
            assert (x.float() - y.float()).abs().max().item() <= tol, (i, name)


_ORDER_PROBE = r"""
import sys, torch, flashkit
g = torch.Generator(device="cuda").manual_seed(11)
res = {}
# (B, S_q, S_k, H_q, H_kv, D): groups (B x H_kv) 6 and 10, not multiples of the chunks tried (4, 3): a short
# last chunk; S_q != S_k both ways; GQA; D 64 / 128 (ping-pong kernel), 96, 192 and 256 (key-split kernel)
shapes = [(3, 700, 700, 4, 2, 128), (2, 333, 900, 10, 5, 64), (5, 500, 300, 4, 2, 128), (2, 600, 600, 4, 2, 96),
          (3, 400, 400, 2, 2, 256), (2, 300, 500, 4, 2, 192)]
for (B, Sq, Sk, H, Hk, D) in shapes:
    q, dout = (torch.randn(B, Sq, H, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    k, v = (torch.randn(B, Sk, Hk, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    for window in ((-1, -1), (200, 0)):
        o, lse = flashkit.attention(q, k, v, causal=True, window=window, return_lse=True)
        for det in (False, True):
            res[f"{B} {Sq} {Sk} {H} {Hk} {D} {window} {det}"] = flashkit.attention_backward(
                dout, q, k, v, o, lse, causal=True, window=window, deterministic=det)
assert flashkit.device_errors() == 0
torch.save({k: [x.cpu() for x in v] for k, v in res.items()}, sys.argv[1])
"""


@pytest.mark.gpu
def test_chunked_launch_order_matches_grid_order(flashkit_ext, tmp_path, run_probe):
    """FLASHKIT_BWD_ORDER_CHUNK (read once: a subprocess each) reorders the Hopper backward's launch
    under a right bound in chunks of (batch, KV head) groups (BwdParams::order_chunk,
    attn::make_bwd_cta). Each CTA still owns one key block of one group and reduces its dK / dV itself,
    so dK and dV must be bitwise the grid order's, and so must everything in the deterministic mode
    (fixed-point dQ: integer adds in any order); the fast mode's dQ goes through fp32 reduce-adds in
    another order: within a few ulps. Chunks of 4 and 3 over 6 and 10 groups leave a short last chunk
    (every key block of every group must still be launched exactly once: a missed or doubled CTA
    changes dK / dV)."""
    import torch

    kernels = set(flashkit_ext.compiled_fwd_kernels())
    if torch.cuda.get_device_capability() != (9, 0) or "sm90/bfloat16/128" not in kernels:
        pytest.skip("no Hopper backward on this GPU / build")
    runs = []
    for i, chunk in enumerate(("0", "4", "3")):
        path = tmp_path / f"order-{i}.pt"
        run_probe(_ORDER_PROBE, {"FLASHKIT_BWD_ORDER_CHUNK": chunk}, ["FLASHKIT_BWD_PORTABLE", "FLASHKIT_BWD_SM90_V1"],
                  args=[path])
        runs.append(torch.load(path))
    assert all(r.keys() == runs[0].keys() for r in runs) and len(runs[0]) == 24
    for other in runs[1:]:
        for key in runs[0]:
            (dq_a, dk_a, dv_a), (dq_b, dk_b, dv_b) = runs[0][key], other[key]
            assert torch.isfinite(dq_a).all() and torch.isfinite(dk_a).all() and torch.isfinite(dv_a).all(), key
            assert torch.equal(dk_a, dk_b) and torch.equal(dv_a, dv_b), key
            if key.endswith("True"):
                assert torch.equal(dq_a, dq_b), key
            else:
                tol = 4 * torch.finfo(dq_a.dtype).eps * dq_b.float().abs().max().item() + 1e-3
                assert (dq_a.float() - dq_b.float()).abs().max().item() <= tol, key
