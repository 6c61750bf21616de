"""Worker processes that check GEMMs on one device: for the scenarios that need a fresh process and
for per-device sweeps.

- :mod:`.protocol`: the typed request and answer, and the one key of a task;
- :mod:`.parent`: the parent's side (start, collect, kill);
- ``python -m cublas_det.check.worker`` (:mod:`.__main__`): the child.
"""
