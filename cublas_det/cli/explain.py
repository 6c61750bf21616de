"""cublas-det explain SHAPE: the kernels of one shape per configuration, SM-count target and batch size.

The kernels one shape runs in each configuration, under SM-count targets and at each batch size,
and how long they take (CUPTI: the kernels-cuda13 or kernels-cuda12 extra). SHAPE is MxNxK[:op]
or a catalogue name such as mamba2-130m/in_proj/dW (see cublas-det bench --list).
"""

from __future__ import annotations

from ..device import require_gpu
from ..errors import ExitCode, UsageError
from ..explain import explain_shape, render_explanation
from ..kernels.recorder import require_cupti
from ..memory import check_fits
from ..shapes import catalogue_entry, parse_shape
from .common import command_main, exit_codes, help_texts
from .gemms import family_parser, read_options

EPILOG = """examples:
  %(prog)s 128x56x4096:nt --modes pedantic tf32
  %(prog)s mamba2-130m/in_proj/dW

""" + exit_codes()


def explain_target(spec: str, tokens: int):
    """The shape to explain: a catalogue name (any preset at ``tokens``) or MxNxK[:op]."""
    if shape := catalogue_entry(lambda s: s.name == spec, (tokens,)):
        return shape
    if not spec.strip()[:1].isdigit():
        raise UsageError(f"{spec!r} to explain: neither a shape like 128x56x4096:nt nor a catalogue name "
                         "(see cublas-det bench --list)")
    try:
        return parse_shape(spec)
    except ValueError as err:
        raise UsageError(f"the shape to explain: {err}") from None


def run(argv: list[str], prog: str) -> int:
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        raise UsageError(f"a shape comes first, e.g. {prog} 128x56x4096:nt --modes pedantic tf32 (see {prog} --help)")
    parser = family_parser(prog, ("configs",), "explain prints one table and exits; drop {}",
                           usage="%(prog)s SHAPE [options]", **help_texts(__doc__, EPILOG))
    parser.add_argument("target", metavar="SHAPE", help="MxNxK[:op], or a catalogue name")
    args = parser.parse_args(argv)
    _, _, _, configs = read_options(args)
    shape = explain_target(args.target, args.tokens)
    require_gpu()
    require_cupti()  # the feature itself: without CUPTI, one line and exit 2
    for config in configs:
        check_fits(shape, config, timing=False)
    print(render_explanation(explain_shape(shape, configs, seed=args.seed)))
    return ExitCode.OK


main = command_main(run)
