"""cuBLAS's API log taken over inside a Python process (its own file output off): the logger callback gathers
each thread's lines, and each whole call goes to the capture's pipe in one locked write, never mixed."""

from __future__ import annotations

import atexit
import ctypes
import errno
import os
import threading

from ..bindings import cublas as _cublas

LOG_ENV = "CUBLAS_DET_CAPTURE_LOG"  # the pipe whole calls are written to
_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_char_p)
_state: dict = {}


class _Gatherer:
    def __init__(self, fd: int):
        self.fd = fd
        self.lines: dict = {}  # thread -> the lines of its call so far
        self.write_lock = threading.Lock()

    def line(self, message: bytes) -> None:
        thread = threading.get_ident()
        if message.startswith(b"I! cuBLAS") and self.lines.get(thread):
            self.flush(thread)  # a new call: the last one of this thread is whole
        self.lines.setdefault(thread, []).append(message if message.endswith(b"\n") else message + b"\n")
        if message.startswith(b"i! COMPILED WITH"):
            self.flush(thread)

    def flush(self, thread) -> None:
        data = b"".join(self.lines.pop(thread, ()))
        with self.write_lock:
            while data:
                data = data[os.write(self.fd, data):]

    def flush_all(self) -> None:
        for thread in list(self.lines):
            self.flush(thread)


def start() -> None:
    """Take cuBLAS's log over in this process (from ``sitecustomize``: ``CUBLAS_DET_CAPTURE_LOG`` names the pipe)."""
    cdll = _cublas.library()[0]
    try:  # a process that starts after capture stopped reading finds no pipe, or one without a reader: not entered
        fd = os.open(os.environ[LOG_ENV], os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK)
    except OSError as err:
        if isinstance(err, (FileNotFoundError, BlockingIOError)) or err.errno == errno.ENXIO:
            return
        raise
    os.set_blocking(fd, True)
    gatherer = _Gatherer(fd)
    # Exceptions cannot cross the C boundary: a failing line is lost, never the program.
    callback = _CALLBACK(lambda message: gatherer.line(message or b""))
    _state.update(callback=callback, gatherer=gatherer)  # kept alive: cuBLAS holds the pointer
    status = cdll.cublasSetLoggerCallback(callback)
    if status:
        raise _cublas.CublasError(status, "cublasSetLoggerCallback")
    cdll.cublasLoggerConfigure.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_char_p]
    status = cdll.cublasLoggerConfigure(1, 0, 0, None)  # on, to the callback alone
    if status:
        raise _cublas.CublasError(status, "cublasLoggerConfigure")
    atexit.register(_stop, cdll, gatherer)


def _stop(cdll, gatherer: _Gatherer) -> None:
    """At exit, before the interpreter goes: the log off and the callback unset. cuBLAS logs the handles that
    CuPy destroys after that, and a Python callback called once the interpreter is gone kills the process."""
    cdll.cublasLoggerConfigure(0, 0, 0, None)
    cdll.cublasSetLoggerCallback(None)
    gatherer.flush_all()
