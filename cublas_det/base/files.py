"""Reading the files a user names and writing ours: each refusal is one line naming the file (not a
regular file, too large, not UTF-8, a JSON number no writer makes, a key twice, too deep); ``NaN`` and
``Infinity`` are read, a UTF-8 byte-order mark is skipped."""

from __future__ import annotations

import codecs
import json
import math
import os
import stat

from .errors import InputFileError
from .integers import is_int

MAX_INT_DIGITS = 40  # twice the digits of a 64-bit seed, size or count
# UTF-32 LE's mark begins with UTF-16 LE's: looked for first.
_MARKS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
          (codecs.BOM_UTF16_BE, "UTF-16"))


def file_kind(mode: int) -> str:
    """``a directory``, ``a FIFO (named pipe)`` ... for the ``st_mode`` of what is not a file."""
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"


def regular_file_size(path: str, hint: str = "give a regular file", *, error=InputFileError) -> int:
    """The size of ``path``; ``error`` (one line) unless it exists and is a regular file (links followed)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise error(f"{path}: no such file; {hint}") from None
    except OSError as err:
        raise error(f"{path}: cannot stat ({err.strerror or err}); {hint}") from None
    if not stat.S_ISREG(info.st_mode):
        raise error(f"{path}: is {file_kind(info.st_mode)}, not a file; {hint}")
    return info.st_size


def open_regular(path: str, hint: str = "give a regular file", *, max_bytes: int | None = None,
                 what: str = "file", error=InputFileError, buffering: int = -1):
    """``path`` opened for binary reading, a regular file of at most ``max_bytes`` (checked before a FIFO's
    open could block, and again on the open file)."""
    size = regular_file_size(path, hint, error=error)
    if max_bytes is not None and size > max_bytes:
        raise error(f"{path}: {size:,} bytes, more than a {what} ever is ({max_bytes:,} at most); {hint}")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise error(f"{path}: cannot be read ({err.strerror or err}); {hint}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise error(f"{path}: is {file_kind(mode)}, not a file; {hint}")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb", buffering=buffering)


class _Refused(ValueError):
    """A JSON number no writer makes, raised inside the parser."""


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {digits} digits (at most {MAX_INT_DIGITS} are read)")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Refused(f"the number {text[:24]} is beyond the range of a float")
    return value


def _object(pairs) -> dict:
    found = dict(pairs)
    if len(found) < len(pairs):
        twice = next(key for index, (key, _) in enumerate(pairs) if key in dict(pairs[:index]))
        raise _Refused(f"the key {json.dumps(twice)[:60]} appears twice in one object (which one holds?)")
    return found


def parse_json(text, where: str, *, error=InputFileError):
    """``json.loads(text)`` with the module's refusals as ``error(where: ...)``; decode errors are the caller's."""
    try:
        return json.loads(text, parse_int=_parse_int, parse_float=_parse_float, object_pairs_hook=_object)
    except _Refused as err:
        raise error(f"{where}: {err}") from None
    except RecursionError:
        raise error(f"{where}: JSON nested deeper than can be read") from None


def read_json(path: str, hint: str, *, max_bytes: int, what: str):
    """The parsed JSON of the regular file ``path`` (at most ``max_bytes``); else one line ending with ``hint``."""
    with open_regular(path, hint, max_bytes=max_bytes, what=what) as file:
        try:
            raw = file.read()
        except OSError as err:
            raise InputFileError(f"{path}: cannot be read ({err.strerror or err}); {hint}") from None
    text = decode_text(raw, path, hint)
    try:
        return parse_json(text, path)
    except json.JSONDecodeError as err:
        if err.pos >= len(text.rstrip()):  # the text ends before the JSON does: cut short, not malformed
            raise InputFileError(f"{path}: not JSON: it may be truncated; {hint}") from None
        raise InputFileError(f"{path}:{err.lineno}:{err.colno}: not JSON ({err.msg}); {hint}") from None


def decode_text(raw: bytes, path: str, hint: str, *, error=InputFileError) -> str:
    """``raw`` as UTF-8 text, a byte-order mark skipped; else one ``error`` line (UTF-16 and UTF-32 named)."""
    for mark, name in _MARKS:
        if raw.startswith(mark):
            raise error(f"{path}: {name} text; save it as UTF-8; {hint}")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise error(f"{path}: not a text file; {hint}") from None


def check_format(data, path: str, format_name: str, version: int, what: str, hint: str, again: str) -> None:
    """Refuse (one line) ``data`` unless ``"format": format_name`` at ``version``; ``again``: how to make one."""
    if not isinstance(data, dict) or data.get("format") != format_name:
        raise InputFileError(f"{path}: not a {what} (no \"format\": \"{format_name}\"); {hint}")
    found = data.get("version")
    if not is_int(found) or found != version:  # 1.0 and true are not 1
        raise InputFileError(f"{path}: {what} format version {json.dumps(found)[:40]}; this cublas_det reads "
                             f"version {version}: {again} with this version")


class TooLarge(ValueError):
    """What :func:`write_json` would write is larger than ``max_bytes``: nothing was written."""


def write_json(path: str, data, *, whole: bool = False, compact: bool = False, default=None,
               max_bytes: int | None = None) -> None:
    """``data`` as JSON with one-space indents and a final newline, or one line (``compact``); ``whole``:
    written beside ``path`` and renamed over it; ``default``: as :func:`json.dumps`'s; ``max_bytes``: a bound
    its readers keep (:class:`TooLarge` past it, its size the message)."""
    text = json.dumps(data, default=default) if compact else json.dumps(data, indent=1, default=default) + "\n"
    if max_bytes is not None and len(text) > max_bytes:  # ASCII: characters are bytes
        raise TooLarge(f"{len(text):,} bytes")
    target = f"{path}.tmp{os.getpid()}" if whole else path
    try:
        with open(target, "w") as file:
            file.write(text)
        if whole:
            os.replace(target, path)
    finally:
        if whole and os.path.exists(target):
            os.unlink(target)
