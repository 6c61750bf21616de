"""``python -m cublas_det.capture``: ``cublas-det capture`` (:mod:`cublas_det.cli.capture`)."""

import sys

from ..cli.capture import main

if __name__ == "__main__":
    sys.exit(main())
