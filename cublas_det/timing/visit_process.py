"""A timing process of a run (``processes``): its share of the run's visits, in a fresh interpreter.

Started as ``python -m cublas_det.timing.visit_process FD`` with its options pickled on stdin; it
runs ``engine.visit_shapes`` and reports on the pipe whose writing end is FD: ("visit", visit,
going) after each turn of visits, then one of ("done", Visited), ("failed", a one-line reason) or
("error", a traceback).
"""

from __future__ import annotations

import traceback

from .._device import gpu_failures
from .engine import visit_shapes, warm_up

WARM_UP_S = 0.3  # a process's GPU work follows its start-up's idle seconds: clocks up again first


def take_visits(writer, options: dict) -> None:
    """``engine.visit_shapes`` with ``options``, reported on ``writer``: "failed" when the GPU failed
    outside a shape's visits (no GPU, no memory for a context), "done" with None after Ctrl-C before
    any whole visit."""
    try:
        failures = gpu_failures() if options.get("failures") is None else options["failures"]
        try:
            warm_up(WARM_UP_S)
            visited = visit_shapes(**options, on_visit=lambda visit, going: writer.send(("visit", visit, going)))
        except failures as err:
            writer.send(("failed", f"timing failed: {type(err).__name__}: {err}"))
        else:
            writer.send(("done", visited))
    except KeyboardInterrupt:  # before any visit was whole: nothing to keep
        writer.send(("done", None))
    except Exception:  # noqa: BLE001 - a bug: its traceback goes to the run, which raises it
        writer.send(("error", traceback.format_exc()))
    finally:
        writer.close()


def main() -> None:
    import pickle
    import sys
    from multiprocessing.connection import Connection

    take_visits(Connection(int(sys.argv[1]), readable=False), pickle.load(sys.stdin.buffer))


if __name__ == "__main__":
    main()
