"""cublas-det report RUN.json: render a stored run again (table, summary, Markdown, plot). No GPU needed.

The exit code is the stored verdict's, so that CI can gate on a stored run."""

from __future__ import annotations

from ..base.errors import ExitCode
from ..render.markdown import to_markdown
from ..render.plot import plot
from ..check.stored import bench_result, old_file_note
from ..render.text import render_text
from ..results.bench import run_failed
from ..store.run import load_run
from .common import check_outputs, command_main, describe, exit_codes, unless_missing, write_file, write_text

EPILOG = """example:
  %(prog)s run.json --markdown run.md --plot run.png

""" + exit_codes("the stored verdict's: 0 the run passed, 1 it failed (a guarantee failed or could not be "
                                 "checked)")


def add_arguments(parser) -> None:
    describe(parser, __doc__.split(": ", 1)[1], EPILOG, slice(0, 1))
    parser.add_argument("file", metavar="RUN.json", help="a file written by bench --json")
    parser.add_argument("--markdown", metavar="PATH", help="also write the tables and summary as Markdown")
    parser.add_argument("--plot", metavar="PATH", help="also write a PNG of time per mode per shape (needs matplotlib)")


def run(args, parser) -> int:
    prog = parser.prog
    check_outputs(args, "markdown", "plot")
    run = load_run(args.file)
    result = bench_result(run)
    notes = [note for note in [old_file_note(run)] if note]
    print(render_text(result, notes=notes))
    written = write_text(args.markdown, to_markdown(result, notes), prog) if args.markdown else True
    if args.plot:
        written &= write_file(args.plot, prog, lambda: plot(result).savefig(args.plot))
    return unless_missing(ExitCode.FINDING if run_failed(result) else ExitCode.OK, written)


build_parser, main = command_main(add_arguments, run)
