"""Entering a Python program that never imports ``cublas_det`` (``cublas-det run`` and ``capture``): ``_site``
goes first on its ``PYTHONPATH``; that ``sitecustomize`` runs, in every Python process, the ``module:function``
tasks ``CUBLAS_DET_ENTER`` names (``module:function@name``: once the program imports ``name``, so that a process
which never does pays nothing), then the one it shadows. A task that fails adds a line to
``CUBLAS_DET_ENTER_LOG``, never to the program's output."""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import os
import signal
import subprocess
import sys
from multiprocessing import util

TASKS_ENV, LOG_ENV = "CUBLAS_DET_ENTER", "CUBLAS_DET_ENTER_LOG"
COUNT_ENV = "CUBLAS_DET_ENTER_COUNT"  # a folder: each process that begins to import a task's module leaves a mark
SITE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_site")  # the package's _site/


def python_env(tasks: list[str], settings: dict, base=None, log: str | None = None, count: str | None = None) -> dict:
    """``base`` (this process's environment) with ``tasks`` entered into every Python process, failures to
    ``log`` (a file path; None: the program's stderr), each process entered counted in folder ``count``."""
    env = dict(os.environ if base is None else base)
    env.update(settings)
    env[TASKS_ENV] = ",".join(tasks)
    env.update({name: value for name, value in ((LOG_ENV, log), (COUNT_ENV, count)) if value})
    env["PYTHONPATH"] = os.pathsep.join([SITE] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def run_tasks() -> None:
    """Run (or set waiting) the tasks of ``CUBLAS_DET_ENTER``: from ``sitecustomize``."""
    for task in filter(None, os.environ.get(TASKS_ENV, "").split(",")):
        task, _, name = task.partition("@")
        if name:
            after_import(name, lambda task=task: _run(task))
        else:
            _run(task)


def count_process() -> None:
    """Leave this process's mark (``PID.entered``) in ``CUBLAS_DET_ENTER_COUNT``'s folder, if any: as it begins to
    import what a task waits for, so that one killed on the way (a pool's idle worker) is still counted."""
    _mark("entered")


def _mark(kind: str, text: str = "") -> None:
    """``PID.kind`` holding ``text`` in ``CUBLAS_DET_ENTER_COUNT``'s folder, if any."""
    folder = os.environ.get(COUNT_ENV)
    if folder:
        try:
            with open(os.path.join(folder, f"{os.getpid()}.{kind}"), "w") as mark:
                mark.write(text)
        except OSError:  # the program removed the folder: run says so
            pass


def at_each_exit(finish, forked) -> None:
    """``finish()`` once at the exit of this process and of each child it forks, ``forked()`` first in the
    child: at exit, and as multiprocessing's child ends its work (it leaves by ``os._exit``, after these)."""
    def once():
        if os.getpid() not in _finished:
            _finished.add(os.getpid())
            finish()

    def register():
        atexit.register(once)
        util.Finalize(None, once, exitpriority=0)

    def child():
        forked()
        register()
    register()
    os.register_at_fork(after_in_child=child)
    # A multiprocessing child clears the finalizers it inherited, after the fork hook ran: registered again
    # (multiprocessing keeps ``once`` by a weak reference; atexit keeps it alive).
    util.register_after_fork(once, lambda _: util.Finalize(None, once, exitpriority=0))


_finished = set()  # the processes whose finish ran


def failed(what: str, err: BaseException) -> None:
    """A line for ``what`` that could not be entered: to ``CUBLAS_DET_ENTER_LOG``, else stderr."""
    line = f"{what} not entered in process {os.getpid()} ({sys.executable}): {type(err).__name__}: {err}\n"
    try:
        with open(os.environ[LOG_ENV], "a") as log:
            log.write(line)
    except (KeyError, OSError):
        sys.stderr.write(f"cublas-det: {line}")


def _run(task: str) -> None:
    module, _, function = task.partition(":")
    try:
        getattr(importlib.import_module(module), function)()
    except Exception as err:  # the program runs on as it would without us
        failed(task, err)
        _mark("failed", f"{type(err).__name__}: {err}")  # run tells a task that never started from one killed


def after_import(name: str, then) -> None:
    """``then()`` right after the program first imports module ``name`` (now, if it did already)."""
    if name in sys.modules:
        then()
    else:
        sys.meta_path.insert(0, _After(name, then))


class _After:
    """On ``sys.meta_path`` until module ``name`` is imported: then its own spec, loaded by :class:`_Then`."""

    def __init__(self, name, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:  # a program that only tries the import is not counted
            count_process()
            spec.loader = _Then(spec.loader, self.then)
        return spec


class _Then:
    """A module's own loader, then what waits for it."""

    def __init__(self, loader, then):
        self.loader, self.then = loader, then

    def __getattr__(self, name):  # create_module too
        return getattr(self.loader, name)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader  # the module keeps its own loader
        self.loader.exec_module(module)
        self.then()


def entry_failures(log: str) -> list[str]:
    """The lines of the tasks that failed (``python_env``'s ``log``), none if it was never written."""
    try:
        with open(log, errors="replace") as file:
            return [line.rstrip("\n") for line in file if line.strip()]
    except OSError:
        return []


def run_program(command: list[str], env: dict) -> tuple[int, bool]:
    """Run ``command`` with ``env``; ``(status as a shell gives it, interrupted)``. SIGTERM and SIGHUP
    end it as Ctrl-C does. Raises ``FileNotFoundError``/``PermissionError`` if it cannot start."""
    process = subprocess.Popen(command, env=env)
    interrupted = False
    previous = {sig: signal.signal(sig, _as_interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        status = process.wait()
    except KeyboardInterrupt as stop:
        interrupted = True
        if getattr(stop, "signal", None):
            process.send_signal(stop.signal)
        try:
            status = process.wait(timeout=10)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            process.kill()
            status = process.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return (128 - status if status < 0 else status), interrupted


def _as_interrupt(signum, frame):
    stop = KeyboardInterrupt()
    stop.signal = signum
    raise stop
