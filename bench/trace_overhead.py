"""What the recorder's digest costs on the GPU, against a device-to-device copy of the same tensor.

    python bench/trace_overhead.py [--mb 100] [--repeats 200]

Times, with CUDA events on one stream, alternately ``--repeats`` times each:

* copy: ``cudaMemcpyAsync`` device to device of the tensor (reads and writes its bytes);
* digest: what ``Recorder.record`` queues in digest mode (zero the 16-byte sums, the digest
  kernel: one read of the tensor);
* record: a whole ``Recorder.record`` call in digest mode, host side included (one event per call).

L2 is flushed (a 256 MiB memset) before each timed operation, so neither finds the tensor in L2.
Prints the medians, the bandwidths and the digest/copy ratio (the issue's budget: at most 2), and
checks the GPU digest against numpy's on the same bytes. Exits 0 within budget, 1 over it, 2 with one
line when no GPU is usable.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile

from cublas_det.bits.digest import finish, host_digest, queue_device_sums
from cublas_det.cli.common import ArgumentParser, error_line, prog_name, run_guarded
from cublas_det.core.device import device_properties, require_gpu
from cublas_det.trace import Recorder


def _time(stream, body, flush) -> float:
    flush()
    start = stream.record()
    body()
    end = stream.record()
    end.synchronize()
    import cupy

    return cupy.cuda.get_elapsed_time(start, end) * 1000.0  # µs


def main() -> int:
    parser = ArgumentParser(prog=prog_name(), description=__doc__.split("\n\n")[0],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=100.0, help="tensor size in MB (10**6 bytes; default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=200, help="timings of each operation (default: %(default)s)")
    args = parser.parse_args()

    require_gpu()  # one line and exit 2 without a GPU, before the first CUDA call
    import cupy
    import numpy

    nbytes = int(args.mb * 1e6) // 4 * 4
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        # Made on the host: cupy.random needs cuRAND, which the cuda12/cuda13 extras leave out.
        tensor = cupy.asarray(numpy.random.default_rng(0).standard_normal(nbytes // 4, dtype=numpy.float32))
        copy = cupy.empty_like(tensor)
        sums = cupy.zeros(2, cupy.uint64)
        scrub = cupy.empty(256 << 20, cupy.uint8)

        def flush_l2():
            scrub.data.memset_async(1, scrub.nbytes, stream)

        def d2d_copy():
            copy.data.copy_from_device_async(tensor.data, nbytes, stream)

        def digest():
            queue_device_sums(tensor, sums)

        with tempfile.TemporaryDirectory() as directory, Recorder(directory) as recorder:
            step = iter(range(10**9))

            def record():
                recorder.record(next(step), "tensor", tensor)

            for body in (d2d_copy, digest, record):  # compile, allocate, warm up
                body()
            stream.synchronize()
            times = {"copy": [], "digest": [], "record": []}
            for _ in range(args.repeats):
                times["copy"].append(_time(stream, d2d_copy, flush_l2))
                times["digest"].append(_time(stream, digest, flush_l2))
                times["record"].append(_time(stream, record, flush_l2))
        digest()
        s1, s2 = (int(v) for v in sums.get())
    on_gpu = finish(s1, s2, nbytes)
    on_cpu = host_digest(cupy.asnumpy(tensor))
    if on_gpu != on_cpu:
        error_line(prog_name(), f"GPU digest {on_gpu} differs from numpy's {on_cpu} on the same bytes")
        return 1
    median = {name: statistics.median(values) for name, values in times.items()}
    gpu = device_properties()["name"]
    print(f"{gpu}: {nbytes / 1e6:.0f} MB float32 tensor, median of {args.repeats} (CUDA events, L2 flushed)")
    print(f"  D2D copy       {median['copy']:8.1f} µs  {2 * nbytes / median['copy'] / 1e3:7.0f} GB/s (read + write)")
    print(f"  digest kernel  {median['digest']:8.1f} µs  {nbytes / median['digest'] / 1e3:7.0f} GB/s (read)")
    print(f"  record() call  {median['record']:8.1f} µs  (digest mode, host side included)")
    ratio = median["digest"] / median["copy"]
    print(f"digest / copy = {ratio:.2f} (budget 2.0); record / copy = {median['record'] / median['copy']:.2f}; "
          f"GPU digest == numpy digest: {on_gpu}")
    return 0 if ratio <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(run_guarded(prog_name(), main))
