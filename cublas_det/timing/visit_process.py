"""A timing process of a run (``processes``): its share of the run's visits, in a fresh interpreter.

Started by ``processes`` with the writing end of a pipe as its one argument (a file descriptor) and
its options on stdin (an 8-byte length, then their pickle); it runs ``engine.visit_shapes`` and
reports on the pipe: ("visit", visit, going) after each turn of visits, then one of ("done",
Visited), ("failed", a one-line reason) when the GPU failed outside a shape's visits (no GPU, no
memory for a context), or ("error", a traceback) for a bug.

It ignores SIGINT: a terminal's Ctrl-C is the run's to pass on, and the run does so by writing to
this process's stdin, after which its visits end as Ctrl-C ends them (each shape keeps its whole
visits). The end of stdin means the run is gone, or done with this process: it ends at once.
"""

from __future__ import annotations

import os
import threading
import traceback

from .processes import LENGTH_BYTES

WARM_UP_S = 0.3  # a process's GPU work follows its start-up's idle seconds: clocks up again first


class RunGone(Exception):
    """The run's end of the pipe is closed: nobody to report to."""


def take_visits(writer, options: dict, stop=None) -> None:
    """``engine.visit_shapes`` with ``options`` (and ``device``: the CUDA device to use, None for the
    default), reported on ``writer``; ``stop()``: true once the run asks the visits to end. Raises
    :class:`RunGone` when the report cannot be sent."""

    def report(message) -> None:
        try:
            writer.send(message)
        except OSError as err:
            raise RunGone(str(err)) from None

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
            visited = visit_shapes(**options, stop=stop, on_visit=lambda visit, going: report(("visit", visit, going)))
        except failures as err:
            report(("failed", f"timing failed: {type(err).__name__}: {err}"))
        else:
            report(("done", visited))
    except RunGone:
        raise
    except KeyboardInterrupt:  # not a terminal's (ignored): a run that signalled this process itself
        report(("done", None))
    except Exception:  # noqa: BLE001 - a bug: its traceback goes to the run, which raises it
        report(("error", traceback.format_exc()))
    finally:
        writer.close()


def read_options(fd: int = 0) -> dict:
    """The options the run wrote on ``fd``: their length, then their pickle (read whole, and nothing
    after them: what follows on stdin is the run's word to stop)."""
    import pickle

    length = int.from_bytes(_read_exactly(fd, LENGTH_BYTES), "big")
    return pickle.loads(_read_exactly(fd, length))


def _read_exactly(fd: int, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = os.read(fd, count - len(data))
        if not chunk:
            raise EOFError(f"the run's options ended after {len(data)} of {count} bytes")
        data += chunk
    return data


def _watch_stdin(stop: threading.Event, fd: int = 0) -> None:
    """Any byte on stdin: the run asks the visits to end; its end: the run is gone, and so is this process."""
    while True:
        if not os.read(fd, 64):
            os._exit(1)
        stop.set()


def main() -> None:
    """The process: the pipe from its argument (kept from any process it starts), options from stdin."""
    import signal
    import sys
    from multiprocessing.connection import Connection

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run passes Ctrl-C on (see above)
    fd = int(sys.argv[1])
    os.set_inheritable(fd, False)
    writer = Connection(fd, readable=False)
    try:
        options = read_options()
    except Exception:  # noqa: BLE001 - options it cannot read (a class only the caller's script defines): a bug
        writer.send(("error", traceback.format_exc()))
        writer.close()
        return
    stop = threading.Event()
    threading.Thread(target=_watch_stdin, args=(stop,), name="cublas_det-run-watch", daemon=True).start()
    try:
        take_visits(writer, options, stop=stop.is_set)
    except RunGone:  # the run is gone (its end of the pipe closed)
        os._exit(1)


if __name__ == "__main__":
    main()
