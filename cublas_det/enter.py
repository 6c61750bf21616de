"""Entering a Python program that never imports ``cublas_det`` (``cublas-det run`` and ``capture``): ``_site``
goes first on its ``PYTHONPATH``; that ``sitecustomize`` runs, in every Python process, the ``module:function``
tasks ``CUBLAS_DET_ENTER`` names, then the one it shadows."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys

TASKS_ENV = "CUBLAS_DET_ENTER"
SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_site")


def python_env(tasks: list[str], settings: dict, base=None) -> dict:
    """``base`` (this process's environment) with ``tasks`` entered into every Python process."""
    env = dict(os.environ if base is None else base)
    env.update(settings)
    env[TASKS_ENV] = ",".join(tasks)
    env["PYTHONPATH"] = os.pathsep.join([SITE] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def run_tasks() -> None:
    """Run the tasks of ``CUBLAS_DET_ENTER`` (from ``sitecustomize``); one failing does not stop the program."""
    for task in filter(None, os.environ.get(TASKS_ENV, "").split(",")):
        module, _, function = task.partition(":")
        try:
            getattr(importlib.import_module(module), function)()
        except Exception as err:  # the program runs on as it would without us; the line says what was lost
            print(f"cublas-det: {task} not entered in process {os.getpid()}: {type(err).__name__}: {err}",
                  file=sys.stderr)


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
