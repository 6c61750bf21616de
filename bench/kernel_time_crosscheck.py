"""Cross-check the kernel time per GEMM that --kernels reports against the torch profiler's.

    python bench/kernel_time_crosscheck.py [--shape 128x56x4096:nt ...] [--modes pedantic default tf32]

For each shape and mode, in this one process and on the same CUDA graphs: cublas_det records the
kernels of held batch-graph replays through cupti-python (``ShapeBench.kernel_signatures``, what
``--kernels`` reports), then the torch profiler records the same replays. Per GEMM it compares the
summed kernel durations and asserts they agree within --tolerance (2%).

Every cublas_det recording runs before the first torch profile: the torch profiler registers its
own CUPTI timestamp source, after which a later recording in the same process reads other units.

Exit codes: 0 every ratio within the tolerance; 1 one is not; 2 no GPU, no PyTorch or no
cupti-python (one line, before any GPU work) or a bad argument.
"""

import argparse
import importlib.util
import pathlib
import sys

from cublas_det.cli.common import ArgumentParser, prog_name, run_guarded
from cublas_det.core.device import require_gpu

SHAPES = ["128x56x4096:nt", "3352x768x16384:nt", "4096x128x128:tn"]


def _profiler_crosscheck():
    """bench/profiler_crosscheck.py: its torch-profiler measurement (the same replays, the same filter)
    and its tolerance and verdict."""
    path = pathlib.Path(__file__).resolve().parent / "profiler_crosscheck.py"
    spec = importlib.util.spec_from_file_location("profiler_crosscheck", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    from cublas_det.core.config import GemmConfig
    from cublas_det.kernels.recorder import require_cupti
    from cublas_det.core.shapes import parse_shape
    from cublas_det.timing import ShapeBench, warm_up

    parser = ArgumentParser(prog=prog_name(), description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", action="append", metavar="MxNxK[:op]", help=f"repeatable (default: {' '.join(SHAPES)})")
    parser.add_argument("--modes", nargs="+", default=["pedantic", "default", "tf32"])
    parser.add_argument("--replays", type=int, default=10)
    parser.add_argument("--tolerance", type=float, default=0.02, help="largest |ours / torch - 1| (default: %(default)s)")
    args = parser.parse_args()
    shapes = [parse_shape(spec) for spec in args.shape or SHAPES]
    configs = [GemmConfig.parse(mode, source="--modes") for mode in args.modes]
    require_gpu()
    if importlib.util.find_spec("torch") is None:
        raise ModuleNotFoundError("the kernel-time cross-check needs PyTorch: No module named 'torch'", name="torch")
    require_cupti()
    crosscheck = _profiler_crosscheck()
    warm_up(1.0)
    benches = [ShapeBench(shape, configs, aa_control=False) for shape in shapes]
    try:
        ours = {}
        for bench in benches:  # every CUPTI recording of ours first (see the docstring)
            bench.prepare()
            for name, signature in bench.kernel_signatures(args.replays).items():
                ours[(bench.shape.spec, name)] = signature
        failed = []
        for bench in benches:
            for config in configs:
                signature = ours[(bench.shape.spec, config.name)]
                _, busy_us, _, per_gemm = crosscheck.profiled_us_per_gemm(bench, config.name, args.replays)
                ratio = signature.kernel_us / busy_us
                ok = crosscheck.within(ratio, args.tolerance)
                if not ok:
                    failed.append(f"{bench.shape.spec} {config.name}")
                print(f"{bench.shape.spec} {config.name}: cublas_det kernel time {signature.kernel_us:.3f} µs/GEMM "
                      f"({signature.describe()}); torch profiler {busy_us:.3f} µs/GEMM ({per_gemm:.0f} kernels/GEMM) "
                      f"-> ratio {ratio:.4f} {'ok' if ok else 'FAIL'} (within ±{args.tolerance:.0%})")
    finally:
        for bench in benches:
            bench.close()
    return crosscheck.verdict(failed, "kernel time per GEMM and the torch profiler's", args.tolerance)


if __name__ == "__main__":
    sys.exit(run_guarded(prog_name(), main))
