"""Parse throughput of the capture's log parsers: a real log, repeated to a size, fed in pipe-sized chunks.

    python bench/capture_parse.py CUBLAS_LOG CUBLASLT_LOG [--bytes 1100000000]
    python bench/capture_parse.py tests/data/capture/block.cublas.log.gz \
        tests/data/capture/block.cublaslt.log.gz --bytes 200000000

Each log (gzipped or not) is repeated in memory until it reaches --bytes, then fed to its parser in
4 MiB chunks, as the pipe reader does; prints MB/s per log, the calls found, and the peak resident
memory. Exit codes: 0 the figures were printed; 2 a bad argument, or a log that cannot be read (one
line).
"""

import argparse
import gzip
import resource
import sys
import time

from cublas_det.apilog.model import Capture
from cublas_det.apilog.parse import CHUNK, CublasLogParser, LtLogParser
from cublas_det.base.words import plural


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cublas_log")
    parser.add_argument("cublaslt_log")
    parser.add_argument("--bytes", type=int, default=1_100_000_000, help="bytes of each log to parse")
    args = parser.parse_args()
    for kind, path, make in (("cuBLAS", args.cublas_log, CublasLogParser), ("cuBLASLt", args.cublaslt_log,
                                                                            LtLogParser)):
        try:
            with open(path, "rb") as file:
                text = file.read()
            if text[:2] == b"\x1f\x8b":
                text = gzip.decompress(text)
        except (OSError, EOFError) as err:  # gzip's own errors are OSErrors; a cut stream is an EOFError
            print(f"capture_parse.py: error: {path}: {err}", file=sys.stderr)
            return 2
        copies = max(1, -(-args.bytes // len(text)))
        capture = Capture()
        log_parser = make(capture)
        started = time.perf_counter()
        for _ in range(copies):
            for start in range(0, len(text), CHUNK):
                log_parser.feed(text[start:start + CHUNK])
        log_parser.close()
        seconds = time.perf_counter() - started
        total = copies * len(text)
        stats = capture.logs["cublas" if kind == "cuBLAS" else "cublaslt"]
        print(f"{kind} log: {total / 1e9:.2f} GB in {seconds:.2f} s = {total / seconds / 1e6:.0f} MB/s; "
              f"{plural(stats.gemm_calls, 'GEMM call')}, {len(capture.gemms)} distinct, {stats.malformed} malformed")
    print(f"peak resident memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
