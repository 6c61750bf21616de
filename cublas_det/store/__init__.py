"""The run files (written from a run's records and read back) and the trace logs, checked by the one validator
(:mod:`cublas_det.base.schema`) and read and written through :mod:`cublas_det.base.files`. Nothing here renders."""
