"""cublas-det explain SHAPE: the kernels of one shape per configuration, SM-count target and batch size.

The kernels one shape runs in each configuration, under SM-count targets and at each batch size,
and how long they take (CUPTI: the kernels-cuda13 or kernels-cuda12 extra). SHAPE is MxNxK[:op]
or a catalogue name such as mamba2-130m/in_proj/dW (bench --list prints them).
"""

from __future__ import annotations

from ..core.device import require_gpu
from ..base.errors import ExitCode, UsageError
from ..check.explain import explain_shape, render_explanation
from ..kernels.recorder import require_cupti
from ..core.memory import check_fits
from ..core.shapes import catalogue_entry, parse_shape
from .common import command_main, describe, exit_codes
from .gemms import add_family, read_options

EPILOG = """examples:
  %(prog)s 128x56x4096:nt --modes pedantic tf32
  %(prog)s mamba2-130m/in_proj/dW

""" + exit_codes("2 also without cupti-python (the kernels-cuda13 or kernels-cuda12 extra)")


def explain_target(spec: str, tokens: int):
    """The shape to explain: a catalogue name (any preset at ``tokens``) or MxNxK[:op]."""
    if shape := catalogue_entry(lambda s: s.name == spec, (tokens,)):
        return shape
    if not spec.strip()[:1].isdigit():
        raise UsageError(f"{spec!r} to explain: neither a shape like 128x56x4096:nt nor a catalogue name "
                         "(bench --list prints the names)")
    try:
        return parse_shape(spec)
    except ValueError as err:
        raise UsageError(f"the shape to explain: {err}") from None


def add_arguments(parser) -> None:
    describe(parser, __doc__, EPILOG, usage="%(prog)s SHAPE [options]")
    add_family(parser, ("configs",), "explain prints one table and exits; drop {}")
    parser.add_argument("target", metavar="SHAPE", help="MxNxK[:op], or a catalogue name")
    parser.redirect = _shape_first


def _shape_first(parser, argv: list[str]) -> None:
    """Refuse words that do not start with the shape (or --help)."""
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        parser.error(f"a shape comes first, e.g. {parser.prog} 128x56x4096:nt --modes pedantic tf32")


def run(args, parser) -> int:
    _, _, _, configs = read_options(args)
    shape = explain_target(args.target, args.tokens)
    require_gpu()
    require_cupti()  # the feature itself: without CUPTI, one line and exit 2
    for config in configs:
        check_fits(shape, config, timing=False)
    print(render_explanation(explain_shape(shape, configs, seed=args.seed)))
    return ExitCode.OK


build_parser, main = command_main(add_arguments, run)
