"""Capture: the GEMMs a program runs, from cuBLAS's and cuBLASLt's API logs (parsed, aggregated, judged and
replayed); ``load_capture(path).plans`` gives each GEMM's ``shape`` and ``config`` for ``check_gemm``."""

from .file import load as load_capture

__all__ = ["load_capture"]
