"""cublas-det capture: the GEMMs a program runs, however it calls cuBLAS, from cuBLAS's own API logs.

Runs the command with cuBLAS's and cuBLASLt's logging on, streaming both logs through named pipes
into a parser (nothing large lands on disk), and writes the distinct GEMMs, the handles, streams
and threads, and findings about how the program calls cuBLAS. Any program works: PyTorch, JAX,
CuPy, a Rust or C++ trainer. --from reads logs that a program wrote itself (CUBLAS_LOGINFO_DBG=1
CUBLAS_LOGDEST_DBG=FILE, CUBLASLT_LOG_LEVEL=5 CUBLASLT_LOG_FILE=FILE), gzipped or not.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import os
import re
import zlib

from ..apilog.file import from_data, to_dict
from ..apilog.model import Capture
from ..apilog.parse import CublasLogParser, LtLogParser, parse_stream
from ..apilog.run import run_captured, signal_name
from ..core.device import device_properties
from ..base.errors import ExitCode, InputFileError, UsageError
from ..base.files import open_regular
from ..render.capture import render_capture
from .common import check_outputs, command_main, describe, exit_codes, unless_missing, write_json

EPILOG = """examples:
  %(prog)s -- python train.py --steps 3   # writes capture.json and a report
  %(prog)s --out run.json -- ./trainer --config c.toml
  %(prog)s --from cublas.log cublaslt.log.gz   # logs a job wrote
  cublas-det bench --capture capture.json   # check and time exactly those GEMMs

""" + exit_codes("the command's own exit code is passed on (128 + N when signal N ended it); with --from, 0")
_LT_LINE = re.compile(rb"^\[[^\]\r\n]*\]\[cublasLt\]")  # a log's first line, matched where its text begins


def add_arguments(parser) -> None:
    describe(parser, __doc__, EPILOG, usage="%(prog)s [--out FILE] [--quiet] -- CMD [ARGS...]\n"
                                            "       %(prog)s [--out FILE] [--quiet] --from LOG [LOG ...]")
    parser.add_argument("--out", default="capture.json", metavar="FILE",
                        help="the capture file to write (default: %(default)s)")
    parser.add_argument("--from", dest="logs", nargs="+", metavar="LOG",
                        help="read these cuBLAS and/or cuBLASLt logs instead of running a command")
    parser.add_argument("--quiet", action="store_true", help="write the file, print no report")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")


class _Log:
    """A log file's bytes: ``peek`` looks as far ahead as asked, ``read`` returns what one read gives."""

    def __init__(self, path: str, raw):
        self.path, self.raw, self.stop, self._ready = path, raw, "", b""

    def _read1(self, size: int) -> bytes:
        return self.raw.read1(size)

    def peek(self, size: int) -> bytes:
        """``size`` bytes or all there are (a file's buffer, or a gzip member, may end sooner)."""
        while len(self._ready) < size and (data := self._read1(size)):
            self._ready += data
        return self._ready[:size]

    def read(self, size: int) -> bytes:
        if self._ready:
            data, self._ready = self._ready[:size], self._ready[size:]
            return data
        return self._read1(size)  # one read: what came before a stop is never lost


class _Gunzipped(_Log):
    """A gzip log's text as it decompresses (members one after another), up to where it stops decompressing
    (cut short, other bytes after the last member, corrupt data): ``stop`` then says why."""

    def __init__(self, path: str, raw):
        super().__init__(path, raw)
        self.gzip, self.given = gzip.GzipFile(fileobj=raw), 0

    def _read1(self, size: int) -> bytes:
        try:
            data = b"" if self.stop else self.gzip.read1(size)
        except EOFError:
            self.stop = "ends early (cut)"
        except (zlib.error, gzip.BadGzipFile) as err:  # a new member's header is where other bytes are found
            self.stop = ("goes on with bytes that are not gzip" if str(err).startswith("Not a gzipped file")
                         else f"has corrupt data ({err})")
        else:
            self.given += len(data)
            return data
        if not self.given:
            raise InputFileError(f"{self.path}: a gzip file that does not decompress (it {self.stop}); "
                                 "give the log itself")
        return b""


def _kind(path: str, file: _Log) -> tuple[str, int]:
    """The log's kind from its first line of text (``empty`` if it has none; InputFileError if neither log's),
    and the blank bytes before that line, read here: however many there are, the 4 KB looked at begin with text."""
    skipped = 0
    while (head := file.peek(4096)) and (blank := len(head) - len(head.lstrip())):
        skipped += len(file.read(blank))
    if not head:
        return "empty", skipped
    if head.startswith(b"I! cuBLAS") or _LT_LINE.match(head):
        return ("cublas" if head.startswith(b"I! cuBLAS") else "cublaslt"), skipped
    raise InputFileError(f"{path}: neither a cuBLAS API log (lines 'I! cuBLAS ...') nor a cuBLASLt log "
                         "(lines '[time][cublasLt]...'); give the files CUBLAS_LOGDEST_DBG and CUBLASLT_LOG_FILE named")


def _read_logs(paths: list[str], capture: Capture) -> bool:
    """Parse the logs at ``paths`` into ``capture``; whether each was read to its end (a note says why not)."""
    logs = []  # (kind, blank bytes before its text, path, file), every file checked before any is parsed
    with contextlib.ExitStack() as opened:
        for path in paths:
            raw = opened.enter_context(open_regular(path, "give the log file itself", what="log"))
            file = (_Gunzipped if raw.peek(2)[:2] == b"\x1f\x8b" else _Log)(path, raw)
            logs.append((*_kind(path, file), path, file))
            if logs[-1][0] == "empty":  # a program that never called cuBLAS leaves an empty log
                capture.notes.append(f"{path}: empty, nothing to read")
        kinds = [kind for kind, _, _, _ in logs]
        for kind in ("cublas", "cublaslt"):
            if kinds.count(kind) > 1:
                raise UsageError(f"--from: {kinds.count(kind)} {kind} logs; give at most one of each (one program's)")
        for kind, skipped, path, file in logs:
            if kind != "empty":
                parser = (CublasLogParser if kind == "cublas" else LtLogParser)(capture, path)
                parser.stats.bytes += skipped
                parse_stream(parser, file)
            if file.stop:
                capture.notes.append(f"{path}: the gzip file {file.stop}: read up to there")
        return not any(file.stop for _, _, _, file in logs)


def _compute_capability() -> str | None:
    """The local GPU's compute capability as the device gives it ("9.0" for Hopper), or None without one."""
    try:
        return device_properties()["compute_capability"]
    except Exception:  # no CuPy, no driver, no GPU: the finding says the GPU is unknown
        return None


def run(args, parser) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if bool(command) == bool(args.logs):
        parser.error("give a command after -- or logs with --from, one of the two")
    check_outputs(args, "out")
    if args.logs and os.path.exists(args.out) and any(
            os.path.exists(log) and os.path.samefile(log, args.out) for log in args.logs):
        raise UsageError(f"--out {args.out}: is one of the logs read; give another file name")
    capture = Capture()
    status, complete = ExitCode.OK, True
    if args.logs:
        complete = _read_logs(args.logs, capture)
    else:
        capture.command = command
        if os.environ.get("CUBLAS_WORKSPACE_CONFIG"):
            capture.environment["CUBLAS_WORKSPACE_CONFIG"] = os.environ["CUBLAS_WORKSPACE_CONFIG"]
        try:
            status, interrupted = run_captured(command, capture)
        except OSError as err:  # not found, not executable, not a program (ENOEXEC) ...
            raise UsageError(f"cannot run {command[0]!r}: {err.strerror or err}") from None
        capture.exit_status = status
        note = ("interrupted (Ctrl-C)" if interrupted else
                f"the command was ended by {signal_name(status)}" if signal_name(status) else
                f"the command failed (exit {status})" if status else "")
        if note:
            capture.notes.append(note)
        complete, status = not note, ExitCode.INTERRUPTED if interrupted else status
    data = to_dict(capture, complete=complete, compute_capability=_compute_capability())
    written = write_json(args.out, data, parser.prog)
    if not args.quiet:
        print(render_capture(from_data(data, args.out), args.out if written else ""))
    return unless_missing(status, written)


build_parser, main = command_main(add_arguments, run)
