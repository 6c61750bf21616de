"""Entering a Python program that never imports ``cublas_det`` (``cublas-det run`` and ``capture``): ``_site``
goes first on its ``PYTHONPATH``; that ``sitecustomize`` runs, in every Python process, the ``module:function``
tasks ``CUBLAS_DET_ENTER`` names (``module:function@name``: once the program imports ``name``), then the one it
shadows. A task that fails adds a line to ``CUBLAS_DET_ENTER_LOG``, never to the program's output."""

from __future__ import annotations

import os
import signal
import subprocess

TASKS_ENV, LOG_ENV = "CUBLAS_DET_ENTER", "CUBLAS_DET_ENTER_LOG"
SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_site")


def python_env(tasks: list[str], settings: dict, base=None, log: str | None = None) -> dict:
    """``base`` (this process's environment) with ``tasks`` entered into every Python process, failures to
    ``log`` (a file path; None: the program's stderr)."""
    env = dict(os.environ if base is None else base)
    env.update(settings)
    env[TASKS_ENV] = ",".join(tasks)
    if log:
        env[LOG_ENV] = log
    env["PYTHONPATH"] = os.pathsep.join([SITE] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


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
