"""The lock applied to PyTorch (its GEMMs routed, autograd, graphs, what falls through, the run
command) and the audit of a step: on a GPU with PyTorch."""

import json
import re
import subprocess
import sys
import textwrap

import pytest

from cublas_det import GemmConfig, MathMode
from cublas_det.lock import file as lockfile
from cublas_det.core.shapes import parse_shape

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

BF16 = GemmConfig(MathMode.DEFAULT, input_dtype="bfloat16", output_dtype="bfloat16")
# Linear(256 -> 384) on 512 tokens: forward, dX, dW; a batched matmul; the same forward with a bias.
SHAPES = ("512x384x256:tn", "512x256x384:nn", "384x256x512:nt", "64x32x128:nn:b4")
FAST = {"min_visits": 2, "max_visits": 2, "budget_s": 0.2}


@pytest.fixture(scope="module")
def lock_path(tmp_path_factory):
    from cublas_det.prescribe import lock_entries

    import dataclasses

    entries, refused = lock_entries([parse_shape(s) for s in SHAPES], [BF16], timing=FAST)
    biased, refused_bias = lock_entries([parse_shape(SHAPES[0])],
                                        [dataclasses.replace(BF16, api="lt", lt_epilogue="BIAS")], timing=FAST)
    assert not refused and not refused_bias, refused + refused_bias
    from cublas_det.core.device import fingerprint

    path = str(tmp_path_factory.mktemp("lock") / "lock.json")
    lockfile.write(lockfile.Lock(lockfile.where_here(fingerprint()), {}, path).merged(entries + biased), path)
    return path


def _bits(t):
    return t.detach().contiguous().view(torch.int16)


def _same(a, b):
    return torch.equal(_bits(a), _bits(b))


def _linear(bias=False, out=384, seed=0):
    torch.manual_seed(seed)
    layer = torch.nn.Linear(256, out, bias=bias).to("cuda", torch.bfloat16)
    x = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(512, out, device="cuda", dtype=torch.bfloat16)
    return layer, x, grad


def _pinned_gemm(lock_path, spec, a, b, trans_a=False, trans_b=False, bias=None, epilogue=""):
    """What the lock's configuration of ``spec`` gives through cublas_det.core itself."""
    from cublas_det import create_handle, gemm

    shape = parse_shape(spec)
    key = lockfile.GemmKey.of(shape, GemmConfig(MathMode.DEFAULT, input_dtype="bfloat16",
                                                            output_dtype="bfloat16", lt_epilogue=epilogue,
                                                            api="lt" if epilogue else "gemm_ex"))
    with create_handle(lockfile.load(lock_path).config_for(key, shape.m)) as handle:
        out = gemm(a.detach(), b.detach(), handle=handle, trans_a=trans_a, trans_b=trans_b, bias=bias)
    return torch.from_dlpack(out)


def test_a_locked_linear_runs_the_pinned_gemms_forward_and_backward(lock_path):
    import cublas_det.torch as cdt

    layer, x, grad = _linear()
    with cdt.lock(lock_path, report=None) as router:
        y = layer(x)
        y.backward(grad)
    report = router.last_report
    assert report.locked_calls == 3 and not report.fell_through, str(report)
    w = layer.weight
    assert _same(y, _pinned_gemm(lock_path, SHAPES[0], x, w, trans_b=True))
    assert _same(x.grad, _pinned_gemm(lock_path, SHAPES[1], grad, w))
    assert _same(w.grad, _pinned_gemm(lock_path, SHAPES[2], grad, x, trans_a=True))


def test_locked_rows_do_not_depend_on_the_batch(lock_path):
    import cublas_det.torch as cdt

    layer, x, _ = _linear()
    with torch.no_grad(), cdt.lock(lock_path, report=None):
        full = layer(x)
        for m in (1, 3, 16, 100, 511):
            assert _same(layer(x[:m]), full[:m]), m


def test_a_biased_linear_and_a_bmm_are_locked(lock_path):
    import cublas_det.torch as cdt

    layer, x, _ = _linear(bias=True)
    a = torch.randn(4, 64, 128, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4, 128, 32, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad(), cdt.lock(lock_path, report=None) as router:
        y = layer(x)
        c = torch.bmm(a, b)
    assert router.last_report.locked_calls == 2, str(router.last_report)
    assert _same(y, _pinned_gemm(lock_path, SHAPES[0], x, layer.weight, trans_b=True, bias=layer.bias.detach(),
                                 epilogue="BIAS"))
    assert _same(c, _pinned_gemm(lock_path, SHAPES[3], a, b))


def test_a_gemm_not_in_the_lock_falls_through_to_torchs_own_bits(lock_path):
    import cublas_det.torch as cdt

    layer, x, _ = _linear(out=100)
    with torch.no_grad():
        plain = layer(x)
        with cdt.lock(lock_path, report=None) as router:
            locked = layer(x)
    report = router.last_report
    assert _same(plain, locked)
    (gemm, item), = report.fell_through.items()
    assert gemm == "Mx100x256:tn bf16" and item["reason"] == "not in the lock" and item["calls"] == 1
    assert "--shape 512x100x256:tn --dtype bf16 --modes default" in str(report)


def test_locked_gemms_are_captured_in_a_cuda_graph(lock_path):
    import cublas_det.torch as cdt

    layer, x, _ = _linear()
    with torch.no_grad(), cdt.lock(lock_path, report=None):
        eager = layer(x)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            layer(x)  # warm-up on the capturing stream: its workspace is made outside the graph
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = layer(x)
        graph.replay()
        torch.cuda.synchronize()
    assert _same(captured, eager)


def test_a_lock_from_another_gpu_is_refused_in_one_line(lock_path, tmp_path, typed):
    import cublas_det.torch as cdt

    data = json.load(open(lock_path))
    gpu = data["where"]["gpu"] = data["where"]["gpu"] + " (another)"  # not this GPU, whichever it is
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data))
    try:
        with pytest.raises(lockfile.LockMismatch, match=re.escape(f"gpu {gpu} there")):
            cdt.enable(str(other))
        assert cdt.active() is None
    finally:
        cdt.disable()  # a lock taken by mistake stays in no other test
    result = typed("cublas-det", "run", "--lock", other, "--", sys.executable, "-c", "pass")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "written elsewhere" in result.stderr


def test_run_locks_a_script_that_never_imports_cublas_det(lock_path, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch
        torch.manual_seed(0)
        layer = torch.nn.Linear(256, 384, bias=False).to("cuda", torch.bfloat16)
        x = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        layer(x).float().sum().backward()
        print("trained", "cublas_det" in __import__("sys").modules)
    """))
    result = subprocess.run([sys.executable, "-m", "cublas_det", "run", "--lock", lock_path, "--", sys.executable,
                             str(script)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("trained True")  # entered through sitecustomize, the script unchanged
    assert "1 process\nlocked 3 calls of 3 GEMMs; 0 calls of 0 GEMMs fell through" in result.stderr


def test_a_bmm_is_locked_for_every_batch_count_and_its_matrices_alone(lock_path):
    import cublas_det.torch as cdt

    torch.manual_seed(0)
    a = torch.randn(8, 64, 128, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8, 128, 32, device="cuda", dtype=torch.bfloat16)  # the lock's entry was verified at 4
    with torch.no_grad(), cdt.lock(lock_path, report=None) as router:
        full = torch.bmm(a, b)
        parts = {n: torch.bmm(a[:n], b[:n]) for n in (1, 2, 3, 5)}
        alone = torch.mm(a[0], b[0])  # the unbatched call of the same GEMM, as torch folds a batch of one
        shared = torch.bmm(a, b[:1].expand(8, -1, -1))  # one matrix for the whole batch: a stride of 0
    report = router.last_report
    assert report.locked_calls == 7 and not report.fell_through, str(report)
    assert all(_same(part, full[:n]) for n, part in parts.items())
    assert _same(alone, full[0]) and _same(shared[0], full[0])


def test_the_out_overloads_that_compiled_code_calls_are_locked(lock_path):
    import cublas_det.torch as cdt

    layer, x, _ = _linear(bias=True)
    a = torch.randn(4, 64, 128, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4, 128, 32, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad(), cdt.lock(lock_path, report=None) as router:
        biased, batched = layer(x), torch.bmm(a, b)
        outs = [torch.empty_like(biased), torch.empty_like(batched), torch.empty_like(batched)]
        torch.addmm(layer.bias, x, layer.weight.t(), out=outs[0])
        torch.bmm(a, b, out=outs[1])
        torch.baddbmm(outs[2], a, b, beta=0, out=outs[2])
    report = router.last_report
    assert report.locked_calls == 5 and not report.fell_through, str(report)
    assert _same(outs[0], biased) and _same(outs[1], batched) and _same(outs[2], batched)


D, L = 256, 64


class _Block(torch.nn.Module):
    """Attention-like: biased Linears, bmm(q, k^T), bmm(p, v), an einsum; between them only exact elementwise
    work (ReLU, a power of 2), so that compiled code can differ from eager only where a GEMM does."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (torch.nn.Linear(D, D) for _ in range(4))
        self.w = torch.nn.Parameter(torch.randn(D, D) / 16)

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        p = torch.relu(torch.bmm(q, k.transpose(1, 2)) / 16)
        return self.o(torch.relu(torch.einsum("bld,de->ble", torch.bmm(p, v), self.w)))


BLOCK_SHAPES = (f"{8 * L}x{D}x{D}:nn", f"{L}x{L}x{D}:tn:b8", f"{L}x{D}x{L}:nn:b8")  # einsum, q k^T, p v


@pytest.fixture(scope="module", params=["bfloat16", "float32"])
def block_lock(request, tmp_path_factory):
    """The block's lock in bf16, or in fp32 with TF32 on (as torch runs it then), and that setting."""
    import dataclasses

    from cublas_det.core.device import fingerprint
    from cublas_det.prescribe import lock_entries

    dtype = request.param
    config = GemmConfig(MathMode.TF32 if dtype == "float32" else MathMode.DEFAULT, input_dtype=dtype,
                        output_dtype=dtype)
    entries, refused = lock_entries([parse_shape(s) for s in BLOCK_SHAPES], [config], timing=FAST)
    biased, refused_bias = lock_entries([parse_shape(f"{8 * L}x{D}x{D}:tn")],
                                        [dataclasses.replace(config, api="lt", lt_epilogue="BIAS")], timing=FAST)
    assert not refused and not refused_bias, refused + refused_bias
    path = str(tmp_path_factory.mktemp("block") / f"{dtype}.json")
    lockfile.write(lockfile.Lock(lockfile.where_here(fingerprint()), {}, path).merged(entries + biased), path)
    return dtype, path


@pytest.fixture
def block(block_lock):
    dtype, path = block_lock
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "float32"
    torch.manual_seed(0)
    model = _Block().to("cuda", getattr(torch, dtype))
    x = torch.randn(8, L, D, device="cuda", dtype=getattr(torch, dtype))
    yield model, x, path
    torch.backends.cuda.matmul.allow_tf32 = before


def test_a_locked_model_keeps_sample_0_at_every_batch_size(block):
    import cublas_det.torch as cdt

    model, x, path = block
    with torch.no_grad(), cdt.lock(path, report=None) as router:
        outs = {n: model(x[:n]) for n in (1, 2, 8)}
    assert not router.last_report.fell_through, str(router.last_report)
    assert _same(outs[1][0], outs[8][0]) and _same(outs[2][0], outs[8][0])


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_a_compiled_model_runs_every_gemm_locked_with_the_eager_bits(block, mode):
    import cublas_det.torch as cdt

    model, x, path = block
    torch._dynamo.reset()
    with torch.no_grad(), cdt.lock(path, report=None) as eager:
        expected = model(x)
    compiled = torch.compile(model, mode=mode)
    with torch.no_grad(), cdt.lock(path, report=None) as router:
        for _ in range(3):  # reduce-overhead: warm-up, record, replay
            out = compiled(x).clone()
    report = router.last_report
    assert not report.fell_through and report.locked_calls >= eager.last_report.locked_calls > 0, str(report)
    assert _same(out, expected)


class _Shift(torch.nn.Module):
    """A planted batch-variant op: each sample moved by the mean over the batch."""

    def forward(self, h):
        return h - h.mean(0, keepdim=True)


class _Model(torch.nn.Module):
    def __init__(self, planted=False):
        super().__init__()
        self.proj = torch.nn.Linear(256, 384, bias=False)
        self.act = torch.nn.ReLU()
        self.shift = _Shift() if planted else torch.nn.Identity()

    def forward(self, x):
        return self.shift(self.act(self.proj(x)))


def _forward_step(model, inputs):
    def step(n):
        with torch.no_grad():
            return model(inputs[:n])
    return step


def test_the_audit_of_a_locked_clean_model_says_clean(lock_path):
    import cublas_det.torch as cdt

    torch.manual_seed(0)
    model = _Model().to("cuda", torch.bfloat16)
    inputs = torch.randn(4, 128, 256, device="cuda", dtype=torch.bfloat16)  # 4 samples of 128 tokens: M = 512
    with cdt.lock(lock_path, report=None):
        report = cdt.audit(_forward_step(model, inputs), 4, model=model)
    assert report.clean, str(report)
    assert report.batch.gemms and all(locked and same for _, _, locked, same in report.batch.gemms)
    assert "every op identical" in str(report) and "locked" in str(report)


def test_the_audit_names_a_planted_batch_variant_op(lock_path):
    import cublas_det.torch as cdt

    torch.manual_seed(0)
    model = _Model(planted=True).to("cuda", torch.bfloat16)
    inputs = torch.randn(4, 128, 256, device="cuda", dtype=torch.bfloat16)
    with cdt.lock(lock_path, report=None):
        report = cdt.audit(_forward_step(model, inputs), 4, model=model)
    first = report.batch.first
    assert not report.clean and first is not None, str(report)
    assert first.module == "shift" and first.op == "aten.sub.Tensor" and first.differing > 0
    assert all(locked and same for _, _, locked, same in report.batch.gemms)  # the GEMM before it held
    assert report.repeat.first is None  # it is batch-variant, not non-deterministic
    assert "first op that differs: aten.sub.Tensor in shift" in str(report)


def test_the_repeat_audit_names_index_add():
    import cublas_det.torch as cdt

    source = torch.randn(4 * 65536, 64, device="cuda")
    index = torch.randint(0, 8, (4 * 65536,), device="cuda")  # 32,768 atomic adds into each row

    def step(n):
        rows = n * 65536
        return torch.zeros(8, 64, device="cuda").index_add_(0, index[:rows], source[:rows])

    report = cdt.audit(step, 4)
    assert report.repeat.first is not None and report.repeat.first.op == "aten.index_add_.default", str(report)
    assert report.repeat.first.max_ulp > 0 and not report.clean
