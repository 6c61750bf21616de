"""What checking costs beyond the GEMMs: N checked repeats against N bare GEMMs, timed on the GPU.

    python bench/check_overhead.py [--repeats 100] [--shape mamba2-2.7b/in_proj/dW] [--modes pedantic tf32]

Checked = the ``repeat`` scenario's loop (GEMM, then the fused mismatch count and worst-element
update, no host copy per repeat). Bare = the same GEMM N times. Both are timed with CUDA events
on one stream, alternately, three times each; the medians and their ratio are printed. Exit codes:
0 printed; 2 with one line without a GPU or CuPy, or for a bad argument; 130 interrupted.
"""

import argparse
import statistics
import sys

from cublas_det.cli.common import ArgumentParser, prog_name, run_guarded
from cublas_det.core.device import require_gpu


def main() -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--shape", default="mamba2-2.7b/in_proj/dW")
    parser.add_argument("--modes", nargs="+", default=["pedantic", "tf32"])
    args = parser.parse_args()
    # CuPy after the arguments: --help and a usage error need no GPU stack
    import cupy

    from cublas_det import create_handle
    from cublas_det.bits.compare import MismatchTracker
    from cublas_det.core.call import shape_gemm
    from cublas_det.core.operands import device_operands
    from cublas_det.core.shapes import PRESETS, parse_shape, resolve_shapes
    require_gpu()  # one line and exit 2 without a GPU, before the first CUDA call
    catalogue = {s.name: s for s in resolve_shapes(list(PRESETS))}
    shape = catalogue.get(args.shape) or parse_shape(args.shape)
    a, b = device_operands(shape, 0)
    stream = cupy.cuda.Stream(non_blocking=True)
    for mode in args.modes:
        with create_handle(mode, stream=stream) as handle, stream:
            reference = cupy.empty((shape.m, shape.n), cupy.float32)
            out = cupy.empty_like(reference)
            shape_gemm(a, b, reference, handle, shape)

            def bare():
                for _ in range(args.repeats):
                    shape_gemm(a, b, out, handle, shape)

            def checked():
                tracker = MismatchTracker(reference, args.repeats)
                for _ in range(args.repeats):
                    shape_gemm(a, b, out, handle, shape)
                    tracker.record(out)
                return tracker

            checked()  # compile the comparison kernels, warm up
            times = {"bare": [], "checked": []}
            for _ in range(3):
                for name, body in (("bare", bare), ("checked", checked)):
                    start = stream.record()
                    body()
                    end = stream.record()
                    end.synchronize()
                    times[name].append(cupy.cuda.get_elapsed_time(start, end))
            bare_ms, checked_ms = statistics.median(times["bare"]), statistics.median(times["checked"])
            print(f"{shape.name} ({shape.spec}) {mode}: {args.repeats} bare GEMMs {bare_ms:.1f} ms, "
                  f"{args.repeats} checked repeats {checked_ms:.1f} ms, ratio {checked_ms / bare_ms:.3f}")


if __name__ == "__main__":
    sys.exit(run_guarded(prog_name(), main))
