"""The project's own expected errors, each one line saying what was wrong and how to fix it (the entry points
make it one line on stderr and exit code 2); each derives from the built-in a caller would expect."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Every command's exit status, and what it means (each command's --help and the README say it)."""

    OK = 0, "as expected: every guarantee held, the bits agree, nothing to report as failed"
    FINDING = 1, ("a finding that fails the check: a guarantee failed or could not be checked, bits differ, "
                  "a time regressed past --fail-on, two runs diverge")
    USAGE = 2, "usage or environment error (bad argument or file, no GPU), or nothing was compared"
    INTERRUPTED = 130, "interrupted (Ctrl-C); what completed was reported"

    def __new__(cls, code: int, meaning: str):
        member = int.__new__(cls, code)
        member._value_, member.meaning = code, meaning
        return member


class CublasDetError(Exception):
    """An expected failure: bad input, or an environment that cannot run the request."""


class UsageError(CublasDetError, ValueError):
    """A bad argument, environment value or output path."""


class InputFileError(UsageError):
    """A stored run (``--json`` file) that cannot be read: missing, not JSON, or malformed."""


class DoesNotFit(CublasDetError, MemoryError):
    """A GEMM needs more host or device memory than is available."""


class KernelsUnavailable(CublasDetError, RuntimeError):
    """Kernel traces were asked for, and CUPTI cannot be used here (no cupti-python, no libcupti)."""
