"""``cublas_det.trace``: record a training run's tensors as digests, step by step, for ``cublas-det diff``.

The documented face of :mod:`cublas_det.rundiff.recorder`::

    from cublas_det.trace import Recorder
    with Recorder("runs/a") as rec:
        rec.record(step, "dW1", dw1)
"""

from .rundiff.recorder import Recorder, as_tensor

__all__ = ["Recorder", "as_tensor"]
