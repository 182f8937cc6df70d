"""Quick backward check on a GPU: gradients of flashkit's native backward against float64
autograd of the reference, deterministic-mode bitwise repeatability, and a few timings
against SDPA's cuDNN and flash backends. A development tool (the real tests are in
tests/python/test_backward_gpu.py):

    python3 scripts/dev/bwd_check.py [--perf]
"""
import math
import sys
import time

import torch
import torch.nn.functional as F

import flashkit

C = flashkit._C


def ref_attention(q, k, v, causal, scale):
    # q [B, Sq, H, D] -> float64 reference with bottom-right causal mask, GQA by repeat.
    B, Sq, H, D = q.shape
    Sk, Hk = k.shape[1], k.shape[2]
    qf, kf, vf = (x.double().transpose(1, 2) for x in (q, k, v))
    if Hk != H:
        kf = kf.repeat_interleave(H // Hk, dim=1)
        vf = vf.repeat_interleave(H // Hk, dim=1)
    s = qf @ kf.transpose(-1, -2) * scale
    if causal:
        i = torch.arange(Sq, device=q.device)[:, None]
        j = torch.arange(Sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + Sk - Sq, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return (p @ vf).transpose(1, 2)


def run_bwd(dout, q, k, v, out, lse, causal, scale, deterministic, cu_q=None, cu_k=None, mq=0, mk=0):
    dq = torch.full_like(q, float("nan"))
    dk = torch.full_like(k, float("nan"))
    dv = torch.full_like(v, float("nan"))
    if cu_q is None:
        B, S = q.shape[0], q.shape[1]
        rows = B * S
        ms = S
    else:
        B = cu_q.numel() - 1
        rows = q.shape[0]
        ms = mq
    ws = torch.empty(C.attention_bwd_workspace_size(B, rows, ms, q.shape[-2], q.shape[-1], deterministic),
                     dtype=torch.uint8, device=q.device)
    C.attention_bwd(dout, q, k, v, out, lse, dq, dk, dv, cu_q, cu_k, mq, mk, scale, causal,
                    deterministic, ws, torch.cuda.current_stream().cuda_stream, False)
    return dq, dk, dv


def check(B, Sq, Sk, H, Hk, D, causal, dtype=torch.bfloat16, deterministic=False):
    torch.manual_seed(0)
    dev = "cuda"
    q = torch.randn(B, Sq, H, D, device=dev, dtype=dtype)
    k = torch.randn(B, Sk, Hk, D, device=dev, dtype=dtype)
    v = torch.randn(B, Sk, Hk, D, device=dev, dtype=dtype)
    dout = torch.randn(B, Sq, H, D, device=dev, dtype=dtype)
    scale = 1.0 / math.sqrt(D)
    out, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
    dq, dk, dv = run_bwd(dout, q, k, v, out, lse, causal, scale, deterministic)
    qd, kd, vd = (x.detach().double().requires_grad_() for x in (q, k, v))
    o64 = ref_attention(qd, kd, vd, causal, scale)
    o64.backward(dout.double())
    # PyTorch's own same-dtype error as the yardstick (math SDPA in dtype)
    qm, km, vm = (x.detach().clone().requires_grad_() for x in (q, k, v))
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        kk = km.repeat_interleave(H // Hk, dim=2) if Hk != H else km
        vv = vm.repeat_interleave(H // Hk, dim=2) if Hk != H else vm
        mask = None
        if causal:
            i = torch.arange(Sq, device=dev)[:, None]
            j = torch.arange(Sk, device=dev)[None, :]
            mask = j <= i + Sk - Sq
        om = F.scaled_dot_product_attention(qm.transpose(1, 2), kk.transpose(1, 2), vv.transpose(1, 2),
                                            attn_mask=mask).transpose(1, 2)
    om.backward(dout)
    ok = True
    msgs = []
    for name, got, ref, pt in (("dq", dq, qd.grad, qm.grad), ("dk", dk, kd.grad, km.grad),
                               ("dv", dv, vd.grad, vm.grad)):
        err = (got.double() - ref).abs().max().item()
        pt_err = (pt.double() - ref).nan_to_num(0).abs().max().item()
        nan = torch.isnan(got).any().item()
        # 2x PyTorch's own same-dtype error, plus a slack of 2e-3 of the gradient's size: at a
        # few rows one bf16 rounding of dS dominates both errors (S=3 missed 1e-3 absolute).
        good = (not nan) and err <= 2 * pt_err + 2e-3 * max(1.0, ref.abs().max().item())
        ok &= good
        msgs.append(f"{name} {err:.2e}/{pt_err:.2e}{'' if good else ' BAD'}{' NaN' if nan else ''}")
    det = ""
    if deterministic:
        a = run_bwd(dout, q, k, v, out, lse, causal, scale, True)
        b = run_bwd(dout, q, k, v, out, lse, causal, scale, True)
        same = all(torch.equal(x, y) for x, y in zip(a, b)) and torch.equal(a[0], dq)
        det = " det-bitwise " + ("OK" if same else "DIFF")
        ok &= same
    print(f"{'OK ' if ok else 'FAIL'} B{B} Sq{Sq} Sk{Sk} H{H}/{Hk} D{D} c{int(causal)} {str(dtype)[6:]}: "
          + "  ".join(msgs) + det, flush=True)
    return ok


def bench(fn, iters=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    st = torch.cuda.Event(enable_timing=True)
    en = torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(iters):
        st.record()
        fn()
        en.record()
        torch.cuda.synchronize()
        ts.append(st.elapsed_time(en))
    ts.sort()
    return ts[len(ts) // 2] * 1e-3


def perf():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    print(torch.cuda.get_device_name(), flush=True)
    for D in (64, 128, 256):
        H = 2048 // D
        for S in (1024, 4096, 16384):
            B = 16384 // S
            for causal in (False, True):
                q, k, v, dout = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
                out, lse = flashkit.attention(q, k, v, causal=causal, return_lse=True)
                scale = 1 / math.sqrt(D)
                ws = torch.empty(C.attention_bwd_workspace_size(B, B * S, S, H, D, False), dtype=torch.uint8,
                                 device="cuda")
                wsd = torch.empty(C.attention_bwd_workspace_size(B, B * S, S, H, D, True), dtype=torch.uint8,
                                  device="cuda")
                dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
                stream = torch.cuda.current_stream().cuda_stream
                t_fk = bench(lambda: C.attention_bwd(dout, q, k, v, out, lse, dq, dk, dv, None, None, 0, 0,
                                                     scale, causal, False, ws, stream, False))
                t_det = bench(lambda: C.attention_bwd(dout, q, k, v, out, lse, dq, dk, dv, None, None, 0, 0,
                                                      scale, causal, True, wsd, stream, False))
                flops = 4 * B * H * S * S * D * 2.5 / (2 if causal else 1)
                row = f"D{D} S{S} c{int(causal)}: flashkit {flops / t_fk * 1e-12:6.1f} det {flops / t_det * 1e-12:6.1f}"
                for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
                    try:
                        qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
                        with sdpa_kernel(be):
                            o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                        g = dout.transpose(1, 2)
                        t = bench(lambda: torch.autograd.grad(o, (qt, kt, vt), g, retain_graph=True))
                        row += f"  {name} {flops / t * 1e-12:6.1f}"
                    except Exception as e:  # noqa
                        row += f"  {name} n/a({type(e).__name__})"
                print(row, flush=True)


def main():
    ok = True
    cases = [
        (2, 128, 128, 4, 4, 64, False), (2, 128, 128, 4, 4, 64, True),
        (1, 1, 1, 2, 2, 128, False), (1, 3, 3, 2, 1, 128, True), (2, 333, 1000, 8, 2, 128, True),
        (2, 1000, 333, 8, 2, 128, True), (2, 1000, 333, 4, 4, 128, False),
        (1, 257, 300, 4, 1, 96, True), (1, 200, 200, 2, 2, 192, True), (1, 300, 129, 4, 2, 256, False),
        (2, 512, 512, 8, 1, 256, True), (1, 1024, 1024, 4, 4, 128, True),
    ]
    for c in cases:
        ok &= check(*c)
    ok &= check(2, 333, 517, 4, 2, 128, True, torch.float16)
    ok &= check(2, 300, 300, 4, 2, 64, True, deterministic=True)
    ok &= check(1, 1000, 1000, 4, 4, 128, False, deterministic=True)
    print("ALL OK" if ok else "SOME FAILED", flush=True)
    if "--perf" in sys.argv:
        perf()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
