"""``python -m cublas_det.diff``: as ``cublas-det diff`` (:mod:`cublas_det.cli.diff`)."""

from .cli.diff import main

if __name__ == "__main__":
    raise SystemExit(main())
