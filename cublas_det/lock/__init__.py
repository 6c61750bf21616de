"""The lock's use in any process: the interposer (C) that takes cuBLAS's GEMM entry points, and its Python side."""
