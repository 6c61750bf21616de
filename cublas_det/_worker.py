"""Worker processes: the child that checks GEMMs on one device, and the parent's side of it.

Used for the scenarios that need a fresh process and for per-device sweeps. The child reads one
JSON request on stdin::

    {"device": 0, "tasks": [{"spec": "128x56x4096:nt", "name": "...", "mode": 2, "seed": 0}],
     "scenarios": ["streams-shared-handle"], "repeats": 20}

and writes ``{"results": {"<spec>|<mode>": {"digest": ..., "rel_error": ..., "scenarios": [...]}},
"provenance": {...}, "elapsed_s": ...}`` on stdout. A task that fails records its error and the rest go on.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time

WORKER_TIMEOUT_S = 1800.0
INTERRUPTED = "interrupted before the worker finished"  # the error of a worker stopped by Ctrl-C


def worker_command() -> list[str]:
    """The command line of a worker (the same interpreter as this process)."""
    return [sys.executable, "-m", "cublas_det._worker"]


def spawn(request: dict, env: dict) -> subprocess.Popen:
    """Start a worker on ``request`` with environment ``env``; it runs while the caller works."""
    process = subprocess.Popen(worker_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    process.stdin.write(json.dumps(request))
    process.stdin.close()
    process.stdin = None  # sent in full; communicate() in collect() must not touch it again
    return process


def collect(process, timeout_s: float = WORKER_TIMEOUT_S) -> tuple[dict | None, str | None]:
    """A worker's JSON answer, or ``(None, one line saying what went wrong)``.

    ``process`` may be a string: the reason no worker was started, passed through as the error.
    """
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
        return json.loads(stdout), None
    except json.JSONDecodeError:
        return None, "worker wrote no JSON"


def kill_all(workers: dict) -> None:
    """Kill the workers still running (on Ctrl-C, or when the caller is done)."""
    for process in workers.values():
        if isinstance(process, subprocess.Popen) and process.poll() is None:
            process.kill()


def main() -> int:
    request = json.load(sys.stdin)
    import cupy

    from ._check import check_many
    from ._env import fingerprint
    from .shapes import parse_shape

    started = time.perf_counter()
    cupy.cuda.Device(request.get("device", 0)).use()
    results = {}
    for task in request["tasks"]:
        key = f"{task['spec']}|{task['mode']}"
        try:
            shape = dataclasses.replace(parse_shape(task["spec"]), name=task.get("name") or task["spec"])
            (check,) = check_many([shape], [task["mode"]], repeats=request.get("repeats", 20),
                                  scenarios=request.get("scenarios", []), seed=task.get("seed", 0))
            results[key] = {"digest": check.digest, "rel_error": check.rel_error,
                            "scenarios": [r.to_dict() for r in check.scenarios]}
        except Exception as err:  # recorded, so one bad task never hides the others
            results[key] = {"error": f"{type(err).__name__}: {err}"}
    json.dump({"results": results, "provenance": fingerprint(), "elapsed_s": time.perf_counter() - started},
              sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
