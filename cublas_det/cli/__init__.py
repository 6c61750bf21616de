"""The ``cublas-det`` command: one entry point, a subcommand for each task.

``python -m cublas_det.bench``, ``.compare``, ``.report``, ``.diff`` and ``.capture`` run the same subcommands.
"""

from __future__ import annotations

import importlib
import sys

from .. import __version__
from .common import EXIT_OK, EXIT_USAGE, error_line, prog_name

EXIT_CODES = """exit codes:
  0    as expected: every guarantee held, the bits agree, nothing to report as failed
  1    a finding that fails the check: a guarantee failed or could not be checked, bits differ,
       a time regressed past --fail-on, two runs diverge
  2    usage or environment error (bad argument or file, no GPU), or nothing was compared
  130  interrupted (Ctrl-C); what completed was reported"""

# name -> ("module:function" in this package, what it does). A command's module is imported when it
# runs, so that `cublas-det env` or `--help` does not import the benchmark's.
COMMANDS = {
    "bench": ("bench:main", "check and time the GEMMs: reproducible? which hazards? what cost? (main job)"),
    "compare": ("compare:main", "compare stored runs (--json files): the same bits? faster or slower? (no GPU)"),
    "report": ("report:main", "render a stored run again, as text or Markdown (no GPU)"),
    "diff": ("diff:main", "find where two training runs first diverge, from their dumps (no GPU)"),
    "capture": ("capture:main", "run a program and capture the GEMMs it runs, from cuBLAS's own logs; findings"),
    "run": ("run:main", "run a PyTorch program with the lock applied, unchanged; what was locked"),
    "audit": ("audit:main", "the first op of a PyTorch step that is not batch-invariant or does not repeat"),
    "explain": ("bench:explain_main", "the kernels a shape runs per mode, SM count and batch size (CUPTI)"),
    "env": ("env:main", "the environment fingerprint, and where the CUDA libraries were found (default)"),
}


def command_main(name: str):
    """The ``main(argv, prog)`` of command ``name``."""
    module, _, function = COMMANDS[name][0].partition(":")
    return getattr(importlib.import_module(f".{module}", __name__), function)


def usage(prog: str) -> str:
    width = max(map(len, COMMANDS))
    lines = [f"usage: {prog} [--version] [COMMAND] [ARGS...]", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    lines += ["", f"'{prog} COMMAND --help' says more; with no command, '{prog}' runs 'env'.", "", EXIT_CODES]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    prog = prog_name()
    if argv[:1] in (["-h"], ["--help"]):
        print(usage(prog))
        return EXIT_OK
    if argv[:1] == ["--version"]:
        print(f"cublas-det {__version__}")
        return EXIT_OK
    if not argv or argv[0].startswith("-"):  # no command: env, as `python -m cublas_det` always was
        return command_main("env")(argv, prog=prog)
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        error_line(prog, f"no command {command!r}; choose one of {', '.join(COMMANDS)} (see {prog} --help)")
        return EXIT_USAGE
    return command_main(command)(rest, prog=f"{prog} {command}")
