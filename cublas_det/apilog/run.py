"""Run a program with cuBLAS's and cuBLASLt's logs streamed through named pipes into the parsers, nothing on disk;
a write end held open here keeps the program's writers from blocking on ``open`` or ending the stream early, and
a pipe is removed before its reader closes, so a process that opens it later finds no pipe, never one unread."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shutil
import signal
import tempfile
import threading
import time

from ..base.enter import entry_failures, python_env, run_program
from .inprocess import LOG_ENV as WHOLE_CALLS_ENV
from .model import Capture
from .parse import CHUNK, CublasLogParser, LtLogParser

PIPE_BYTES = 1 << 20  # the pipe's buffer (Linux's default cap for F_SETPIPE_SZ): fewer stalls of the writer
AFTER_EXIT_S = 2.0  # what is still coming this long after the program ended (from a daemon it left) is not waited for
LOG_ENV = ("CUBLAS_LOGINFO_DBG", "CUBLAS_LOGDEST_DBG", "CUBLASLT_LOG_LEVEL", "CUBLASLT_LOG_FILE", "CUBLASLT_LOG_MASK")


class _PipeReader(threading.Thread):
    def __init__(self, path: str, parser):
        super().__init__(daemon=True, name=f"capture {os.path.basename(path)}")
        self.path, self.parser = path, parser
        self.read_fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.keep_fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # a reader exists, so this does not block
        with contextlib.suppress(OSError, AttributeError):
            fcntl.fcntl(self.read_fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        self.program_done = threading.Event()
        self.survivors: list[int] = []  # processes the program left that may still write (set when it ends)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for data in self._chunks():
                self.parser.feed(data)
            self.parser.close()
        except BaseException as err:  # a parser bug: reported by the caller, with its traceback
            self.error = err
            for _ in self._chunks():  # closing the pipe now would kill the program at its next log line (SIGPIPE)
                pass
        finally:
            with contextlib.suppress(OSError):
                os.unlink(self.path)  # an open after this fails at once; one of a pipe without a reader would wait
            os.close(self.read_fd)

    def _chunks(self):
        """The pipe's data as it comes, until the program ended and every writer closed, or ``AFTER_EXIT_S``
        after it ended (then ``stopped_after_exit_s`` says so)."""
        deadline = None
        while deadline is None or time.monotonic() < deadline:
            if deadline is None and self.program_done.is_set():
                deadline = time.monotonic() + AFTER_EXIT_S
                if self.keep_fd is not None:
                    os.close(self.keep_fd)
                    self.keep_fd = None
            ready, _, _ = select.select([self.read_fd], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(self.read_fd, CHUNK)
            except BlockingIOError:
                continue
            if not data:  # every writer closed, ours included
                self.survivors = [pid for pid in self.survivors if _alive(pid)]
                if deadline is None or not self.survivors:
                    return
                time.sleep(0.05)  # a process the program left may open the log yet (cuBLAS opens it at its first call)
                continue
            yield data
        self.parser.stats.stopped_after_exit_s = AFTER_EXIT_S

    def stop(self, survivors: list[int]) -> None:
        """The program ended: read on until its writers are done, ``AFTER_EXIT_S`` at most."""
        self.survivors = list(survivors)
        self.program_done.set()

    def finish(self) -> None:
        self.join()
        if self.keep_fd is not None:
            os.close(self.keep_fd)
            self.keep_fd = None


def run_captured(command: list[str], capture: Capture) -> tuple[int, bool]:
    """Run ``command`` with both logs parsed into ``capture``; ``(exit status as a shell gives it,
    interrupted by Ctrl-C)``. Raises ``FileNotFoundError``/``PermissionError`` if it cannot start."""
    folder = tempfile.mkdtemp(prefix="cublas-det-capture-")
    readers = []
    try:
        paths = {kind: os.path.join(folder, f"{kind}.log") for kind in ("cublas", "cublaslt")}
        for path in paths.values():
            os.mkfifo(path, 0o600)
        readers = [_PipeReader(paths["cublas"], CublasLogParser(capture, "(pipe)")),
                   _PipeReader(paths["cublaslt"], LtLogParser(capture, "(pipe)"))]
        env = {key: value for key, value in os.environ.items() if key not in LOG_ENV}
        env.update(CUBLAS_LOGINFO_DBG="1", CUBLAS_LOGDEST_DBG=paths["cublas"], CUBLASLT_LOG_LEVEL="5",
                   CUBLASLT_LOG_FILE=paths["cublaslt"])
        # A Python process writes each thread's cuBLAS calls whole (its logger callback), others line by line.
        env = python_env(["cublas_det.apilog.inprocess:start"], {WHOLE_CALLS_ENV: paths["cublas"]}, base=env,
                         log=os.path.join(folder, "enter.log"))  # a process not entered: a note, not its output
        for reader in readers:
            reader.start()
        return run_program(command, env)
    finally:
        survivors = _writers(folder) if readers else []
        for reader in readers:
            reader.stop(survivors)  # both at once: neither log's wait adds to the other's
        for reader in readers:
            with contextlib.suppress(KeyboardInterrupt):
                reader.finish()
        capture.notes += entry_failures(os.path.join(folder, "enter.log"))
        shutil.rmtree(folder, ignore_errors=True)
        for reader in readers:
            if reader.error is not None:
                raise reader.error


def _writers(folder: str) -> list[int]:
    """Processes (other than this one) whose environment names the pipes' folder: the program's, left running."""
    mark, found = folder.encode(), []
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) != os.getpid():
                with contextlib.suppress(OSError), open(f"/proc/{name}/environ", "rb") as file:
                    if mark in file.read():
                        found.append(int(name))
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            return b") Z " not in file.read(128)
    except OSError:
        return False


def signal_name(status: int) -> str:
    """``SIGKILL`` for 137, ``""`` for a status that is not a signal's."""
    if status > 128:
        with contextlib.suppress(ValueError):
            return signal.Signals(status - 128).name
    return ""
