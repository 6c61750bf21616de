"""What every command line entry point shares: one-line errors and exit codes.

Exit codes: 0 all as expected, 1 a finding that fails the check, 2 usage or environment error.
"""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_FINDING, EXIT_USAGE = 0, 1, 2


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the project's error style: one line ``prog: error: message (see --help)``, exit 2."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def error_line(prog: str, message: str) -> None:
    """Print ``prog: error: message`` on stderr, on one line."""
    print(f"{prog}: error: {' '.join(str(message).split())}", file=sys.stderr)


def run_guarded(prog: str, body) -> int:
    """Run ``body()`` and turn expected failures into one line on stderr and exit code 2.

    Expected: the project's own errors (:mod:`cublas_det.errors`: a bad argument, env value, path or
    file, no GPU, a cuBLAS status, a shape that does not fit) and Ctrl-C (130). Anything else, a
    ``ValueError`` from deep inside included, is a bug and keeps its traceback.
    """
    from .errors import CublasDetError

    try:
        return body()
    except KeyboardInterrupt:
        error_line(prog, "interrupted")
        return 130
    except CublasDetError as err:
        error_line(prog, str(err))
        return EXIT_USAGE
