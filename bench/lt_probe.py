"""cuBLASLt against cublasGemmEx, and the split-K levers, on the GEMMs whose bits change with the SM count.

    python bench/lt_probe.py [--torch]

For each shape: does the Lt heuristic's first choice give GemmEx's bits? Which algorithm does it
pick at the full SM count and under SM-count targets, and do the bits change? With the
reduction-scheme mask NONE (no split-K), and with the full-SM algorithm pinned, are the bits the
same under every target? With --torch: a bf16 biased Linear (PyTorch's cublasLtMatmul with the BIAS
epilogue), against cuBLASLt through the shim on the same tensors.
"""

import argparse

import cupy

from cublas_det import create_handle, gemm
from cublas_det.lt import LtGemm, LtOptions, split_k
from cublas_det.shapes import parse_shape

SHAPES = ("128x56x4096:nt", "128x128x4096:nt", "128x128x4096:nn", "768x1536x16384:nt")
TARGETS = (0, 66, 16)


def _operands(shape, dtype, seed=0):
    rng = cupy.random.default_rng(seed)
    a = rng.standard_normal(shape.a_shape, dtype=cupy.float32).astype(dtype)
    b = rng.standard_normal(shape.b_shape, dtype=cupy.float32).astype(dtype)
    return a, b


def _lt(a, b, shape, dtype, options):
    out = cupy.empty((shape.m, shape.n), dtype=dtype)
    with LtGemm(a, b, out, trans_a=shape.trans_a, trans_b=shape.trans_b, options=options) as call:
        call()
        cupy.cuda.get_current_stream().synchronize()
        return out, call.algo


def _same(x, y) -> bool:
    return bool(cupy.array_equal(x.view(cupy.uint8), y.view(cupy.uint8)))


def _brief(algo) -> str:
    c = dict(algo)
    return f"algo {c['algo_id']} tile {c['tile']} splitK {c['splitk']} reduction {c['reduction_scheme']}"


def probe(spec: str, dtype) -> None:
    shape = parse_shape(spec)
    a, b = _operands(shape, dtype)
    ref = cupy.empty((shape.m, shape.n), dtype=dtype)
    with create_handle("default") as handle:
        gemm(a, b, out=ref, handle=handle, trans_a=shape.trans_a, trans_b=shape.trans_b)
    cupy.cuda.get_current_stream().synchronize()
    print(f"{spec} {cupy.dtype(dtype).name}")
    full, full_algo = _lt(a, b, shape, dtype, LtOptions())
    print(f"  Lt heuristic, full SM count: {_brief(full_algo)}; split-K {split_k(full_algo)}; "
          f"same bits as cublasGemmEx: {_same(full, ref)}")
    for label, make in (("heuristic", lambda t: LtOptions(sm_count_target=t)),
                        ("reduction NONE", lambda t: LtOptions(sm_count_target=t, reduction_scheme_mask=0)),
                        ("pinned full-SM algo", lambda t: LtOptions(sm_count_target=t, algo=full_algo))):
        base = None
        row = []
        for target in TARGETS:
            out, algo = _lt(a, b, shape, dtype, make(target))
            if base is None:
                base = out
            same = _same(out, base)
            row.append(f"target {target or 'full'}: {_brief(algo)}, {'same bits' if same else 'OTHER BITS'}")
        print(f"  {label}: " + "; ".join(row))


def torch_bias() -> None:
    import torch

    torch.manual_seed(0)
    x = torch.randn(16384, 768, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(3352, 768, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(3352, device="cuda", dtype=torch.bfloat16)
    want = torch.nn.functional.linear(x, w, bias)
    out = torch.empty_like(want)
    # PyTorch's call as the capture logged it: 1 MiB workspace, heuristic choice
    with LtGemm(x, w, out, trans_b=True, bias=bias, options=LtOptions(workspace_bytes=1 << 20)) as call:
        call()
        torch.cuda.synchronize()
        algo = call.algo
    same = torch.equal(out.view(torch.int16), want.view(torch.int16))
    print(f"torch bf16 Linear(768, 3352, bias) on x[16384, 768]: cuBLASLt BIAS epilogue through the shim "
          f"{'bit-identical to' if same else 'DIFFERS from'} torch ({int((out != want).sum())} of {out.numel()} "
          f"elements differ); {_brief(algo)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch", action="store_true")
    args = parser.parse_args()
    for spec in SHAPES:
        probe(spec, cupy.float32)
    probe("768x1536x16384:nt", _bf16())
    if args.torch:
        torch_bias()


def _bf16():
    import ml_dtypes

    return ml_dtypes.bfloat16


if __name__ == "__main__":
    main()
