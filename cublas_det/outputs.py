"""Output files of the command-line tools: checked before any work, written each on its own.

A path is checked by opening it for writing (and removing it again if it did not exist), not by
``os.access``, which says yes to root for paths that cannot be written (``/proc/x.json``). When a
write fails after a run, the other outputs are still written and the failure is one line.
"""

from __future__ import annotations

import json
import os
import sys

from .errors import UsageError


def check_writable(path: str, flag: str) -> None:
    """Raise :class:`UsageError` (one line) unless ``path`` can be written as a file."""
    if not path or not path.strip():
        raise UsageError(f"{flag}: the path is empty; give a file name")
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path}: is a directory; give a file name")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError(f"{flag} {path}: directory {directory} does not exist; create it first")
    existed = os.path.exists(path)
    try:
        with open(path, "a"):  # "a": an existing file is not truncated by the check
            pass
    except OSError as err:
        raise UsageError(f"{flag} {path}: cannot be written ({err.strerror or err}); choose another path") from None
    if not existed:
        os.remove(path)


def write_text(path: str, text: str) -> bool:
    """Write ``text`` to ``path``; on failure print one line and return False (the caller goes on)."""
    try:
        with open(path, "w") as file:
            file.write(text)
    except OSError as err:
        print(f"error: could not write {path}: {err.strerror or err}", file=sys.stderr)
        return False
    print(f"wrote {path}", file=sys.stderr)
    return True


def write_json(path: str, data: dict) -> bool:
    return write_text(path, json.dumps(data, indent=1, default=str))
