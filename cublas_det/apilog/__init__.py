"""Capture: the GEMMs a program runs, read from cuBLAS's and cuBLASLt's own API logs.

:mod:`.parse` reads the logs as they stream, :mod:`.model` aggregates the calls, :mod:`.findings`
says what they show, :mod:`.replay` turns each GEMM into the shim's shape and configuration,
:mod:`.run` runs a program with its logs piped to the parsers, :mod:`.file` reads and writes captures.
``load_capture(path).plans`` gives each GEMM's ``shape`` and ``config`` for ``check_gemm``.
"""

from .file import load as load_capture

__all__ = ["load_capture"]
