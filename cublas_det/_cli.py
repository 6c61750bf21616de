"""What every command line entry point shares: one-line errors and exit codes.

Exit codes: 0 all as expected, 1 a finding that fails the check, 2 usage or environment error.
"""

from __future__ import annotations

import sys

EXIT_OK, EXIT_FINDING, EXIT_USAGE = 0, 1, 2


def error_line(prog: str, message: str) -> None:
    """Print ``prog: error: message`` on stderr, on one line."""
    print(f"{prog}: error: {' '.join(str(message).split())}", file=sys.stderr)


def run_guarded(prog: str, body) -> int:
    """Run ``body()`` and turn expected failures into one line on stderr and exit code 2.

    Expected: no GPU, a bad argument or env value, an unwritable path, a cuBLAS status, Ctrl-C
    (130). Anything else is a bug and keeps its traceback.
    """
    from ._cublas import CublasError, CublasNotFoundError
    from ._device import NoGpuError

    try:
        return body()
    except KeyboardInterrupt:
        error_line(prog, "interrupted")
        return 130
    except (NoGpuError, CublasNotFoundError, ValueError, TypeError, OSError, CublasError) as err:
        error_line(prog, str(err))
        return EXIT_USAGE
