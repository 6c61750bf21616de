"""The ``cublas-det`` command: a subcommand for each task, each its own module here (``python -m
cublas_det.bench``, ``.compare``, ``.report``, ``.diff`` and ``.capture`` run the same subcommands)."""

from __future__ import annotations

import importlib
import sys

from .. import __version__
from ..errors import ExitCode
from ..words import table
from .common import error_line, exit_codes, prog_name

# name (of its module here) -> what it does. A command's module is imported when it runs, so that
# `cublas-det env` or `--help` does not import the benchmark's.
COMMANDS = {
    "bench": "check and time the GEMMs: reproducible? which hazards? what cost? (main job)",
    "prescribe": "the verified, timed cures of each hazard found; --lock: the lock `run` applies",
    "explain": "the kernels a shape runs per mode, SM count and batch size (CUPTI)",
    "sweep": "every shape and mode on each GPU here, one worker each: the same bits?",
    "compare": "compare stored runs (--json files): the same bits? faster or slower? (no GPU)",
    "report": "render a stored run again, as text or Markdown (no GPU)",
    "diff": "find where two training runs first diverge, from their dumps (no GPU)",
    "capture": "run a program and capture the GEMMs it runs, from cuBLAS's own logs; findings",
    "run": "run a PyTorch program with the lock applied, unchanged; what was locked",
    "audit": "the first op of a PyTorch step that is not batch-invariant or does not repeat",
    "env": "the environment fingerprint, and where the CUDA libraries were found (default)",
}


def usage(prog: str) -> str:
    return "\n".join([f"usage: {prog} [--version] [COMMAND] [ARGS...]", "", "commands:",
                      *table(list(COMMANDS.items()), indent="  "), "",
                      f"'{prog} COMMAND --help' says more; with no command, '{prog}' runs 'env'.", "",
                      exit_codes().rstrip()])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    prog = prog_name()
    if argv[:1] in (["-h"], ["--help"]):
        print(usage(prog))
        return ExitCode.OK
    if argv[:1] == ["--version"]:
        print(f"cublas-det {__version__}")
        return ExitCode.OK
    if not argv or argv[0].startswith("-"):  # no command: env, the first look (GPU, cuBLAS, libraries)
        command, rest, name = "env", argv, prog
    elif argv[0] in COMMANDS:
        command, rest, name = argv[0], argv[1:], f"{prog} {argv[0]}"
    else:
        error_line(prog, f"no command {argv[0]!r}; choose one of {', '.join(COMMANDS)} (see {prog} --help)")
        return ExitCode.USAGE
    return importlib.import_module(f".{command}", __name__).main(rest, prog=name)
