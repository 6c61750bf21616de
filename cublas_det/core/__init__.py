"""The GEMM: its shapes and configurations, its one identity (``GemmKey``), a call in cuBLAS's terms
(``GemmDefinition``), its cuBLASLt plan, the handle that issues it and ``gemm()``."""
