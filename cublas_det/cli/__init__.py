"""The command line: every entry point of cublas_det."""
