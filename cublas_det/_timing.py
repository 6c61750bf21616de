"""The timing engine's former import path: everything now lives in :mod:`cublas_det.timing`."""

from .timing import *  # noqa: F401,F403
from .timing import __all__  # noqa: F401
