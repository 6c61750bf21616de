"""A timing process of a run (``processes``): its share of the run's visits, in a fresh interpreter.

Started by ``processes`` with its options pickled on stdin and the writing end of a pipe as its
one argument (a file descriptor); it runs ``engine.visit_shapes`` and reports on the pipe:
("visit", visit, going) after each turn of visits, then one of ("done", Visited), ("done", None)
after Ctrl-C before any whole visit, ("failed", a one-line reason) when the GPU failed outside a
shape's visits (no GPU, no memory for a context), or ("error", a traceback) for a bug.
"""

from __future__ import annotations

import signal
import traceback

WARM_UP_S = 0.3  # a process's GPU work follows its start-up's idle seconds: clocks up again first


def take_visits(writer, options: dict, on_taken=None) -> None:
    """``engine.visit_shapes`` with ``options`` (and ``device``: the CUDA device to use, None for the
    default), reported on ``writer``; ``on_taken()`` is called once the visits are taken, before
    their report is sent."""
    try:
        from .._device import gpu_failures
        from .engine import visit_shapes, warm_up

        options = dict(options)
        device = options.pop("device", None)
        failures = gpu_failures() if options.get("failures") is None else options["failures"]
        try:
            if device is not None:
                import cupy

                cupy.cuda.Device(device).use()
            warm_up(WARM_UP_S)
            visited = visit_shapes(**options, on_visit=lambda visit, going: writer.send(("visit", visit, going)))
        except failures as err:
            writer.send(("failed", f"timing failed: {type(err).__name__}: {err}"))
        else:
            if on_taken is not None:
                on_taken()
            writer.send(("done", visited))
    except KeyboardInterrupt:  # before any visit was whole: nothing to keep
        writer.send(("done", None))
    except Exception:  # noqa: BLE001 - a bug: its traceback goes to the run, which raises it
        writer.send(("error", traceback.format_exc()))
    finally:
        writer.close()


def main() -> None:
    """The process: the pipe from its argument (kept from any process it starts), options from stdin."""
    import os
    import pickle
    import sys
    from multiprocessing.connection import Connection

    fd = int(sys.argv[1])
    os.set_inheritable(fd, False)
    writer = Connection(fd, readable=False)
    try:
        options = pickle.load(sys.stdin.buffer)
    except KeyboardInterrupt:
        writer.send(("done", None))
        writer.close()
        return
    except Exception:  # noqa: BLE001 - options it cannot read (a class only the caller's script defines): a bug
        writer.send(("error", traceback.format_exc()))
        writer.close()
        return
    # Once the visits are taken, a Ctrl-C must not cut their report short (the run waits for it whole).
    take_visits(writer, options, on_taken=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))


if __name__ == "__main__":
    main()
