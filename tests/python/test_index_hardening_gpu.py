"""Wrong index data on the GPU (issue 11): cu_seqlens that decrease, are negative, point
past the end of q/k, do not start at 0 or end at the rows, sequences longer than
max_seqlen; the device error word; check mode; dtype names through the torch fast path.

Each bad case (``flashkit.testing.bad_index``) checks that nothing is written outside
out/lse, that out/lse hold exactly what the contract says (valid sequences bitwise as in a
batch of their own, out = 0 / lse = -inf for a bad k range, untouched rows for a bad q
range), and that the device error word has exactly the expected bits and is clear after
reading. compute-sanitizer memcheck runs the same cases (scripts/sanitize_small.py), which
is what shows that nothing is read out of bounds.

Run: ``pytest -m gpu tests/python/test_index_hardening_gpu.py``.
"""

import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

try:
    import flashkit
    from flashkit.testing import bad_index
except ImportError as e:  # FLASHKIT_REQUIRE_EXT / _GPU turn this into an error in conftest
    pytest.skip(f"flashkit does not import: {e}", allow_module_level=True)

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
CASES = {c.name: c for c in bad_index.CASES}


def _variants():
    """(dtype, D) to run: bf16 (else fp16) at the compiled head dims among 64, 96, 128 (on
    a Hopper GPU 64/128 run the sm90 kernels and 96 the portable one)."""
    compiled = set(flashkit.compiled_fwd_variants()) if flashkit._C is not None else set()
    for name in ("bfloat16", "float16"):
        dims = [d for d in (64, 96, 128) if f"{name}/{d}" in compiled]
        if dims:
            return [(name, d) for d in dims]
    return [("bfloat16", 128)]  # nothing compiled: the test reports it


VARIANTS = _variants()


def _gen(*case):
    g = torch.Generator(device="cuda")
    g.manual_seed(zlib.crc32(repr(case).encode()))
    return g


def _require(dtype_name, D):
    if f"{dtype_name}/{D}" not in flashkit.compiled_fwd_variants():
        pytest.skip(f"{dtype_name}/{D} is not compiled into this build")


@pytest.fixture(autouse=True)
def _clean_error_word():
    flashkit.device_errors(clear=True)
    yield
    flashkit.device_errors(clear=True)


# ---------------------------------------------------------------------------------------
# Bad cu_seqlens: no out-of-bounds access, outputs as specified, the error word
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: f"{v[0]}-D{v[1]}")
@pytest.mark.parametrize("case", list(CASES), ids=str)
def test_bad_cu_seqlens(case, variant, causal):
    dtype_name, D = variant
    _require(dtype_name, D)
    c = CASES[case]
    problems = bad_index.run_case(flashkit, torch, c, getattr(torch, dtype_name), D, causal,
                                  _gen("bad", case, variant, causal))
    assert not problems, f"{case} ({flashkit.fwd_kernel_family(dtype_name, D)} kernel): " + \
        "; ".join(problems)


@pytest.mark.parametrize("case", [c for c in CASES if c != "valid"], ids=str)
def test_check_mode_raises_the_documented_value_error(case):
    dtype_name, D = VARIANTS[0]
    _require(dtype_name, D)
    problems = bad_index.run_check_mode(flashkit, torch, CASES[case], getattr(torch, dtype_name),
                                        D, True, _gen("check", case))
    assert not problems, f"{case}: " + "; ".join(problems)


def test_check_mode_leaves_valid_results_unchanged():
    dtype_name, D = VARIANTS[0]
    _require(dtype_name, D)
    problems = bad_index.run_check_mode(flashkit, torch, CASES["valid"],
                                        getattr(torch, dtype_name), D, True, _gen("check_ok"))
    assert not problems, "; ".join(problems)


def _varlen_inputs(case, dtype_name, D, seed):
    c = CASES[case]
    q, k, v, cu_q, cu_k = bad_index._inputs(torch, c, getattr(torch, dtype_name), D, _gen(seed))
    return q, k, v, cu_q, cu_k, c.max_q, c.max_k


def test_public_api_check_inputs_and_error_word():
    """flashkit.attention_varlen: check_inputs=True raises; without it the call returns,
    the error word says what happened and check_device_errors raises once, then clears."""
    dtype_name, D = VARIANTS[0]
    _require(dtype_name, D)
    q, k, v, cu_q, cu_k, mq, mk = _varlen_inputs("k_past_end", dtype_name, D, "api")
    with pytest.raises(ValueError, match=r"^cu_seqlens_k: past the end of k at index 2 "):
        flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, check_inputs=True)
    assert flashkit.device_errors() == 0  # nothing was launched
    out = flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk)
    assert bool(torch.isfinite(out).all())
    assert flashkit.device_errors(clear=False) == flashkit.DeviceError.CU_SEQLENS
    with pytest.raises(RuntimeError, match=r"cu_seqlens invalid \(bit 0x1\)") as ei:
        flashkit.check_device_errors()
    assert "check_inputs=True" in str(ei.value)
    flashkit.check_device_errors()  # cleared by the first call: no raise
    assert flashkit.device_errors(device=torch.device("cuda", q.device.index)) == 0


def test_torch_custom_op_passes_check_inputs():
    """The torch.library op path (inputs requiring grad do not take the eager shortcut)."""
    dtype_name, D = VARIANTS[0]
    _require(dtype_name, D)
    q, k, v, cu_q, cu_k, mq, mk = _varlen_inputs("k_decreasing", dtype_name, D, "op")
    qg = q.clone().requires_grad_()
    with pytest.raises(ValueError, match=r"^cu_seqlens_k: not non-decreasing at index 2 "):
        flashkit.attention_varlen(qg, k, v, cu_q, cu_k, mq, mk, check_inputs=True)
    with pytest.raises(ValueError, match=r"^cu_seqlens_k: not non-decreasing"):
        torch.ops.flashkit.attention_varlen_fwd(q, k, v, cu_q, cu_k, mq, mk, False, 0.0, False,
                                                True)
    out, _ = torch.ops.flashkit.attention_varlen_fwd(q, k, v, cu_q, cu_k, mq, mk, False, 0.0,
                                                     False)
    torch.cuda.synchronize()
    assert flashkit.device_errors() == flashkit.DeviceError.CU_SEQLENS
    assert out.shape == q.shape


def test_error_word_is_sticky_until_cleared():
    dtype_name, D = VARIANTS[0]
    _require(dtype_name, D)
    q, k, v, cu_q, cu_k, mq, mk = _varlen_inputs("q_longer_than_max", dtype_name, D, "sticky")
    flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk)
    qv, kv, vv, cqv, ckv, mqv, mkv = _varlen_inputs("valid", dtype_name, D, "sticky2")
    flashkit.attention_varlen(qv, kv, vv, cqv, ckv, mqv, mkv)  # a valid call clears nothing
    E = flashkit.DeviceError
    assert flashkit.device_errors(clear=False) == E.SEQLEN_ABOVE_MAX
    assert flashkit.device_errors(clear=False) == E.SEQLEN_ABOVE_MAX
    flashkit.attention_varlen(*_varlen_inputs("k_negative", dtype_name, D, "sticky3"))
    assert flashkit.device_errors() == E.SEQLEN_ABOVE_MAX | E.CU_SEQLENS
    assert flashkit.device_errors() == 0


def test_check_mode_is_refused_during_graph_capture():
    dtype_name, D = VARIANTS[0]
    _require(dtype_name, D)
    q, k, v, cu_q, cu_k, mq, mk = _varlen_inputs("valid", dtype_name, D, "graph")
    out = torch.full_like(q, float("nan"))  # poisoned: only the replay may write it
    flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk)  # warm-up outside capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    raised = None
    with torch.cuda.stream(stream):
        with torch.cuda.graph(g, stream=stream):
            try:
                flashkit._C.attention_fwd(q, k, v, out, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                                          max_seqlen_q=mq, max_seqlen_k=mk,
                                          stream=stream.cuda_stream, check_inputs=True)
            except ValueError as e:
                raised = str(e)
            # without check mode the same call captures fine
            flashkit._C.attention_fwd(q, k, v, out, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                                      max_seqlen_q=mq, max_seqlen_k=mk,
                                      stream=stream.cuda_stream)
    assert raised is not None and raised.startswith("check_inputs: ") and "CUDA graph" in raised
    g.replay()
    torch.cuda.synchronize()
    expected = flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk)
    assert torch.equal(out, expected)


def test_check_inputs_environment_variable():
    """FLASHKIT_CHECK_INPUTS=1 (read once: a fresh process) checks every varlen call."""
    dtype_name, D = VARIANTS[0]
    _require(dtype_name, D)
    code = f"""
import torch, flashkit
from flashkit.testing import bad_index
c = {{x.name: x for x in bad_index.CASES}}
q, k, v, cq, ck = bad_index._inputs(torch, c["q_nonzero_start"], torch.{dtype_name}, {D},
                                    torch.Generator(device="cuda"))
try:
    flashkit.attention_varlen(q, k, v, cq, ck, c["q_nonzero_start"].max_q,
                              c["q_nonzero_start"].max_k)
    print("NO ERROR")
except ValueError as e:
    print("ValueError:", e)
q, k, v, cq, ck = bad_index._inputs(torch, c["valid"], torch.{dtype_name}, {D},
                                    torch.Generator(device="cuda"))
flashkit.attention_varlen(q, k, v, cq, ck, c["valid"].max_q, c["valid"].max_k)
print("valid ok", flashkit.device_errors())
"""
    env = dict(os.environ, FLASHKIT_CHECK_INPUTS="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ValueError: cu_seqlens_q: does not start at 0 (cu_seqlens_q[0] = 8)" in r.stdout, \
        r.stdout
    assert "valid ok 0" in r.stdout, r.stdout


def test_portable_family_with_bad_cu_seqlens():
    """On a Hopper GPU the tests above run the sm90 kernels for D 64/128: run every bad
    case through the portable kernels too (FLASHKIT_FWD_PORTABLE=1, a fresh process)."""
    dtype_name, D = VARIANTS[0]
    env = dict(os.environ, FLASHKIT_FWD_PORTABLE="1")
    # (first: that the switch does put these variants on the portable family in a fresh process)
    probe = ("import flashkit; print(sorted({flashkit.fwd_kernel_family('%s', d) for d in %r}))"
             % (dtype_name, [d for _, d in VARIANTS]))
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "['sm80']", r.stdout
    cmd = [sys.executable, str(REPO / "scripts" / "sanitize_small.py"), "--bad-index-only",
           "--dtypes", dtype_name, "--dims"] + [str(d) for _, d in VARIANTS]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{r.stdout[-4000:]}\n{r.stderr[-3000:]}"
    assert "cases passed" in r.stdout, r.stdout[-2000:]


# ---------------------------------------------------------------------------------------
# The block-table check (for the paged-decode ops to come), through its testing hook
# ---------------------------------------------------------------------------------------


def _block_table(B=300, max_pages=200, num_pages=5000, page_size=16, seed="bt"):
    g = _gen(seed)
    lengths = torch.randint(0, max_pages * page_size + 1, (B,), device="cuda", generator=g,
                            dtype=torch.int32)
    table = torch.randint(0, num_pages, (B, max_pages), device="cuda", generator=g,
                          dtype=torch.int32)
    pages = (lengths + page_size - 1) // page_size
    unused = torch.arange(max_pages, device="cuda")[None, :] >= pages[:, None]
    table[unused] = -123456  # garbage where no page is used: allowed
    return table, lengths, num_pages, page_size


def _check_block_table(table, lengths, num_pages, page_size):
    flashkit._C._check_block_table(table, lengths, num_pages, page_size,
                                   torch.cuda.current_stream().cuda_stream)


def test_block_table_check_accepts_valid_tables():
    table, lengths, num_pages, page_size = _block_table()
    _check_block_table(table, lengths, num_pages, page_size)
    # a slice of a wider table (row stride > max_pages)
    wide = torch.full((table.shape[0], table.shape[1] + 37), -1, dtype=torch.int32,
                      device="cuda")
    wide[:, :table.shape[1]] = table
    _check_block_table(wide[:, :table.shape[1]], lengths, num_pages, page_size)
    _check_block_table(table[:0], lengths[:0], num_pages, page_size)  # B = 0


def test_block_table_check_reports_the_first_bad_entry():
    table, lengths, num_pages, page_size = _block_table(seed="bt_bad")
    lengths[7] = 50 * page_size + 3  # sequence 7 uses entries 0..50
    lengths[250] = 200 * page_size   # sequence 250 uses all 200
    table[7] = torch.arange(200, dtype=torch.int32, device="cuda")
    table[250] = torch.arange(200, dtype=torch.int32, device="cuda") + 1000
    table[7, 50] = num_pages  # first violation, among later ones
    table[250, 199] = -1
    table[7, 51] = -5         # unused entry: not a violation
    with pytest.raises(ValueError) as ei:
        _check_block_table(table, lengths, num_pages, page_size)
    assert str(ei.value) == (
        f"block_table: block id out of range at [7, 50] (block_table[7, 50] = {num_pages}, "
        f"expected 0 <= id < num_pages = {num_pages}; sequence 7 uses its first 51 entries: "
        f"seqlens_k[7] = {50 * page_size + 3}, page_size = {page_size})")
    table[7, 50] = 0
    with pytest.raises(ValueError, match=r"^block_table: block id out of range at \[250, 199\] "
                                         r"\(block_table\[250, 199\] = -1,"):
        _check_block_table(table, lengths, num_pages, page_size)
    table[250, 199] = 1
    lengths[3] = -2
    lengths[100] = 200 * page_size + 1
    with pytest.raises(ValueError, match=r"^seqlens_k: negative at index 3 \(seqlens_k\[3\] = -2\)$"):
        _check_block_table(table, lengths, num_pages, page_size)
    lengths[3] = 0
    with pytest.raises(ValueError, match=r"^seqlens_k: more than the block table holds at index "
                                         r"100 \(seqlens_k\[100\] = 3201 > max_pages \* page_size "
                                         r"= 200 \* 16 = 3200\)$"):
        _check_block_table(table, lengths, num_pages, page_size)


# ---------------------------------------------------------------------------------------
# dtype names through the torch fast path, on every tensor argument
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["int64", "float32", "uint8", "bool"])
@pytest.mark.parametrize("arg", ["q", "k", "v", "out", "lse", "cu_seqlens_q", "cu_seqlens_k"])
def test_dtype_message_names_the_torch_dtype(arg, bad):
    dtype_name, D = VARIANTS[0]
    _require(dtype_name, D)
    if arg == "lse" and bad == "float32":
        pytest.skip("float32 is lse's dtype")
    q, k, v, cu_q, cu_k, mq, mk = _varlen_inputs("valid", dtype_name, D, "dtype")
    args = dict(q=q, k=k, v=v, out=torch.empty_like(q),
                lse=torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device="cuda"),
                cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    args[arg] = torch.zeros(args[arg].shape, dtype=getattr(torch, bad), device="cuda")
    expected = {"q": "float16 or bfloat16", "lse": "float32", "cu_seqlens_q": "int32",
                "cu_seqlens_k": "int32"}.get(arg, f"{dtype_name} (same as q)")
    with pytest.raises(ValueError) as ei:
        flashkit._C.attention_fwd(**args, max_seqlen_q=mq, max_seqlen_k=mk,
                                  stream=torch.cuda.current_stream().cuda_stream)
    assert str(ei.value) == f"{arg}: expected dtype {expected}, got {bad}"
    if arg in ("cu_seqlens_q", "cu_seqlens_k"):  # the public API says the same
        with pytest.raises(ValueError, match=rf"^{arg}: expected dtype int32, got {bad}$"):
            flashkit.attention_varlen(q, k, v, args["cu_seqlens_q"], args["cu_seqlens_k"], mq, mk)
