"""``python -m cublas_det.report``: a stored run rendered again, as ``cublas-det report``
(:mod:`cublas_det.cli.report`)."""

import sys

from .cli.report import main

if __name__ == "__main__":
    sys.exit(main())
