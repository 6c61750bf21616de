"""Runs first in a Python process that ``cublas-det run`` or ``capture`` started: the tasks of
``CUBLAS_DET_ENTER`` (see :mod:`cublas_det.base.enter`), then the ``sitecustomize`` this one shadows, if any."""

import importlib.machinery
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
try:
    from cublas_det.base import enter
except ImportError as err:  # this Python has no cublas_det: the program runs as it would without us
    line = f"cublas_det not entered in process {os.getpid()} ({sys.executable}): {err}\n"
    try:
        with open(os.environ["CUBLAS_DET_ENTER_LOG"], "a") as log:
            log.write(line)
    except (KeyError, OSError):
        sys.stderr.write(f"cublas-det: {line}")
else:
    enter.run_tasks()

# The sitecustomize this one shadows, if any, run as site.py would have run it.
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
if _spec is not None and _spec.loader is not None:
    sys.modules["sitecustomize"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["sitecustomize"])
