"""The ``cublas-det`` command: a subcommand for each task, each its own module here (``python -m
cublas_det.bench``, ``.compare``, ``.report``, ``.diff`` and ``.capture`` run the same subcommands)."""

from __future__ import annotations

import argparse
import functools
import importlib

from .. import __version__
from .common import ArgumentParser, exit_codes, run_parsed, set_up

# name (of its module here) -> what it does. A command's module is imported, and its options added to
# its subparser, when it is chosen: `cublas-det env` or `--help` does not import the benchmark's.
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
    "env": "the environment fingerprint, and where the CUDA libraries were found",
}


def _add_command(name: str, parser) -> None:
    module = importlib.import_module(f".{name}", __name__)
    set_up(parser, module.add_arguments, module.run)


def build_parser(prog: str | None = None) -> ArgumentParser:
    """``cublas-det``: a subparser per command, made by the same ``add_arguments`` as its ``python -m`` form."""
    parser = ArgumentParser(prog, usage="%(prog)s [--version] [COMMAND] [ARGS...]",
                            formatter_class=argparse.RawDescriptionHelpFormatter,
                            epilog="'%(prog)s COMMAND --help' says more; options without a command are env's:\n"
                                   "'%(prog)s --libs' (no GPU needed).\n\n"
                                   + exit_codes())
    parser.add_argument("--version", action="version", version=f"cublas-det {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND [ARGS...]", help="(options alone: env)")
    for name, summary in COMMANDS.items():
        commands.add_parser(name, prog=f"{parser.prog} {name}", help=summary,
                            build=functools.partial(_add_command, name))
    parser.redirect = _env_or_unknown
    return parser


def _env_or_unknown(parser, argv: list[str]):
    """Nothing given: this help (a first command needs no GPU); options without a command: env's, under the
    program's own name; a word that names no command is refused."""
    if not argv:
        parser.print_help()
        parser.exit(0)
    if argv[0] in (*COMMANDS, "-h", "--help", "--version"):
        return None
    if not argv[0].startswith("-"):
        parser.error(f"no command {argv[0]!r}; choose one of {', '.join(COMMANDS)}")
    return ArgumentParser(parser.prog, build=functools.partial(_add_command, "env")), argv


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    return run_parsed(build_parser(prog).parse_args(argv))
