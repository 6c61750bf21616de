"""Cross-check the timing engine against an independent profiler (the torch profiler, CUPTI).

    python bench/profiler_crosscheck.py [--shape 128x56x4096:nt --shape 4096x128x128:tn] [--modes pedantic tf32]

For each shape and mode, in this one process: the engine times its own CUDA graphs (operand sets
rotated through the batch as always, batches started from a held stream); then the torch
profiler records the kernels of the same graphs while they replay back to back, queued behind the
same blocking kernel. Per GEMM it compares the engine's graph time with the profiler's kernel span
(first kernel start to last kernel end, the gaps between a split-K GEMM's kernels included) and
asserts they agree within --tolerance (10%). The summed kernel durations ("busy", lower: no gaps)
and the kernel names are printed beside.

Exit codes: 0 every ratio within the tolerance; 1 one is not; 2 no GPU, no PyTorch (one line,
before any GPU work) or a bad argument.
"""

import argparse
import importlib.util
import sys

from cublas_det.cli.common import ArgumentParser, prog_name, run_guarded
from cublas_det.core.device import require_gpu
from cublas_det.timing.hold import KERNEL_NAMES

SHAPES = ["128x56x4096:nt", "4096x128x128:tn"]
ROUNDS = 30  # medians are compared, not intervals: a fixed count, whole Williams cycles of 2 or 3 arms


def profiled_us_per_gemm(bench, mode: str, replays: int = 20):
    """Replay arm ``mode``'s batch graph ``replays`` times under the torch profiler, all queued behind
    the blocking kernel; per GEMM: (kernel span µs, kernel busy µs, kernel names, kernels per GEMM)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        bench.held_replays(mode, replays)
        bench.stream.synchronize()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA" and not e.name.startswith(KERNEL_NAMES)]
    if not kernels:
        raise RuntimeError("the torch profiler recorded no GEMM kernel")
    span = max(e.time_range.end for e in kernels) - min(e.time_range.start for e in kernels)
    busy = sum(e.time_range.end - e.time_range.start for e in kernels)
    gemms = bench.calls * replays
    return span / gemms, busy / gemms, sorted({e.name[:50] for e in kernels}), len(kernels) / gemms


def within(ratio: float, tolerance: float) -> bool:
    return abs(ratio - 1) <= tolerance


def verdict(failed: list, what: str, tolerance: float) -> int:
    """The last line and exit code of a cross-check: 1 with the shapes and modes that failed, else 0."""
    if failed:
        print(f"FAIL: {what} differ by more than {tolerance:.0%} for {', '.join(failed)}")
        return 1
    print(f"ok: {what} agree within {tolerance:.0%} for every shape and mode")
    return 0


def main() -> int:
    from cublas_det.core.config import GemmConfig
    from cublas_det.core.shapes import parse_shape
    from cublas_det.timing import ShapeBench, warm_up
    from cublas_det.timing.clocks import default_sm_clock_mhz
    from cublas_det.results.timing import ArmTiming
    from cublas_det.timing.rounds import THROTTLE_FRACTION, KeptRounds

    parser = ArgumentParser(prog=prog_name(), description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", action="append", metavar="MxNxK[:op]", help=f"repeatable (default: {' '.join(SHAPES)})")
    parser.add_argument("--modes", nargs="+", default=["pedantic", "tf32"])
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument("--tolerance", type=float, default=0.10, help="largest |graph / span - 1| (default: %(default)s)")
    args = parser.parse_args()
    require_gpu()  # one line and exit 2 without a GPU, before the first CUDA call
    if importlib.util.find_spec("torch") is None:  # before any GPU work: the check is useless without it
        raise ModuleNotFoundError("the profiler cross-check needs PyTorch: No module named 'torch'", name="torch")
    shapes = [parse_shape(spec) for spec in args.shape or SHAPES]
    configs = [GemmConfig.parse(mode, source="--modes") for mode in args.modes]
    default = default_sm_clock_mhz()
    warm_up(1.0)
    failed = []
    for shape in shapes:
        with ShapeBench(shape, configs, aa_control=False) as bench:
            bench.prepare()
            rounds = KeptRounds(bench.names)
            rounds.take(bench.measure_round, ROUNDS, clock_floor_mhz=THROTTLE_FRACTION * default if default else None)
            arms = {name: ArmTiming(name, tuple(s.graph_s * 1e6 for s in kept),
                                    tuple(s.eager_s * 1e6 for s in kept if s.eager_s is not None),
                                    tuple(s.clock_mhz for s in kept)) for name, kept in rounds.kept.items()}
            for config in configs:
                arm = arms[config.name]
                span_us, busy_us, names, per_gemm = profiled_us_per_gemm(bench, config.name, args.replays)
                ratio = arm.median_us / span_us
                ok = within(ratio, args.tolerance)
                if not ok:
                    failed.append(f"{shape.spec} {config.name}")
                print(f"{shape.spec} {config.name}: cublas_det graph {arm.median_us:.2f} µs/GEMM (eager "
                      f"{arm.eager_median_us:.2f}; {bench.calls} GEMMs/batch, {bench.sets} "
                      f"buffer sets, SM {arm.median_clock_mhz or 0:.0f} MHz); torch profiler: kernel span "
                      f"{span_us:.2f} µs/GEMM -> ratio {ratio:.3f} {'ok' if ok else 'FAIL'} (within ±{args.tolerance:.0%}"
                      f"), kernel busy {busy_us:.2f} µs/GEMM ({per_gemm:.0f} kernels/GEMM: {names})")
    return verdict(failed, "graph time and the profiler's kernel span", args.tolerance)


if __name__ == "__main__":
    sys.exit(run_guarded(prog_name(), main))
