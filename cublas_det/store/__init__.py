"""Every file cublas_det writes and reads, as documents checked by one validator (:mod:`.schema`).

:mod:`.files` opens and writes files, :mod:`.run` is the ``--json`` run file, :mod:`.lock` the lock
file and its reports, :mod:`.capture` the capture file, :mod:`.trace_log` a run's ``trace.jsonl``.
Nothing here renders.
"""
