"""``python -m cublas_det.report``: a stored run rendered again, as ``cublas-det report``."""

from .cli.report import main

if __name__ == "__main__":
    raise SystemExit(main())
