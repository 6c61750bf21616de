"""Rendering only: the words, tables, JSON, Markdown and plot of a result, and comparisons. Runs no GEMM."""
