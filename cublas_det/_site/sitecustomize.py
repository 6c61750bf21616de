"""Runs first in a Python process that ``cublas-det run`` or ``capture`` started: the tasks of
``CUBLAS_DET_ENTER``, then the ``sitecustomize`` this one shadows, if there is one."""

import importlib
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
try:
    from cublas_det.enter import run_tasks
except ImportError as err:  # this Python has no cublas_det: the program runs as it would without us
    print(f"cublas-det: this Python ({sys.executable}) cannot import cublas_det ({err}); not entered",
          file=sys.stderr)
else:
    run_tasks()
del sys.modules["sitecustomize"]
try:
    importlib.import_module("sitecustomize")
except ImportError as err:
    if err.name != "sitecustomize":  # the shadowed one failed inside: as site.py would, say so
        raise
