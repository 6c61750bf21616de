"""Which kernels each GEMM ran: CUPTI records, readable names, and a signature per call (``--kernels``)."""
