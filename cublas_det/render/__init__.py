"""Rendering only: the words of a verdict, the terminal table and summary, JSON, Markdown, a plot,
the device sweep's report, and the comparison with a baseline. Nothing here runs a GEMM."""
