"""``python -m cublas_det.capture``: as ``cublas-det capture`` (:mod:`cublas_det.cli.capture`); and
``load_capture(path)``, a capture file read back (:mod:`cublas_det.apilog`)."""

from .apilog import load_capture
from .cli.capture import main

__all__ = ["load_capture", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
