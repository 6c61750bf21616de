"""``python -m cublas_det.compare``: as ``cublas-det compare`` (:mod:`cublas_det.cli.compare`)."""

from .cli.compare import main

if __name__ == "__main__":
    raise SystemExit(main())
