"""Varlen calls with wrong cu_seqlens, and what FlashKit must do with them.

Shared by the GPU tests (``tests/python/test_index_hardening_gpu.py``) and
``scripts/sanitize_small.py`` (so compute-sanitizer memcheck sees the same calls).

The contract (``flashkit/errors.h``): the kernels clamp every range they read from
``cu_seqlens`` to the tensors, so nothing is read or written outside q/k/v/out/lse, and

- a sequence whose q range is not inside q writes nothing;
- a sequence whose q range is valid but whose k range is not gets out = 0, lse = -inf;
- rows no valid sequence covers are not written;
- a sequence longer than ``max_seqlen_q`` may leave its rows past ``max_seqlen_q`` unwritten
  (the grid covers ``max_seqlen_q`` rows, rounded up to the kernel's row block); one
  longer than ``max_seqlen_k`` is computed exactly;
- every valid sequence gives bitwise what it gives in a batch of its own;
- the device error word gets exactly the expected bits;
- with ``check_inputs=True`` the call raises ValueError with the expected message instead,
  writes nothing and sets no bit.

Needs torch and a CUDA GPU; imported lazily (``flashkit.testing`` does not import it).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BadIndexCase", "CASES", "run_case", "run_check_mode"]

I32_MAX = 2**31 - 1
I32_MIN = -(2**31)
CU_SEQLENS, ABOVE_MAX = 1, 2  # flashkit.DeviceError bits
H_Q, H_KV = 4, 2
DEVICE = "cuda"
GUARD = 64  # rows (out) and elements (lse) of sentinel around the outputs
SENTINEL = 7.0


@dataclass(frozen=True)
class BadIndexCase:
    name: str
    cu_q: tuple
    cu_k: tuple
    total_q: int
    total_k: int
    max_q: int
    max_k: int
    bits: int                # expected device error bits
    message: str | None      # the ValueError of check mode (None: the check passes)


CASES = [
    BadIndexCase("valid", (0, 20, 64), (0, 30, 64), 64, 64, 44, 34, 0, None),
    BadIndexCase("k_decreasing", (0, 20, 50, 64), (0, 40, 30, 64), 64, 64, 30, 40, CU_SEQLENS,
                 "cu_seqlens_k: not non-decreasing at index 2 "
                 "(cu_seqlens_k[1] = 40 > cu_seqlens_k[2] = 30)"),
    # sequences 0 and 2 overlap in rows 30..39: either may write them
    BadIndexCase("q_decreasing", (0, 40, 30, 64), (0, 20, 40, 64), 64, 64, 40, 24, CU_SEQLENS,
                 "cu_seqlens_q: not non-decreasing at index 2 "
                 "(cu_seqlens_q[1] = 40 > cu_seqlens_q[2] = 30)"),
    BadIndexCase("k_past_end", (0, 32, 64), (0, 64, 200), 64, 64, 32, 64, CU_SEQLENS,
                 "cu_seqlens_k: past the end of k at index 2 (cu_seqlens_k[2] = 200 > "
                 "total_k = 64)"),
    BadIndexCase("q_past_end", (0, 32, 100), (0, 32, 64), 64, 64, 32, 32, CU_SEQLENS,
                 "cu_seqlens_q: past the end of q at index 2 (cu_seqlens_q[2] = 100 > "
                 "total_q = 64)"),
    BadIndexCase("k_negative", (0, 20, 64), (0, -8, 64), 64, 64, 44, 64, CU_SEQLENS,
                 "cu_seqlens_k: not non-decreasing at index 1 "
                 "(cu_seqlens_k[0] = 0 > cu_seqlens_k[1] = -8)"),
    BadIndexCase("q_negative_start", (-16, 20, 64), (0, 30, 64), 64, 64, 44, 34, CU_SEQLENS,
                 "cu_seqlens_q: does not start at 0 (cu_seqlens_q[0] = -16)"),
    BadIndexCase("q_nonzero_start", (8, 20, 64), (0, 30, 64), 64, 64, 44, 34, CU_SEQLENS,
                 "cu_seqlens_q: does not start at 0 (cu_seqlens_q[0] = 8)"),
    BadIndexCase("k_nonzero_start", (0, 20, 64), (5, 30, 64), 64, 64, 44, 34, CU_SEQLENS,
                 "cu_seqlens_k: does not start at 0 (cu_seqlens_k[0] = 5)"),
    BadIndexCase("q_ends_early", (0, 20, 50), (0, 30, 64), 64, 64, 30, 34, CU_SEQLENS,
                 "cu_seqlens_q: does not end at the rows of q at index 2 "
                 "(cu_seqlens_q[2] = 50, expected total_q = 64)"),
    BadIndexCase("q_garbage", (0, I32_MAX, I32_MIN, 64), (0, 1 << 30, 64, 64), 64, 64, 64, 64,
                 CU_SEQLENS,
                 "cu_seqlens_q: past the end of q at index 1 (cu_seqlens_q[1] = 2147483647 > "
                 "total_q = 64)"),
    BadIndexCase("q_longer_than_max", (0, 10, 310), (0, 20, 330), 310, 330, 100, 310, ABOVE_MAX,
                 "cu_seqlens_q: sequence 1 is longer than max_seqlen_q at index 2 "
                 "(cu_seqlens_q[2] - cu_seqlens_q[1] = 310 - 10 = 300 > max_seqlen_q = 100)"),
    BadIndexCase("k_longer_than_max", (0, 10, 74), (0, 20, 320), 74, 320, 64, 100, ABOVE_MAX,
                 "cu_seqlens_k: sequence 1 is longer than max_seqlen_k at index 2 "
                 "(cu_seqlens_k[2] - cu_seqlens_k[1] = 320 - 20 = 300 > max_seqlen_k = 100)"),
]


def _inputs(torch, case, dtype, D, gen):
    """q/k/v in allocations of their own (memcheck sees a read past any of them)."""
    def randn(shape):
        return torch.randn(shape, dtype=dtype, device=DEVICE, generator=gen)

    q = randn((case.total_q, H_Q, D))
    k = randn((case.total_k, H_KV, D))
    v = randn((case.total_k, H_KV, D))
    cu_q = torch.tensor(case.cu_q, dtype=torch.int32, device=DEVICE)
    cu_k = torch.tensor(case.cu_k, dtype=torch.int32, device=DEVICE)
    return q, k, v, cu_q, cu_k


def _guarded_outputs(torch, case, dtype, D):
    """out [total_q, H_q, D] and lse [H_q, total_q] (NaN) inside sentinel-filled storage."""
    n = case.total_q
    out_store = torch.full((GUARD + n + GUARD, H_Q, D), SENTINEL, dtype=dtype, device=DEVICE)
    out = out_store[GUARD:GUARD + n]
    out.fill_(float("nan"))
    lse_store = torch.full((GUARD + H_Q * n + GUARD,), SENTINEL, dtype=torch.float32,
                           device=DEVICE)
    lse = lse_store[GUARD:GUARD + H_Q * n].view(H_Q, n)
    lse.fill_(float("nan"))
    return out_store, out, lse_store, lse


def _guards_intact(out_store, lse_store, n):
    g_out = (out_store[:GUARD] == SENTINEL).all() and (out_store[GUARD + n:] == SENTINEL).all()
    g_lse = (lse_store[:GUARD] == SENTINEL).all() and \
        (lse_store[GUARD + H_Q * n:] == SENTINEL).all()
    return bool(g_out), bool(g_lse)


def _in(a, b, total):
    return 0 <= a <= b <= total


def _expectations(flashkit, torch, case, q, k, v, causal):
    """(r0, r1, out_block, lse_block, exact_rows) for every sequence with a valid q range:
    rows [r0, r1), the values its rows must hold; rows past r0 + exact_rows may also be
    left unwritten (NaN)."""
    exp = []
    for b in range(len(case.cu_q) - 1):
        q0, q1 = case.cu_q[b], case.cu_q[b + 1]
        k0, k1 = case.cu_k[b], case.cu_k[b + 1]
        if not _in(q0, q1, case.total_q) or q1 == q0:
            continue
        nq = q1 - q0
        if not _in(k0, k1, case.total_k):
            ob = torch.zeros((nq, H_Q, q.shape[2]), dtype=q.dtype, device=DEVICE)
            lb = torch.full((H_Q, nq), float("-inf"), dtype=torch.float32, device=DEVICE)
        else:  # the same sequence in a valid batch of its own
            nk = k1 - k0
            cq = torch.tensor([0, nq], dtype=torch.int32, device=DEVICE)
            ck = torch.tensor([0, nk], dtype=torch.int32, device=DEVICE)
            ob, lb = flashkit.attention_varlen(q[q0:q1].contiguous(), k[k0:k1].contiguous(),
                                               v[k0:k1].contiguous(), cq, ck, nq, max(nk, 1),
                                               causal=causal, return_lse=True)
        exp.append((q0, q1, ob, lb, min(nq, case.max_q)))
    return exp


def run_case(flashkit, torch, case, dtype, D, causal, gen):
    """Runs ``case`` through ``flashkit._C.attention_fwd`` (no check mode); returns the list
    of problems found (empty: as specified)."""
    problems = []
    q, k, v, cu_q, cu_k = _inputs(torch, case, dtype, D, gen)
    out_store, out, lse_store, lse = _guarded_outputs(torch, case, dtype, D)
    flashkit.device_errors(clear=True)
    flashkit._C.attention_fwd(q, k, v, out, lse=lse, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                              max_seqlen_q=case.max_q, max_seqlen_k=case.max_k, causal=causal,
                              stream=torch.cuda.current_stream().cuda_stream)
    bits = flashkit.device_errors(clear=True)  # synchronizes
    if bits != case.bits:
        problems.append(f"device error bits {bits:#x}, expected {case.bits:#x}")
    if flashkit.device_errors(clear=False) != 0:
        problems.append("device error bits still set after reading them with clear=True")
    g_out, g_lse = _guards_intact(out_store, lse_store, case.total_q)
    if not g_out:
        problems.append("wrote outside out")
    if not g_lse:
        problems.append("wrote outside lse")

    ok_out = torch.zeros(out.shape, dtype=torch.bool, device=DEVICE)
    ok_lse = torch.zeros(lse.shape, dtype=torch.bool, device=DEVICE)
    covered = torch.zeros(case.total_q, dtype=torch.bool, device=DEVICE)
    for r0, r1, ob, lb, exact in _expectations(flashkit, torch, case, q, k, v, causal):
        ok_out[r0:r1] |= out[r0:r1] == ob
        ok_lse[:, r0:r1] |= lse[:, r0:r1] == lb
        covered[r0:r1] = True
        if exact < r1 - r0:  # rows past max_seqlen_q: computed or not written
            ok_out[r0 + exact:r1] |= torch.isnan(out[r0 + exact:r1])
            ok_lse[:, r0 + exact:r1] |= torch.isnan(lse[:, r0 + exact:r1])
    ok_out[~covered] = torch.isnan(out[~covered])  # rows no valid sequence covers: untouched
    ok_lse[:, ~covered] = torch.isnan(lse[:, ~covered])
    if not bool(ok_out.all()):
        rows = torch.nonzero(~ok_out.all(dim=2).all(dim=1)).flatten().tolist()
        problems.append(f"out differs from the specified values in rows {rows[:8]}"
                        f"{' ...' if len(rows) > 8 else ''} ({len(rows)} rows)")
    if not bool(ok_lse.all()):
        rows = torch.nonzero(~ok_lse.all(dim=0)).flatten().tolist()
        problems.append(f"lse differs from the specified values in rows {rows[:8]}"
                        f"{' ...' if len(rows) > 8 else ''} ({len(rows)} rows)")
    if flashkit.device_errors(clear=True) != 0:
        problems.append("the valid reference calls set device error bits")
    return problems


def run_check_mode(flashkit, torch, case, dtype, D, causal, gen):
    """Runs ``case`` with ``check_inputs=True``; returns the problems found: a bad case must
    raise ValueError(case.message) and leave out/lse and the error word untouched; the valid
    one must give bitwise the same result as without the check."""
    problems = []
    q, k, v, cu_q, cu_k = _inputs(torch, case, dtype, D, gen)
    out_store, out, lse_store, lse = _guarded_outputs(torch, case, dtype, D)
    flashkit.device_errors(clear=True)
    stream = torch.cuda.current_stream().cuda_stream
    args = dict(lse=lse, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=case.max_q,
                max_seqlen_k=case.max_k, causal=causal, stream=stream)
    try:
        flashkit._C.attention_fwd(q, k, v, out, check_inputs=True, **args)
        raised = None
    except ValueError as e:
        raised = str(e)
    if case.message is None:
        if raised is not None:
            return [f"check mode rejected a valid call: {raised}"]
        out2, lse2 = _guarded_outputs(torch, case, dtype, D)[1::2]
        flashkit._C.attention_fwd(q, k, v, out2, **dict(args, lse=lse2))
        torch.cuda.synchronize()
        if not (torch.equal(out, out2) and torch.equal(lse, lse2)):
            problems.append("check mode changed the result of a valid call")
        return problems
    if raised != case.message:
        problems.append(f"expected ValueError({case.message!r}), got "
                        f"{'no error' if raised is None else repr(raised)}")
    torch.cuda.synchronize()
    if not (bool(torch.isnan(out).all()) and bool(torch.isnan(lse).all())):
        problems.append("a call rejected by check mode wrote its outputs")
    if _guards_intact(out_store, lse_store, case.total_q) != (True, True):
        problems.append("a call rejected by check mode wrote outside its outputs")
    bits = flashkit.device_errors(clear=True)
    if bits:
        problems.append(f"a call rejected by check mode set device error bits {bits:#x}")
    return problems
