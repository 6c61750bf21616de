"""``python -m cublas_det``: the ``cublas-det`` command (:mod:`cublas_det.cli`)."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
