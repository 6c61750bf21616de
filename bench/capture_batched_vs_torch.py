"""Batched GEMMs captured from a real program, replayed batched, and compared bit for bit.

    python bench/capture_batched_vs_torch.py [--dir DIR]

Runs a child program under ``cublas-det capture``: PyTorch's ``torch.bmm`` in bf16 (both operands as
stored, and the second one transposed) and in fp32 with TF32 off (cublasGemmStridedBatchedEx,
cublasSgemmStridedBatched), and one ``cublasGemmBatchedEx`` call with arrays of pointers issued
through ctypes. The child saves its operands and outputs; this script then replays every captured
batched GEMM with ``cublas_det.core`` in its captured configuration on those operands and compares
the output's bits with the child's (as integers). Prints one line per case; exits 0 if all agree,
1 if any differ or was not captured, 2 with one line without a GPU or torch.
"""

import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy

from cublas_det.cli.common import ArgumentParser, prog_name, run_guarded
from cublas_det.core.device import require_gpu
from cublas_det.base.words import plural

CASES = {  # name: (batch, M, N, K, B stored transposed, element type)
    "bmm-bf16": (8, 256, 128, 512, False, "bfloat16"),
    "bmm-bf16-bT": (4, 192, 160, 384, True, "bfloat16"),
    "bmm-fp32": (6, 64, 48, 96, False, "float32"),
    "pointers-bf16": (5, 128, 96, 256, False, "bfloat16"),
}
_INT = {"bfloat16": numpy.int16, "float32": numpy.int32}


def _child(directory: str) -> None:
    import torch

    from cublas_det.bindings import cublas as _cublas

    torch.backends.cuda.matmul.allow_tf32 = False
    generator = torch.Generator(device="cuda").manual_seed(0)
    saved = {}
    for name, (batch, m, n, k, b_t, dtype) in CASES.items():
        kind = getattr(torch, dtype)
        a = torch.randn(batch, m, k, device="cuda", dtype=kind, generator=generator)
        b = torch.randn(*((batch, n, k) if b_t else (batch, k, n)), device="cuda", dtype=kind, generator=generator)
        if name.startswith("pointers"):
            out = torch.empty(batch, m, n, device="cuda", dtype=kind)
            _gemm_batched_ex(_cublas, a, b, out)
        else:
            out = torch.bmm(a, b.transpose(1, 2) if b_t else b)
        torch.cuda.synchronize()
        ints = getattr(torch, {"bfloat16": "int16", "float32": "int32"}[dtype])
        for part, tensor in (("a", a), ("b", b), ("out", out)):
            saved[f"{name}/{part}"] = tensor.view(ints).cpu().numpy()
    numpy.savez(os.path.join(directory, "tensors.npz"), **saved)


def _gemm_batched_ex(cublas, a, b, out) -> None:
    """Row-major out[i] = a[i] @ b[i] through cublasGemmBatchedEx: device arrays of pointers, DEFAULT math."""
    import torch

    batch, m, k = a.shape
    n = b.shape[2]
    pointers = [torch.tensor([t[i].data_ptr() for i in range(batch)], device="cuda", dtype=torch.int64)
                for t in (b, a, out)]
    handle = cublas.cublas_create()
    fn = cublas.library()[0]["cublasGemmBatchedEx"]
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                   ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                   ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                   ctypes.c_int, ctypes.c_int]
    one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
    bf16, compute_32f, default_algo = 14, 68, -1
    try:
        cublas.cublas_set_math_mode(handle, 0)
        status = fn(handle, 0, 0, n, m, k, ctypes.byref(one), pointers[0].data_ptr(), bf16, n, pointers[1].data_ptr(),
                    bf16, k, ctypes.byref(zero), pointers[2].data_ptr(), bf16, n, batch, compute_32f, default_algo)
        if status:
            raise RuntimeError(f"cublasGemmBatchedEx returned {status}")
        torch.cuda.synchronize()
    finally:
        cublas.cublas_destroy(handle)


def _replay(directory: str) -> int:
    import cupy

    from cublas_det import create_handle, gemm
    from cublas_det.apilog import load_capture
    from cublas_det.base.dtypes import GEMM_TYPES

    tensors = numpy.load(os.path.join(directory, "tensors.npz"))
    plans = [p for p in load_capture(os.path.join(directory, "capture.json")).plans if p.replayed]
    failed = 0
    for name, (batch, m, n, k, b_t, dtype) in CASES.items():
        found = [p for p in plans if (p.shape.batch, p.shape.m, p.shape.n, p.shape.k, p.shape.trans_b,
                                      p.config.input_dtype) == (batch, m, n, k, b_t, dtype)]
        if not found:
            print(f"{name}: NOT CAPTURED as a replayable batched GEMM")
            failed += 1
            continue
        plan = found[0]
        kind = GEMM_TYPES[dtype].numpy_dtype
        a, b = (cupy.asarray(tensors[f"{name}/{part}"]).view(kind) for part in ("a", "b"))
        assert a.shape == plan.shape.a_shape and b.shape == plan.shape.b_shape, (name, plan.shape)
        with create_handle(plan.config) as handle:
            out = gemm(a, b, handle=handle, trans_a=plan.shape.trans_a, trans_b=plan.shape.trans_b)
        theirs = tensors[f"{name}/out"]
        differ = int((out.view(_INT[dtype]).get() != theirs).sum())
        failed += differ > 0
        print(f"{name}: {plan.definition.api} {plan.shape.spec} {plan.config.name}, {plural(plan.calls, 'call')}: "
              f"{'bit-identical' if not differ else 'DIFFER'} ({differ} of {theirs.size} elements differ)"
              + (f"; note: {plan.note}" if plan.note else ""))
    return 1 if failed else 0


def _run(argv) -> int:
    parser = ArgumentParser(prog=prog_name(), description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", help="where the capture and the tensors go (default: a temporary folder)")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # the captured program: saves its tensors there
    args = parser.parse_args(argv)
    require_gpu()
    if args.child:
        _child(args.child)
        return 0
    directory = args.dir or tempfile.mkdtemp(prefix="capture-batched-")
    captured = subprocess.run([sys.executable, "-m", "cublas_det.capture", "--out",
                               os.path.join(directory, "capture.json"), "--", sys.executable, __file__, "--child",
                               directory])
    if captured.returncode:
        print(f"the captured program failed (exit {captured.returncode})", file=sys.stderr)
        return 1
    return _replay(directory)


def main(argv=None) -> int:
    return run_guarded(prog_name(), lambda: _run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
