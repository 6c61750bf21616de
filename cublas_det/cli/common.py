"""What every command-line entry point shares: its name, one-line errors and refusals, exit codes, and output
files checked before any work and written each on its own (one that fails is one line; the others are written)."""

from __future__ import annotations

import argparse
import functools
import importlib
import math
import os
import shutil
import stat
import sys
from pathlib import Path

from ..bindings.cublas import CublasError, CublasNotFoundError
from ..core.device import INSTALL_HINT, NoGpuError
from ..base.errors import CublasDetError, ExitCode, UsageError
from ..base import files
from ..base.words import WIDTH, wrapped

# The expected failures an entry point makes one line and exit code 2: the package's own, and the bindings' (which
# import nothing of the package, so derive from the built-ins alone).
EXPECTED_ERRORS = (CublasDetError, CublasError, CublasNotFoundError)
# What runs on NumPy alone: the way forward on a machine without a GPU or the CUDA libraries.
WITHOUT_GPU = ("without a GPU, report, compare, diff, capture --from and bench --list run on NumPy alone "
               "(README: \"Try it without a GPU\")")


def prog_name() -> str:
    """The name the user typed, as argparse shows it from Python 3.14 on: ``python3 -m cublas_det.bench``
    for a module run with ``-m``, else the file name (``cublas-det-bench``, ``host_overhead.py``)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is None or spec.name == "__main__":
        return os.path.basename(sys.argv[0])
    return f"{os.path.basename(sys.executable)} -m {spec.name.removesuffix('.__main__')}"


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help, never splitting a hyphenated name (``fresh-handle``) across two lines."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return wrapped(" ".join(text.split()), width, indent="")

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(wrapped(" ".join(text.split()), width, indent, first=indent))


class RawDescriptionHelpFormatter(HelpFormatter):
    """:class:`HelpFormatter` with the description and epilog kept as written (examples, exit codes)."""

    _fill_text = argparse.RawDescriptionHelpFormatter._fill_text


# argparse's formatters, as every parser here asks for them, and the ones it gets instead
_FORMATTERS = {argparse.HelpFormatter: HelpFormatter, argparse.RawDescriptionHelpFormatter: RawDescriptionHelpFormatter}


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser with a one-line usage error and :class:`HelpFormatter`. ``refusals`` maps a sibling
    command's option this one does not take to why, with the fix (``{}``: the options given); ``build(parser)``
    adds a command's options when it is chosen, so that a command's module is imported only when it runs;
    ``redirect(parser, argv)`` reads the words first: None, or the parser and words to parse instead."""

    def __init__(self, prog=None, *args, formatter_class=argparse.HelpFormatter, build=None, **kwargs):
        super().__init__(prog or prog_name(), *args, formatter_class=_FORMATTERS.get(formatter_class, formatter_class),
                         **kwargs)
        self.refusals: dict[str, str] = {}
        self.build, self.redirect = build, None

    def parse_known_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        if self.build:
            build, self.build = self.build, None
            build(self)
        redirected = self.redirect(self, args) if self.redirect else None
        if redirected:
            return redirected[0].parse_known_args(redirected[1], namespace)
        return super().parse_known_args(args, namespace)

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        owner = getattr(parsed, "command_parser", self)  # the command's parser: its refusals, its name
        owner.refuse([word.partition("=")[0] for word in extras], owner.refusals)
        if extras:
            owner.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def refuse(self, options, why) -> None:
        """Exit with one line if one of ``options`` has a reason in ``why`` (a mapping, or one reason for all);
        the options with the first one's reason are named together."""
        reasons = {option: why.get(option) if isinstance(why, dict) else why for option in options}
        named = [option for option, reason in reasons.items() if reason]
        if named:  # a refusal names its fix, and so needs no pointer to --help
            reason = reasons[named[0]].format(", ".join(o for o in named if reasons[o] == reasons[named[0]]))
            error_line(self.prog, reason)
            self.exit(ExitCode.USAGE)

    def error(self, message: str):
        error_line(self.prog, f"{message} (see {self.prog} --help)")
        self.exit(ExitCode.USAGE)


def given(args, *dests: str) -> list[str]:
    """The options among ``dests`` that were given, as typed (``no_timing`` -> ``--no-timing``)."""
    return [f"--{dest.replace('_', '-')}" for dest in dests if getattr(args, dest, None)]


def exit_codes(*notes: str) -> str:
    """The exit codes as every ``--help`` ends with them, then what is particular to this command."""
    lines = ["exit codes:"]
    for code in ExitCode:
        lines += wrapped(code.meaning, WIDTH - 1, indent=" " * 7, first=f"  {int(code):<4} ")
    for note in notes:
        lines += wrapped(note, WIDTH - 1, indent="    ", first="  ")
    return "\n".join(lines) + "\n"


class ExtendList(argparse.Action):
    """A list option, ``--flag a b`` or ``--flag a --flag b``; its first use replaces a default list."""

    def __call__(self, parser, namespace, values, option_string=None):
        current = getattr(namespace, self.dest)
        items = [] if current is None or current is self.default else list(current)
        setattr(namespace, self.dest, items + list(values))


def describe(parser, doc: str, epilog: str, paragraphs: slice = slice(1, 2), **more) -> None:
    """Give a command's parser its description (``paragraphs`` of ``doc``, filled to argparse's width), its
    epilog (kept as written) and ``more`` (``usage``)."""
    width = max(shutil.get_terminal_size().columns - 2, 40)  # argparse.HelpFormatter's width
    description = "\n\n".join("\n".join(wrapped(" ".join(part.split()), width, indent=""))
                              for part in "\n\n".join(doc.split("\n\n")[paragraphs]).strip().split("\n\n"))
    vars(parser).update(description=description, epilog=epilog, formatter_class=RawDescriptionHelpFormatter, **more)


def error_line(prog: str, message: str, kind: str = "error") -> None:
    """``prog: error: message`` (or another ``kind``) on stderr: every error and warning a command prints
    comes here, one message within WIDTH columns, its first line naming the problem, the rest indented."""
    print("\n".join(wrapped(" ".join(str(message).split()), WIDTH, first=f"{prog}: {kind}: ")), file=sys.stderr)


warning_line = functools.partial(error_line, kind="warning")  # the run goes on


def run_guarded(prog: str, body) -> int:
    """Run ``body()`` and turn expected failures into one line on stderr and exit code 2: the project's
    own errors, a missing third-party module, Ctrl-C (130). Anything else is a bug and keeps its traceback."""
    try:
        return body()
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return ExitCode.OK
    except KeyboardInterrupt:
        error_line(prog, "interrupted")
        return ExitCode.INTERRUPTED
    except ModuleNotFoundError as err:
        top = (err.name or "cublas_det").partition(".")[0]
        if top == "cublas_det":  # a module of ours missing is a bug
            raise
        error_line(prog, f"CuPy is not installed ({err}); install it: {INSTALL_HINT}; {_without_gpu(prog)}"
                   if top in ("cupy", "cupy_backends") else str(err) if "pip install" in str(err)
                   else f"{err}; install it with pip")
    except EXPECTED_ERRORS as err:
        error_line(prog, f"{err}; {_without_gpu(prog)}" if isinstance(err, NoGpuError) else str(err))
    return ExitCode.USAGE


def _without_gpu(prog: str) -> str:
    """What still runs without a GPU, and the command that lists what this install lacks, under the name in use."""
    python, dash_m, _ = prog.partition(" -m ")
    return f"{WITHOUT_GPU}; {f'{python} -m cublas_det' if dash_m else 'cublas-det'} env --libs lists what is missing"


def command_main(add_arguments, run):
    """A command's ``build_parser`` and ``main`` (its ``python -m`` form; ``cublas-det`` uses :func:`set_up`)."""
    def build_parser(prog: str | None = None) -> ArgumentParser:
        return set_up(ArgumentParser(prog), add_arguments, run)

    def main(argv: list[str] | None = None, prog: str | None = None) -> int:
        return run_parsed(build_parser(prog).parse_args(argv))
    return build_parser, main


def set_up(parser, add_arguments, run):
    """``parser`` with a command's options, and the command to run when it parses."""
    add_arguments(parser)
    parser.set_defaults(run_command=run, command_parser=parser)
    return parser


def run_parsed(args) -> int:
    """The command ``args`` chose, run under its parser's name (:func:`run_guarded`)."""
    return run_guarded(args.command_parser.prog, lambda: args.run_command(args, args.command_parser))


def unless_missing(verdict: int, written: bool) -> int:
    """The exit code once the outputs are written: the verdict, but a clean 0 becomes 2 when a promised output
    is missing (a finding, or the exit code of a captured command, stands); every command decides it here."""
    return ExitCode.USAGE if verdict == ExitCode.OK and not written else verdict


def check_outputs(args, *flags: str) -> None:
    """Refuse, before any work, an output of ``flags`` that cannot be written as a file (found by opening it:
    ``os.access`` says yes to root for ``/proc/x.json``), and --plot without matplotlib."""
    for name in flags:
        path, flag = getattr(args, name.replace("-", "_")), f"--{name}"
        if path is None:
            continue
        if not path.strip():
            raise UsageError(f"{flag}: the path is empty; give a file name")
        if os.path.isdir(path):
            raise UsageError(f"{flag} {path}: is a directory; give a file name")
        existed = os.path.exists(path)
        if existed and stat.S_ISFIFO(os.stat(path).st_mode):  # opening it would wait for a reader
            raise UsageError(f"{flag} {path}: is a FIFO (named pipe); give a file name")
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.lexists(directory):  # one that is a file: open() below says so
            raise UsageError(f"{flag} {path}: directory {directory} does not exist")
        try:
            open(path, "a").close()  # "a": an existing file is not truncated by the check
        except OSError as err:  # the OS's reason is the fix: a folder to make, a permission, another path
            raise UsageError(f"{flag} {path}: cannot be written: {err.strerror or err}") from None
        if not existed:
            os.remove(path)
    if "plot" in flags and args.plot:
        try:
            importlib.import_module("matplotlib")
        except ImportError:
            raise UsageError("--plot needs matplotlib: install the plot extra (pip install matplotlib)") from None


def fail_on(when: str) -> dict:
    """--fail-on's keywords for ``add_argument``, ``when`` it applies (``with two files``)."""
    return dict(type=float, metavar="PCT", help=f"{when}: exit 1 if a median time grew by more than PCT percent")


def check_fail_on(percent: float | None) -> None:
    """Refuse a --fail-on that is no percentage >= 0 (NaN included)."""
    if percent is not None and not (math.isfinite(percent) and percent >= 0):
        raise UsageError(f"--fail-on {percent}: expected a percentage >= 0, e.g. --fail-on 5")


def write_text(path: str, text: str, prog: str) -> bool:
    return write_file(path, prog, lambda: Path(path).write_text(text))


def write_json(path: str, data: dict, prog: str) -> bool:
    return write_file(path, prog, lambda: files.write_json(path, data, default=str))  # a run's provenance as text


def write_file(path: str, prog: str, write) -> bool:
    """Whether ``write()`` wrote ``path``, said on stderr either way (a failure in one line; the caller goes on)."""
    try:
        write()
    except OSError as err:
        error_line(prog, f"could not write {path}: {err.strerror or err}")
        return False
    print(f"wrote {path}", file=sys.stderr)
    return True
