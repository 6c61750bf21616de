"""``python -m cublas_det.bench``: the benchmark, as ``cublas-det bench`` (:mod:`cublas_det.cli.bench`)."""

from .cli.bench import main

if __name__ == "__main__":
    raise SystemExit(main())
