"""``python -m cublas_det.worker``: check the GEMMs of one :class:`~.protocol.Request` read on stdin.

Writes one :class:`~.protocol.Answer` on stdout. A task that fails records its error and the rest
go on, so one bad task never hides the others.
"""

from __future__ import annotations

import json
import sys
import time

from .protocol import Answer, Request, TaskAnswer


def main() -> int:
    request = Request.from_dict(json.load(sys.stdin))
    import cupy

    from .._provenance import fingerprint
    from ..check import check_many

    started = time.perf_counter()
    cupy.cuda.Device(request.device).use()
    results = {}
    for task in request.tasks:
        try:
            (check,) = check_many([task.shape], [task.config], repeats=request.repeats, scenarios=request.scenarios,
                                  seed=task.seed)
            results[task.key] = TaskAnswer(check.digest, check.rel_error, check.scenarios, check.error,
                                           check.input_digests)
        except Exception as err:  # recorded, so one bad task never hides the others
            results[task.key] = TaskAnswer(error=f"{type(err).__name__}: {err}")
    answer = Answer(results, fingerprint(), time.perf_counter() - started)
    json.dump(answer.to_dict(), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
