"""The deterministic backward when its CTAs cannot all be resident.

Without a mask the Hopper deterministic kernels (D 64/128 ping-pong, D 256 key-split) walk their
row blocks rotated, and the CTAs of one (batch, KV head) then wait on each other's dq turns in a
cycle: that needs them all resident at once. Here another kernel (a CuPy spinner, one block per
SM by its shared memory) holds all but 48 SMs while a backward with more key blocks than that runs
(D 128 at S 16k: 128 blocks of 128 keys; D 256 at S 4k: 64 blocks of 64 keys, the most the
launcher rotates on a 132-SM GPU). The kernel must not
hang: it gives the order up after a bounded number of polls, reports
DeviceError.DET_ORDER, and its gradients stay correct (dk, dv bitwise equal to an undisturbed
run: they do not depend on the dq order). With FLASHKIT_BWD_DET_ROTATE=0 the ascending order
(CTAs wait only for earlier-launched ones) runs through the same squeeze with no report and
bitwise equal to its own undisturbed run.
"""
from __future__ import annotations

import json

import pytest

_PROBE = r"""
import json, time
import cupy, numpy as np, torch, flashkit

D, S, FREE = __D__, __S__, 48
g = torch.Generator(device="cuda").manual_seed(3)
q, k, v, dout = (torch.randn(1, S, 1, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
out, lse = flashkit.attention(q, k, v, return_lse=True)
stream = torch.cuda.Stream()
with torch.cuda.stream(stream):
    ref = flashkit.attention_backward(dout, q, k, v, out, lse, deterministic=True)
stream.synchronize()
bits_idle = flashkit.device_errors()

src = '''
extern "C" __global__ void hold(unsigned long long ns) {
  extern __shared__ unsigned char smem[];
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(20000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
  if (t == 0) smem[threadIdx.x] = 1;
}
'''
hold = cupy.RawKernel(src, "hold")
hold.max_dynamic_shared_size_bytes = 120 * 1024  # one block per SM, none beside a backward CTA
sms = torch.cuda.get_device_properties(0).multi_processor_count
blocker = cupy.cuda.Stream(non_blocking=True)
hold_s = 12.0  # a stuck batch of CTAs gives up after 0.2 s of waiting (FLASHKIT_BWD_DET_GIVE_UP_NS); ~3 batches here
with blocker:
    hold((sms - FREE,), (32,), (np.uint64(int(hold_s * 1e9)),), shared_mem=120 * 1024)
time.sleep(0.2)  # the spinners are resident
t0 = time.perf_counter()
with torch.cuda.stream(stream):
    got = flashkit.attention_backward(dout, q, k, v, out, lse, deterministic=True)
stream.synchronize()
elapsed = time.perf_counter() - t0
blocker_done_first = blocker.done
bits = flashkit.device_errors()  # synchronizes the device (the spinners too)
print(json.dumps({
    "bits_idle": bits_idle, "bits": bits, "elapsed": elapsed, "hold_s": hold_s,
    "blocker_done_first": bool(blocker_done_first),
    "dq_equal": bool(torch.equal(got[0], ref[0])),
    "dq_max_err": float((got[0].float() - ref[0].float()).abs().max()),
    "dq_scale": float(ref[0].float().abs().max()),
    "dk_equal": bool(torch.equal(got[1], ref[1])), "dv_equal": bool(torch.equal(got[2], ref[2])),
}))
"""


# (head dim, sequence length): 128 and 64 key blocks, more than the 48 SMs left free. D 256 at 4k
# is the key-split kernel's (FLASHKIT_BWD_KS_PAIR_DET=0: by default deterministic calls from 4k on
# run on the pair kernel, which never rotates; it has its own ascending-order case below).
# The turns run only with FLASHKIT_BWD_DET_TURNS=1 since the deterministic mode went to fixed-point
# dQ (no turns, hence no residency rule: the last test below).
_CASES = [(128, 16384), (256, 4096)]
_NO_PAIR = {"FLASHKIT_BWD_KS_PAIR_DET": "0", "FLASHKIT_BWD_DET_TURNS": "1"}


def _needs_hopper_det(flashkit_ext, D):
    import torch

    if torch.cuda.get_device_capability() != (9, 0) or flashkit_ext.bwd_kernel_family("bfloat16", D) != "sm90":
        pytest.skip("the rotated deterministic walk is the Hopper backward's")
    if f"bfloat16/{D}" not in set(flashkit_ext.compiled_fwd_variants()):
        pytest.skip(f"bf16 / D {D} not compiled")
    try:
        import cupy  # noqa: F401
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"cupy is needed to hold SMs: {e}")


@pytest.mark.gpu
@pytest.mark.parametrize("D,S", _CASES)
def test_rotated_order_gives_up_instead_of_hanging(flashkit_ext, run_probe, D, S):
    _needs_hopper_det(flashkit_ext, D)
    probe = _PROBE.replace("__D__", str(D)).replace("__S__", str(S))
    r = json.loads(run_probe(probe, _NO_PAIR, env_drop=("FLASHKIT_BWD_DET_ROTATE",), timeout=300).strip().splitlines()[-1])
    assert r["bits_idle"] == 0, r
    # Finished while the spinners still held their SMs (it would otherwise have waited for them).
    assert not r["blocker_done_first"] and r["elapsed"] < r["hold_s"] - 2, r
    assert r["bits"] == int(flashkit_ext.DeviceError.DET_ORDER), r
    assert r["dk_equal"] and r["dv_equal"], r
    assert r["dq_max_err"] <= 0.02 * r["dq_scale"], r  # the same sums, some in another order


@pytest.mark.gpu
@pytest.mark.parametrize("D,S,env", [(d, s, dict(_NO_PAIR, FLASHKIT_BWD_DET_ROTATE="0")) for d, s in _CASES]
                         + [(256, 4096, {"FLASHKIT_BWD_KS_PAIR_DET": "1", "FLASHKIT_BWD_DET_TURNS": "1"})], ids=["128-16384", "256-4096", "256-4096-pair"])
def test_ascending_order_needs_no_residency(flashkit_ext, run_probe, D, S, env):
    _needs_hopper_det(flashkit_ext, D)
    probe = _PROBE.replace("__D__", str(D)).replace("__S__", str(S))
    r = json.loads(run_probe(probe, env, env_drop=("FLASHKIT_BWD_KS_PAIR",), timeout=300).strip().splitlines()[-1])
    assert r["bits_idle"] == 0 and r["bits"] == 0, r
    assert not r["blocker_done_first"] and r["elapsed"] < r["hold_s"] - 2, r
    assert r["dq_equal"] and r["dk_equal"] and r["dv_equal"], r


@pytest.mark.gpu
@pytest.mark.parametrize("D,S", [(64, 16384), (128, 16384), (256, 4096)])
def test_fixed_point_dq_needs_no_residency(flashkit_ext, run_probe, D, S):
    """The default deterministic mode on Hopper adds dQ in fixed point (integer reduce-adds,
    the same bits in any order): no CTA waits for another, so the squeeze changes nothing: no
    report, finished before the spinners, every gradient bitwise equal to the undisturbed run."""
    _needs_hopper_det(flashkit_ext, D)
    probe = _PROBE.replace("__D__", str(D)).replace("__S__", str(S))
    r = json.loads(run_probe(probe, {}, env_drop=("FLASHKIT_BWD_DET_TURNS", "FLASHKIT_BWD_DET_ROTATE"),
                             timeout=300).strip().splitlines()[-1])
    assert r["bits_idle"] == 0 and r["bits"] == 0, r
    assert not r["blocker_done_first"] and r["elapsed"] < r["hold_s"] - 2, r
    assert r["dq_equal"] and r["dk_equal"] and r["dv_equal"], r
