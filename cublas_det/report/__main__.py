"""``python -m cublas_det.report``: as ``cublas-det report`` (:mod:`cublas_det.cli.report`)."""

import sys

from ..cli.report import main

if __name__ == "__main__":
    sys.exit(main())
