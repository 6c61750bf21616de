"""Worker processes that check GEMMs on one device, for the scenarios that need a fresh process and
for per-device sweeps: :mod:`.protocol` (request, answer, task key), :mod:`.parent` (start, collect,
kill), and the child, ``python -m cublas_det.check.worker``."""
