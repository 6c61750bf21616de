"""``python -m cublas_det.check.worker``: check the GEMMs of a :class:`~.protocol.Request` on stdin, write an
:class:`~.protocol.Answer` on stdout; a task that fails records its error."""

from __future__ import annotations

import json
import sys
import time

from ...core.device import fingerprint
from ...core.memory import host_available_bytes
from ...core.operands import HostOperands
from ...core.shapes import gemm_key
from .. import check_many
from .protocol import Answer, Request, TaskAnswer


def main() -> int:
    request = Request.from_dict(json.load(sys.stdin))
    import cupy
    started = time.perf_counter()
    cupy.cuda.Device(request.device).use()
    results = {}
    # One call per seed: each pair of operands drawn once, each float64 reference shared.
    for seed in sorted({task.seed for task in request.tasks}):
        tasks = [task for task in request.tasks if task.seed == seed]
        shapes = list({task.shape.spec: task.shape for task in tasks}.values())
        configs = list(dict.fromkeys(task.config for task in tasks))
        # The run and its three workers draw at once: a worker holds a sixteenth of the free host memory.
        operands = HostOperands(seed, (host_available_bytes() or 8 * 2**30) // 16)
        try:
            checks = check_many(shapes, configs, repeats=request.repeats, scenarios=request.scenarios, seed=seed,
                                operands=operands)
        except Exception as err:  # recorded, so the other seeds are still answered
            checks = []
            results.update({task.key: TaskAnswer(error=f"{type(err).__name__}: {err}") for task in tasks})
        finally:
            operands.close()
        wanted = {task.key for task in tasks}
        for check in checks:
            key = gemm_key(check.shape.spec, check.config.name)
            if key in wanted:
                results[key] = TaskAnswer(check.digest, check.rel_error, check.scenarios, check.error,
                                          check.input_digests)
    json.dump(Answer(results, fingerprint(), time.perf_counter() - started).to_dict(), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
