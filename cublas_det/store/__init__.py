"""Every file cublas_det writes and reads (runs, captures, locks, trace logs), checked by one validator
(:mod:`.schema`); :mod:`.files` opens and writes them. Nothing here renders."""
