"""How fast ``python -m cublas_det.diff`` reads two runs, against ``cmp`` on the same files (CPU only).

    python bench/diff_throughput.py [--dir /tmp] [--gib 1] [--repeats 3]

Writes two runs of one float32 leaf of ``--gib`` GiB each under ``--dir`` (equal bits: both tools
must read everything), then times, alternately and ``--repeats`` times each:

* ``cmp A B``, the ``python -m cublas_det.diff A B`` command (interpreter start-up included) and
  ``diff_runs`` in this process (start-up excluded), with the files in the page cache (warm),
* the same after evicting both files from the page cache (cold: posix_fadvise DONTNEED), which
  reads from the disk under ``--dir``.

Also times the diff on a run whose every element differs (its slow path: counts, ULP, deltas),
which ``cmp`` has no counterpart for (it stops at the first difference). Prints the median
throughput of each, counting the bytes of both runs, and deletes the files. Exit codes: 0 printed;
1 a tool did not answer as expected (the diff of equal runs not 0, of differing ones not 1; the
message says which); 2 a bad argument.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _write(path: str, nbytes: int, seed: int, flip: bool = False) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rng = np.random.default_rng(seed)
    block = 64 << 20
    with open(path, "wb") as stream:
        for start in range(0, nbytes, block):
            data = rng.standard_normal(min(block, nbytes - start) // 4, dtype=np.float32)
            if flip:
                data = np.nextafter(data, np.float32(np.inf))
            stream.write(data.tobytes())


def _evict(*paths: str) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _timed(command: list[str], expect: int) -> float:
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    start = time.perf_counter()
    result = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != expect:
        raise SystemExit(f"{' '.join(command)} exited {result.returncode}, expected {expect}: {result.stderr}")
    return elapsed


def _timed_in_process(path_a: str, path_b: str, expect: int) -> float:
    """diff_runs on opened runs: the reading and comparing, without the interpreter's start-up."""
    sys.path.insert(0, REPO)
    from cublas_det.rundiff.diff import diff_runs
    from cublas_det.rundiff.layouts import open_run

    start = time.perf_counter()
    diff = diff_runs(open_run(path_a), open_run(path_b))
    elapsed = time.perf_counter() - start
    if int(not diff.identical) != expect:
        raise SystemExit(f"diff_runs({path_a}, {path_b}): identical={diff.identical}, expected exit {expect}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where to write the runs (default: %(default)s)")
    parser.add_argument("--gib", type=float, default=1.0, help="size of each run in GiB (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timings per tool and cache state (default: %(default)s)")
    args = parser.parse_args()
    nbytes = int(args.gib * (1 << 30)) // 4 * 4
    root = tempfile.mkdtemp(prefix="cublas_det_diff_bench_", dir=args.dir)
    a, b, c = (os.path.join(root, run, "step_1", "x.bin") for run in ("a", "b", "c"))
    try:
        print(f"writing 3 runs of {nbytes / 2**30:.2f} GiB under {root} ...", file=sys.stderr)
        _write(a, nbytes, 0)
        os.makedirs(os.path.dirname(b))
        shutil.copyfile(a, b)
        _write(c, nbytes, 0, flip=True)
        diff = [sys.executable, "-m", "cublas_det.diff"]
        run_a, run_b, run_c = (os.path.join(root, run) for run in ("a", "b", "c"))
        cases = {
            "cmp, warm": (lambda: _timed(["cmp", a, b], 0), False),
            "diff command, warm": (lambda: _timed(diff + [run_a, run_b], 0), False),
            "diff in-process, warm": (lambda: _timed_in_process(run_a, run_b, 0), False),
            "cmp, cold": (lambda: _timed(["cmp", a, b], 0), True),
            "diff command, cold": (lambda: _timed(diff + [run_a, run_b], 0), True),
            "diff in-process, cold": (lambda: _timed_in_process(run_a, run_b, 0), True),
            "diff command, every element differs": (lambda: _timed(diff + [run_a, run_c], 1), False),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.repeats):
            for name, (timed, cold) in cases.items():
                if cold:
                    _evict(a, b, c)
                else:
                    timed()  # fill the page cache
                times[name].append(timed())
        total = 2 * nbytes
        print(f"two runs of {nbytes / 2**30:.2f} GiB each on {_device_of(root)}; median of {args.repeats}")
        for name, values in times.items():
            median = statistics.median(values)
            print(f"  {name:<38} {median:7.3f} s  {total / median / 1e9:6.2f} GB/s")
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _device_of(path: str) -> str:
    try:
        out = subprocess.run(["df", "--output=source,fstype", path], capture_output=True, text=True, check=False).stdout
        source, fstype = out.strip().splitlines()[-1].split()
        return f"{path} ({source}, {fstype})"
    except (OSError, ValueError):
        return path


if __name__ == "__main__":
    sys.exit(main())
