"""Runs first in a Python process that ``cublas-det run`` or ``capture`` started (see :mod:`cublas_det.enter`):
the ``module:function`` tasks of ``CUBLAS_DET_ENTER``, a ``module:function@name`` one right after the program
first imports ``name`` (a process that never does pays nothing); then the ``sitecustomize`` this one shadows.
It imports nothing of cublas_det until a task runs."""

import importlib
import importlib.machinery
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]


def _run(task: str) -> None:
    """One task; a failure costs the program nothing: its line goes to ``CUBLAS_DET_ENTER_LOG`` (else stderr)."""
    module, _, function = task.partition(":")
    try:
        getattr(importlib.import_module(module), function)()
    except Exception as err:
        line = f"{task} not entered in process {os.getpid()} ({sys.executable}): {type(err).__name__}: {err}\n"
        try:
            with open(os.environ["CUBLAS_DET_ENTER_LOG"], "a") as log:
                log.write(line)
        except (KeyError, OSError):
            sys.stderr.write(f"cublas-det: {line}")


class _Then:
    """A module's own loader, then the tasks waiting for it."""

    def __init__(self, loader, tasks):
        self.loader, self.tasks = loader, tasks

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader  # the module keeps its own loader
        self.loader.exec_module(module)
        for task in self.tasks:
            _run(task)


class _After:
    """On ``sys.meta_path`` until the program imports ``name``: then its real spec, loaded by :class:`_Then`."""

    def __init__(self, name, tasks):
        self.name, self.tasks = name, tasks

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _Then(spec.loader, self.tasks)
        return spec


_waiting: dict = {}
for _task in filter(None, os.environ.get("CUBLAS_DET_ENTER", "").split(",")):
    _task, _, _name = _task.partition("@")
    if not _name:
        _run(_task)
    elif _name in sys.modules:
        _run(_task)
    else:
        _waiting.setdefault(_name, []).append(_task)
sys.meta_path[:0] = [_After(name, tasks) for name, tasks in _waiting.items()]

# The sitecustomize this one shadows, if any, run as site.py would have run it.
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
if _spec is not None and _spec.loader is not None:
    sys.modules["sitecustomize"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["sitecustomize"])
