"""``python -m cublas_det.compare``: as ``cublas-det compare`` (:mod:`cublas_det.cli.compare`)."""

import sys

from .cli.compare import main

if __name__ == "__main__":
    sys.exit(main())
