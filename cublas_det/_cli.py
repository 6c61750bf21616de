"""What every command line entry point shares: its name, one-line errors and exit codes.

Exit codes: 0 all as expected, 1 a finding that fails the check, 2 usage or environment error.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import textwrap

EXIT_OK, EXIT_FINDING, EXIT_USAGE = 0, 1, 2


def prog_name() -> str:
    """The name the user typed: ``python3 -m cublas_det.bench``, ``cublas-det-bench``, ``host_overhead.py``.

    What argparse itself shows from Python 3.14 on: a module run with ``-m`` is named with the
    interpreter and ``-m``; a console script or a script file by its file name.
    """
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is None or spec.name == "__main__":
        return os.path.basename(sys.argv[0])
    return f"{os.path.basename(sys.executable)} -m {spec.name.removesuffix('.__main__')}"


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser with a one-line usage error, ``PROG: error: message``, like every other error here."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class ExtendList(argparse.Action):
    """A list option given as ``--flag a b`` or as ``--flag a --flag b`` (both give ``[a, b]``).

    Unlike argparse's own ``extend``, the first use replaces a default list instead of adding to it.
    """

    def __call__(self, parser, namespace, values, option_string=None):
        current = getattr(namespace, self.dest)
        items = [] if current is None or current is self.default else list(current)
        setattr(namespace, self.dest, items + list(values))


def wrap_paragraphs(text: str) -> str:
    """``text``'s paragraphs filled to the width argparse fills its own help to.

    For a description beside an epilog of examples: RawDescriptionHelpFormatter keeps the
    example lines as written, and so does not wrap the description itself.
    """
    width = max(shutil.get_terminal_size().columns - 2, 40)  # argparse.HelpFormatter's width
    return "\n\n".join(textwrap.fill(" ".join(part.split()), width) for part in text.strip().split("\n\n"))


def error_line(prog: str, message: str) -> None:
    """Print ``prog: error: message`` on stderr, on one line."""
    print(f"{prog}: error: {' '.join(str(message).split())}", file=sys.stderr)


def warning_line(prog: str, message: str) -> None:
    """Print ``prog: warning: message`` on stderr, on one line: the run goes on."""
    print(f"{prog}: warning: {' '.join(str(message).split())}", file=sys.stderr)


def run_guarded(prog: str, body) -> int:
    """Run ``body()`` and turn expected failures into one line on stderr and exit code 2.

    Expected: the project's own errors (:mod:`cublas_det.errors`: a bad argument, env value, path or
    file, no GPU, a cuBLAS status, a shape that does not fit), a missing third-party module (CuPy,
    PyTorch) and Ctrl-C (130). Anything else, a ``ValueError`` from deep inside included, is a bug
    and keeps its traceback.
    """
    from ._device import INSTALL_HINT
    from .errors import CublasDetError

    try:
        return body()
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return EXIT_OK
    except KeyboardInterrupt:
        error_line(prog, "interrupted")
        return 130
    except ModuleNotFoundError as err:
        top = (err.name or "cublas_det").partition(".")[0]
        if top == "cublas_det":  # a module of ours missing is a bug
            raise
        if top in ("cupy", "cupy_backends"):
            error_line(prog, f"CuPy is not installed ({err}); install it: {INSTALL_HINT}")
        else:
            error_line(prog, f"{err}; install it with pip")
        return EXIT_USAGE
    except CublasDetError as err:
        error_line(prog, str(err))
        return EXIT_USAGE
