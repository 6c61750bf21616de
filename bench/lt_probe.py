"""cuBLASLt against cublasGemmEx, and the split-K levers, on the GEMMs whose bits change with the SM count.

    python bench/lt_probe.py [--torch]

For each shape: does the Lt heuristic's first choice give GemmEx's bits? Which algorithm does it
pick at the full SM count and under SM-count targets, and do the bits change? With the
reduction-scheme mask NONE (no split-K), and with the full-SM algorithm pinned, are the bits the
same under every target? With --torch: a bf16 biased Linear (PyTorch's cublasLtMatmul with the BIAS
epilogue), against cuBLASLt through the shim on the same tensors. Exit codes: 0 printed (the
answers are printed, not judged); 2 with one line without a GPU, CuPy or (with --torch) PyTorch, or
for a bad argument; 130 interrupted.
"""

import dataclasses
import sys

from cublas_det import create_handle, gemm
from cublas_det.cli.common import ArgumentParser, prog_name, run_guarded
from cublas_det.core.config import GemmConfig
from cublas_det.core.device import require_gpu
from cublas_det.prescribe import pinned_algorithm
from cublas_det.core.shapes import parse_shape

def _split_k(algo: tuple) -> bool:
    config = dict(algo)
    return config.get("splitk", 1) > 1 or config.get("reduction_scheme", 0) != 0


SHAPES = ("128x56x4096:nt", "128x128x4096:nt", "128x128x4096:nn", "768x1536x16384:nt")
TARGETS = (0, 66, 16)


def _operands(shape, dtype, seed=0):
    import cupy
    import numpy

    # Drawn on the host: cupy.random needs cuRAND, which the cuda12/cuda13 extras leave out.
    rng = numpy.random.default_rng(seed)
    return tuple(cupy.asarray(rng.standard_normal(stored, dtype=numpy.float32).astype(dtype))
                 for stored in (shape.a_shape, shape.b_shape))


def _run(a, b, shape, config, target=0):
    import cupy

    with create_handle(config) as handle:
        handle.sm_count_target = target
        out = gemm(a, b, handle=handle, trans_a=shape.trans_a, trans_b=shape.trans_b)
        cupy.cuda.get_current_stream().synchronize()
    return out


def _same(x, y) -> bool:
    import cupy

    return bool(cupy.array_equal(x.view(cupy.uint8), y.view(cupy.uint8)))


def _brief(algo) -> str:
    c = dict(algo)
    return f"algo {c['algo_id']} tile {c['tile']} splitK {c['splitk']} reduction {c['reduction_scheme']}"


def probe(spec: str, name: str) -> None:
    import ml_dtypes
    import numpy

    shape = parse_shape(spec)
    a, b = _operands(shape, numpy.float32 if name == "float32" else ml_dtypes.bfloat16)
    gemm_ex = GemmConfig(input_dtype=name, output_dtype=name, math_mode=0)
    lt = dataclasses.replace(gemm_ex, api="lt")
    ref = _run(a, b, shape, gemm_ex)
    full_algo = pinned_algorithm(shape, gemm_ex)
    print(f"{spec} {name}")
    print(f"  Lt heuristic, full SM count: {_brief(full_algo)}; split-K {_split_k(full_algo)}; "
          f"same bits as cublasGemmEx: {_same(_run(a, b, shape, lt), ref)}")
    for label, config in (("GemmEx", gemm_ex), ("Lt heuristic", lt),
                          ("Lt reduction NONE", dataclasses.replace(lt, lt_reduction_scheme_mask=0)),
                          ("Lt pinned full-SM algo", dataclasses.replace(lt, lt_algo=full_algo))):
        outs = [_run(a, b, shape, config, target) for target in TARGETS]
        print(f"  {label}: " + "; ".join(f"target {t or 'full'}: {'same bits' if _same(o, outs[0]) else 'OTHER BITS'}"
                                         for t, o in zip(TARGETS, outs)))


def torch_bias() -> None:
    import torch

    torch.manual_seed(0)
    x = torch.randn(16384, 768, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(3352, 768, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(3352, device="cuda", dtype=torch.bfloat16)
    want = torch.nn.functional.linear(x, w, bias)
    out = torch.empty_like(want)
    # PyTorch's call as the capture logged it: cuBLASLt, BIAS epilogue, 1 MiB workspace, the heuristic's choice
    config = GemmConfig(0, input_dtype="bfloat16", output_dtype="bfloat16", workspace_bytes=1 << 20, api="lt",
                        lt_epilogue="BIAS")
    with create_handle(config) as handle:
        gemm(x, w, out=out, handle=handle, trans_b=True, bias=bias)
        torch.cuda.synchronize()
    same = torch.equal(out.view(torch.int16), want.view(torch.int16))
    print(f"torch bf16 Linear(768, 3352, bias) on x[16384, 768]: {config.name} through the shim "
          f"{'bit-identical to' if same else 'DIFFERS from'} torch ({int((out != want).sum())} of {out.numel()} "
          "elements differ)")


def main() -> int:
    parser = ArgumentParser(prog=prog_name(), description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch", action="store_true", help="also a bf16 biased Linear of PyTorch's")
    args = parser.parse_args()
    require_gpu()  # one line and exit 2 without a GPU, before the first CUDA call
    for spec in SHAPES:
        probe(spec, "float32")
    probe("768x1536x16384:nt", "bfloat16")
    if args.torch:
        torch_bias()
    return 0


if __name__ == "__main__":
    sys.exit(run_guarded(prog_name(), main))
