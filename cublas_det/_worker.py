"""Worker process for the scenarios that need a fresh process (and for per-device sweeps).

Reads one JSON request on stdin::

    {"device": 0, "tasks": [{"spec": "128x56x4096:nt", "name": "...", "mode": 2, "seed": 0}],
     "scenarios": ["streams-shared-handle"], "repeats": 20}

and writes ``{"results": {"<spec>|<mode>": {"digest": ..., "rel_error": ..., "scenarios": [...]}},
"provenance": {...}}`` on stdout. A task that fails records its error and the rest go on.
"""

from __future__ import annotations

import dataclasses
import json
import sys


def main() -> int:
    request = json.load(sys.stdin)
    import cupy

    from ._check import check_many
    from ._env import fingerprint
    from .shapes import parse_shape

    cupy.cuda.Device(request.get("device", 0)).use()
    results = {}
    for task in request["tasks"]:
        key = f"{task['spec']}|{task['mode']}"
        try:
            shape = dataclasses.replace(parse_shape(task["spec"]), name=task.get("name") or task["spec"])
            (check,) = check_many([shape], [task["mode"]], repeats=request.get("repeats", 20),
                                  scenarios=request.get("scenarios", []), seed=task.get("seed", 0))
            results[key] = {"digest": check.digest, "rel_error": check.rel_error,
                            "scenarios": [r.to_dict() for r in check.scenarios]}
        except Exception as err:  # recorded, so one bad task never hides the others
            results[key] = {"error": f"{type(err).__name__}: {err}"}
    json.dump({"results": results, "provenance": fingerprint()}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
