"""The lock, all of it: its file, the PyTorch router and the one enabled lock, the per-process boot and report,
and the interposer (C) that takes cuBLAS's GEMM entry points in any other program, with its Python side."""
