"""Every file cublas_det writes and reads, as documents: their schemas, checked by one validator.

:mod:`.files` opens what a user names, parses its JSON strictly and writes ours; :mod:`.schema`
checks a document against a small description of its records, in one-line errors; :mod:`.run` is
the ``--json`` run file, :mod:`.lock` the lock file and each process's report under it,
:mod:`.capture` the capture file and :mod:`.trace_log` the training run's ``trace.jsonl``. Nothing
here renders: the reports read these documents, and the results they hold are made back from them
in the parts that own them.
"""
