"""PyTorch integration of flashkit on the GPU: the custom ops, torch.compile(fullgraph=True),
CUDA-graph capture and replay, and launches on the current (non-default) stream.

Results are compared bitwise with eager ``flashkit.attention`` calls on the same inputs
(the forward is deterministic; accuracy itself is test_attention_gpu.py's job).
"""

import pytest

torch = pytest.importorskip("torch")

try:
    import flashkit
    from flashkit.testing import attention_reference, attention_pytorch, check_close
except ImportError as e:
    pytest.skip(f"flashkit does not import: {e}", allow_module_level=True)

pytestmark = pytest.mark.gpu

PREFERRED = ["float16/128", "bfloat16/128", "float16/64", "bfloat16/64"]


@pytest.fixture(scope="module")
def variant():
    """(dtype, D) of a compiled variant, preferring 128."""
    compiled = flashkit.compiled_fwd_variants()
    name = next((n for n in PREFERRED if n in compiled), compiled[0] if compiled else None)
    if name is None:
        pytest.skip("no forward variant is compiled into this build")
    dt, d = name.split("/")
    return getattr(torch, dt), int(d)


def qkv(variant, seed, B=2, S_q=96, S_k=160, H_q=8, H_kv=2):
    dt, D = variant
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return tuple(torch.randn(shape, dtype=dt, device="cuda", generator=g)
                 for shape in ((B, S_q, H_q, D), (B, S_k, H_kv, D), (B, S_k, H_kv, D)))


def varlen_inputs(variant, seed, lens_q=(5, 0, 40, 17), lens_k=(9, 3, 40, 0), H_q=8, H_kv=2):
    dt, D = variant
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    q = torch.randn((sum(lens_q), H_q, D), dtype=dt, device="cuda", generator=g)
    k = torch.randn((sum(lens_k), H_kv, D), dtype=dt, device="cuda", generator=g)
    v = torch.randn((sum(lens_k), H_kv, D), dtype=dt, device="cuda", generator=g)

    def cu(lens):
        return torch.tensor([0] + [sum(lens[:i + 1]) for i in range(len(lens))],
                            dtype=torch.int32, device="cuda")

    return q, k, v, cu(lens_q), cu(lens_k), max(lens_q), max(lens_k)


def assert_same(a, b, what):
    assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {a.shape} {a.dtype} vs " \
                                                      f"{b.shape} {b.dtype}"
    assert torch.equal(a, b), f"{what}: differs in {int((a != b).sum())} elements"


# ---------------------------------------------------------------------------------------
# Custom ops
# ---------------------------------------------------------------------------------------


def test_custom_ops_are_registered(variant):
    q, k, v = qkv(variant, 1)
    out, lse = flashkit.attention(q, k, v, causal=True, return_lse=True)  # registers the ops
    assert hasattr(torch.ops, "flashkit")
    op = torch.ops.flashkit.attention_fwd
    varlen_op = torch.ops.flashkit.attention_varlen_fwd
    assert op is not None and varlen_op is not None
    # Documented schema: (q, k, v, causal, softmax_scale, return_lse) -> (out, lse);
    # softmax_scale 0.0 means 1/sqrt(D).
    out_op, lse_op = op(q, k, v, True, 0.0, True)
    assert_same(out_op, out, "torch.ops.flashkit.attention_fwd out")
    assert_same(lse_op, lse, "torch.ops.flashkit.attention_fwd lse")

    q, k, v, cu_q, cu_k, mq, mk = varlen_inputs(variant, 2)
    out, lse = flashkit.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, causal=True,
                                         return_lse=True)
    out_op, lse_op = varlen_op(q, k, v, cu_q, cu_k, mq, mk, True, 0.0, True)
    assert_same(out_op, out, "attention_varlen_fwd out")
    assert_same(lse_op, lse, "attention_varlen_fwd lse")


@pytest.mark.parametrize("return_lse", [False, True])
def test_opcheck(variant, return_lse):
    """torch.library.opcheck: schema, fake (meta) implementation, autograd registration,
    AOT dispatch — what torch.compile relies on."""
    if not hasattr(torch.library, "opcheck"):
        pytest.skip("torch.library.opcheck needs torch >= 2.4")
    q, k, v = qkv(variant, 3)
    flashkit.attention(q, k, v)  # registers the ops
    torch.library.opcheck(torch.ops.flashkit.attention_fwd.default,
                          (q, k, v, True, 0.0, return_lse))
    q, k, v, cu_q, cu_k, mq, mk = varlen_inputs(variant, 4)
    torch.library.opcheck(torch.ops.flashkit.attention_varlen_fwd.default,
                          (q, k, v, cu_q, cu_k, mq, mk, False, 0.0, return_lse))


# ---------------------------------------------------------------------------------------
# torch.compile
# ---------------------------------------------------------------------------------------


class AttentionBlock(torch.nn.Module):
    """Elementwise ops around the attention, all exact in fp16/bf16 (x0.5, x2, +1 in fp32),
    so compiled and eager results must be bitwise equal."""

    def forward(self, x, k, v):
        out, lse = flashkit.attention(x * 0.5, k, v, causal=True, return_lse=True)
        return out * 2, lse + 1.0


class VarlenBlock(torch.nn.Module):
    def __init__(self, max_seqlen_q, max_seqlen_k):
        super().__init__()
        self.max_seqlen_q, self.max_seqlen_k = max_seqlen_q, max_seqlen_k

    def forward(self, q, k, v, cu_q, cu_k):
        out = flashkit.attention_varlen(q, k, v, cu_q, cu_k, self.max_seqlen_q,
                                        self.max_seqlen_k, causal=True)
        return out * 2


def test_torch_compile_fullgraph(variant):
    torch._dynamo.reset()
    block = AttentionBlock()
    compiled = torch.compile(block, fullgraph=True)
    for seed in (5, 6):  # second call: new inputs of the same shape, no recompilation
        x, k, v = qkv(variant, seed)
        with torch.no_grad():
            out_c, lse_c = compiled(x, k, v)
            out_e, lse_e = block(x, k, v)
        assert_same(out_c, out_e, f"compiled vs eager out (seed {seed})")
        assert_same(lse_c, lse_e, f"compiled vs eager lse (seed {seed})")


def test_torch_compile_fullgraph_varlen(variant):
    torch._dynamo.reset()
    q, k, v, cu_q, cu_k, mq, mk = varlen_inputs(variant, 7)
    block = VarlenBlock(mq, mk)
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        assert_same(compiled(q, k, v, cu_q, cu_k), block(q, k, v, cu_q, cu_k),
                    "compiled vs eager varlen out")


# ---------------------------------------------------------------------------------------
# CUDA graphs
# ---------------------------------------------------------------------------------------


def _warm_up(fn):
    """Warm-up on a side stream before capture, as torch.cuda.graph's docs recommend."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()


def test_cuda_graph_capture_and_replay(variant):
    static = [t.clone() for t in qkv(variant, 8)]

    def step():
        return flashkit.attention(*static, causal=True, return_lse=True)

    _warm_up(step)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = step()

    previous = None
    for seed in (9, 10):  # new inputs copied into the captured buffers, then replay
        fresh = qkv(variant, seed)
        for dst, src in zip(static, fresh):
            dst.copy_(src)
        graph.replay()
        torch.cuda.synchronize()
        out_e, lse_e = flashkit.attention(*fresh, causal=True, return_lse=True)
        assert_same(out, out_e, f"replayed out (inputs {seed})")
        assert_same(lse, lse_e, f"replayed lse (inputs {seed})")
        if previous is not None:
            assert not torch.equal(out, previous), "replay did not recompute"
        previous = out.clone()


def test_cuda_graph_capture_varlen(variant):
    q, k, v, cu_q, cu_k, mq, mk = varlen_inputs(variant, 11)
    static = [q.clone(), k.clone(), v.clone()]

    def step():
        return flashkit.attention_varlen(*static, cu_q, cu_k, mq, mk, causal=True,
                                         return_lse=True)

    _warm_up(step)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = step()
    fresh = varlen_inputs(variant, 12)[:3]
    for dst, src in zip(static, fresh):
        dst.copy_(src)
    graph.replay()
    torch.cuda.synchronize()
    out_e, lse_e = flashkit.attention_varlen(*fresh, cu_q, cu_k, mq, mk, causal=True,
                                             return_lse=True)
    assert_same(out, out_e, "replayed varlen out")
    assert_same(lse, lse_e, "replayed varlen lse")


# ---------------------------------------------------------------------------------------
# Streams
# ---------------------------------------------------------------------------------------


def _delay(stream):
    """Keep ``stream`` busy for a while (~0.1 s), so work queued after it on that stream
    runs late and work wrongly sent to another stream would run first."""
    if hasattr(torch.cuda, "_sleep"):
        with torch.cuda.stream(stream):
            torch.cuda._sleep(200_000_000)


def test_runs_on_the_current_stream(variant):
    """flashkit.attention under torch.cuda.stream(side) sees the work queued before it on
    `side`. (A launch on the legacy default stream can still pass here when torch's DLPack
    export makes the default stream wait for the current one; the CUDA-graph tests, which
    capture on a side stream, are the strict check of stream use.)"""
    q_old, k, v = qkv(variant, 13)
    q_new = qkv(variant, 14)[0]
    q = q_old.clone()
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    _delay(side)
    with torch.cuda.stream(side):
        q.copy_(q_new)  # runs after the delay, on `side`
        out, lse = flashkit.attention(q, k, v, causal=True, return_lse=True)
    torch.cuda.synchronize()
    out_e, lse_e = flashkit.attention(q_new, k, v, causal=True, return_lse=True)
    assert_same(out, out_e, "out computed on a side stream (launched on the wrong stream?)")
    assert_same(lse, lse_e, "lse computed on a side stream")


def test_low_level_stream_argument(variant):
    """flashkit._C.attention_fwd(..., stream=s) launches on s, whatever the current stream."""
    q_old, k, v = qkv(variant, 15)
    q_new = qkv(variant, 16)[0]
    q = q_old.clone()
    out = torch.full(q.shape, float("nan"), dtype=q.dtype, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    _delay(side)
    with torch.cuda.stream(side):
        q.copy_(q_new)
    flashkit._C.attention_fwd(q, k, v, out, causal=True, stream=side.cuda_stream)
    torch.cuda.synchronize()
    assert_same(out, flashkit.attention(q_new, k, v, causal=True), "out launched on `side`")


def test_side_stream_result_is_accurate(variant):
    """Same as above but against the reference, for the record."""
    q, k, v = qkv(variant, 17)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = flashkit.attention(q, k, v, causal=True)
    torch.cuda.current_stream().wait_stream(side)
    ref, _ = attention_reference(q, k, v, causal=True)
    res = check_close(out, ref, attention_pytorch(q, k, v, causal=True))
    assert res.ok, res.message
