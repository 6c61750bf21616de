"""bf16 GEMM through cublas_det against torch.matmul on the same tensors, side by side.

    python bench/bf16_vs_torch.py [--size 4096] [--rounds 30] [--calls 50]

Each round times a batch of `calls` GEMMs through `cublas_det.core.call` (PyTorch bf16 tensors, passed
through DLPack without a copy, a PEDANTIC handle) and a batch of `torch.matmul` on the same
tensors, alternately and in alternating order, with CUDA events; the median of the per-round
ratios is printed (> 1: cublas_det is faster). Exits 0 once printed, 2 with one line without a
GPU or torch.
"""

import statistics
import sys

from cublas_det.cli.common import ArgumentParser, prog_name, run_guarded
from cublas_det.core.device import require_gpu


def _run(argv) -> int:
    parser = ArgumentParser(prog=prog_name(), description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args(argv)
    require_gpu()
    import torch

    from cublas_det import GemmConfig, MathMode, create_handle, gemm

    n = args.size
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    ours_out = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    theirs_out = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    config = GemmConfig(MathMode.PEDANTIC, input_dtype="bfloat16", output_dtype="bfloat16")
    stream = torch.cuda.current_stream()

    def batch(fn):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        for _ in range(args.calls):
            fn()
        end.record(stream)
        return start, end

    with create_handle(config) as handle:
        ours = lambda: gemm(a, b, out=ours_out, handle=handle)  # noqa: E731
        theirs = lambda: torch.matmul(a, b, out=theirs_out)  # noqa: E731
        for fn in (ours, theirs, ours, theirs):  # warm up: heuristics, clocks
            batch(fn)
        times = {"ours": [], "torch": []}
        for i in range(args.rounds):
            order = [("ours", ours), ("torch", theirs)] if i % 2 == 0 else [("torch", theirs), ("ours", ours)]
            events = [(name, batch(fn)) for name, fn in order]
            torch.cuda.synchronize()
            for name, (start, end) in events:
                times[name].append(start.elapsed_time(end) / args.calls * 1e3)
    ratios = [t / o for o, t in zip(times["ours"], times["torch"])]
    flop = 2 * n**3
    med_ours, med_torch = statistics.median(times["ours"]), statistics.median(times["torch"])
    print(f"{n}^3 bf16: cublas_det {med_ours:.1f} us ({flop / med_ours / 1e6:.0f} TFLOP/s), torch.matmul "
          f"{med_torch:.1f} us ({flop / med_torch / 1e6:.0f} TFLOP/s); speed ratio cublas_det/torch "
          f"{statistics.median(ratios):.3f} (median of {args.rounds} paired rounds, min {min(ratios):.3f})")
    return 0


def main(argv=None) -> int:
    return run_guarded(prog_name(), lambda: _run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
