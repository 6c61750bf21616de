"""A training run's trace log, ``trace.jsonl`` (:mod:`cublas_det.rundiff.recorder` writes it): one JSON
object a line per recorded tensor, as :data:`ENTRY` (or :data:`ENTRY_WITH_FILE`) describes it."""

from __future__ import annotations

import json
import re

from ..bits.digest import ALGORITHM, DIGEST_HEX_DIGITS
from ..base.errors import InputFileError
from ..base.integers import is_int
from ..base.files import open_regular, parse_json
from ..base.schema import Record, check

LOG_NAME = "trace.jsonl"
MAX_LOG_LINE = 1 << 20  # a line records one tensor: far shorter than this
MAX_DIMS = 64  # numpy's
HINT = "give the trace.jsonl of cublas_det.trace.Recorder"
_HEX = re.compile(r"^[0-9a-f]+$")


def is_shape(shape) -> bool:
    """A list (or tuple) of at most MAX_DIMS integers in [0, 2**63)."""
    return (isinstance(shape, (list, tuple)) and len(shape) <= MAX_DIMS
            and all(is_int(n, 0, (1 << 63) - 1) for n in shape))


def inside_run(relative) -> bool:
    """Whether a line's ``file`` is a relative path that stays inside the run (no ``..``, not absolute)."""
    parts = relative.split("/") if isinstance(relative, str) else []
    return bool(parts) and not (relative.startswith("/") or "\\" in relative or "\0" in relative
                                or ":" in parts[0] or any(part in ("", ".", "..") for part in parts))


_FIELDS = {
    "step": ("an integer from 0 to 2**63 - 1", lambda v: is_int(v, 0, (1 << 63) - 1)),
    "leaf": "a non-empty string", "dtype": ("a dtype name such as 'float32'", lambda v: isinstance(v, str)),
    "shape": (f"a list of at most {MAX_DIMS} integers from 0 to 2**63 - 1", is_shape),
    "algorithm": (f"{ALGORITHM!r}, the digest this version reads", lambda v: v == ALGORITHM),
    "digest": (f"{DIGEST_HEX_DIGITS} lowercase hex digits",
               lambda v: isinstance(v, str) and len(v) == DIGEST_HEX_DIGITS and bool(_HEX.match(v))),
    "file": ("a path inside the run directory such as 'step_0/x.bin' (no '..', not absolute)", inside_run)}
ENTRY = Record(_FIELDS, required=("step", "leaf", "dtype", "shape", "digest"))
ENTRY_WITH_FILE = Record(_FIELDS, required=("step", "leaf", "dtype", "shape"))  # its bytes there, a digest optional


def read(log_path: str, *, error=InputFileError) -> tuple[list, list]:
    """``([(path:line, line's object) ...], notes)``: the log's lines, each checked; one ``error`` line for
    any that is not a log's, a note for a last line cut short."""
    entries, notes = [], []
    with open_regular(log_path, HINT, error=error) as stream:
        for number, line in enumerate(_lines(stream, log_path, error), 1):
            where = f"{log_path}:{number}"
            if not line.strip():
                continue
            try:
                entry = parse_json(line.decode("utf-8"), where, error=error)
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                if not line.endswith(b"\n"):
                    notes.append(f"{where}: the last line is cut ({len(line)} bytes, no newline, not JSON); "
                                 "dropped: was the run stopped while writing it?")
                    break
                reason = f"not UTF-8 text ({err.reason})" if isinstance(err, UnicodeDecodeError) else err.msg
                raise error(f"{where}: malformed JSON line ({reason})") from None
            has_file = isinstance(entry, dict) and entry.get("file") is not None
            check(entry, f"{where}:", ENTRY_WITH_FILE if has_file else ENTRY, error=error)
            entries.append((where, entry))
    return entries, notes


def _lines(stream, log_path: str, error):
    """The log's lines as bytes, each at most MAX_LOG_LINE long (a longer one is not a log's)."""
    while True:
        try:
            line = stream.readline(MAX_LOG_LINE + 1)
        except OSError as err:
            raise error(f"{log_path}: read failed: {err.strerror or err}") from None
        if not line:
            return
        if len(line) > MAX_LOG_LINE:
            raise error(f"{log_path}: a line longer than {MAX_LOG_LINE} bytes: not a trace log of "
                        "cublas_det.trace.Recorder")
        yield line
