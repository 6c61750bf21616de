"""Put first on a program's PYTHONPATH by ``cublas-det run`` and ``capture``: see :mod:`cublas_det.base.enter`."""
