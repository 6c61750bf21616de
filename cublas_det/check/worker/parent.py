"""The parent's side of a worker: start it on a request, collect its answer, kill it."""

from __future__ import annotations

import json
import subprocess
import sys

from .protocol import Answer, Request

WORKER_TIMEOUT_S = 1800.0
INTERRUPTED = "interrupted before the worker finished"  # the error of a worker stopped by Ctrl-C


def worker_command() -> list[str]:
    return [sys.executable, "-m", "cublas_det.check.worker"]


def spawn(request: Request, env: dict) -> subprocess.Popen:
    process = subprocess.Popen(worker_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    process.stdin.write(json.dumps(request.to_dict()))
    process.stdin.close()
    process.stdin = None  # sent in full; communicate() in collect() must not touch it again
    return process


def collect(process, timeout_s: float = WORKER_TIMEOUT_S) -> tuple[Answer | None, str | None]:
    """A worker's :class:`Answer`, or ``(None, one line saying what went wrong)``; ``process`` may be the
    reason no worker was started."""
    if isinstance(process, str):
        return None, process
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)  # both pipes at once: no deadlock
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return None, f"worker timed out after {timeout_s:g} s"
    if process.returncode != 0:
        last = (stderr.strip().splitlines() or ["no output"])[-1]
        how = f"was killed by signal {-process.returncode}" if process.returncode < 0 else \
            f"exited with code {process.returncode}"
        return None, f"worker {how}: {last}"
    try:
        return Answer.from_dict(json.loads(stdout)), None
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        return None, f"worker wrote no valid answer ({type(err).__name__}: {err})"


def kill_all(workers: dict) -> None:
    """Kill the workers still running, and reap them: no zombie, no open pipe."""
    for process in workers.values():
        if isinstance(process, subprocess.Popen) and process.returncode is None:
            if process.poll() is None:
                process.kill()
            process.communicate()
