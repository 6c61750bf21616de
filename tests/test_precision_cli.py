"""Half precision in the benchmark: --dtype, --out-dtype, --compute-type, --precision, and the summary line."""

import argparse
import dataclasses

import pytest

from cublas_det.bindings.cublas import ComputeType, MathMode
from cublas_det.results.check import GemmCheck, Kind, ScenarioResult
from cublas_det.cli import bench, gemms
from cublas_det.core.config import GemmConfig
from cublas_det.base.errors import UsageError
from cublas_det.results.bench import BenchResult, ShapeReport
from cublas_det.render.text import cost_lines, precision_lines, table_rows, title
from cublas_det.core.shapes import parse_shape
from cublas_det.results.timing import ArmTiming, Ratio, ShapeTiming
from cublas_det.results.timing import Arm

from .conftest import unwrapped


def _args(**given):
    values = {"precision": None, "dtype": None, "out_dtype": None, "compute_type": None, "modes": None}
    return argparse.Namespace(**{**values, **given})


def test_default_configurations_are_the_three_fp32_modes():
    assert [c.name for c in gemms._configurations(_args())] == ["PEDANTIC", "DEFAULT", "TF32"]


def test_half_precision_defaults_and_products():
    configs = gemms._configurations(_args(dtype="bf16"))
    assert [c.name for c in configs] == ["PEDANTIC/bfloat16->bfloat16", "DEFAULT/bfloat16->bfloat16",
                                         "PEDANTIC+DISALLOW_RPR/bfloat16->bfloat16"]
    configs = gemms._configurations(_args(dtype="fp16", out_dtype="float32", modes=["pedantic"],
                                          compute_type=["32f", "COMPUTE_32F_PEDANTIC"]))
    assert [c.name for c in configs] == ["PEDANTIC/float16->float32",
                                         "PEDANTIC/COMPUTE_32F_PEDANTIC/float16->float32"]


def test_the_mamba2_amp_precision():
    configs = gemms._configurations(_args(precision="mamba2-amp"))
    assert configs[0] == GemmConfig(MathMode.PEDANTIC, input_dtype="bfloat16", output_dtype="bfloat16")
    assert configs[3].compute_type is ComputeType.COMPUTE_32F_PEDANTIC and configs[2].disallow_reduced_precision_reduction
    with pytest.raises(UsageError, match="--precision mamba2-amp sets the types and modes"):
        gemms._configurations(_args(precision="mamba2-amp", dtype="bf16"))


@pytest.mark.parametrize("given, message", [
    ({"dtype": "int8"}, "--dtype 'int8' is not supported; choose float32, bfloat16, float16"),
    ({"dtype": "bf16", "modes": ["tf32"]}, "TF32 math applies to float32 inputs, not bfloat16"),
    ({"dtype": "float16", "out_dtype": "bfloat16"}, "float16 inputs with a bfloat16 output are not supported"),
    ({"compute_type": ["fast"]}, "--compute-type 'fast' is not a cuBLAS compute type"),
    ({"modes": ["pedantic+rpr"]}, "--modes='pedantic+rpr': not pedantic"),
])
def test_bad_precisions_are_named(tmp_path, capsys, given, message):
    argv = []
    for key, value in given.items():
        argv += [f"--{key.replace('_', '-')}", *(value if isinstance(value, list) else [value])]
    assert bench.main(argv) == 2
    err = unwrapped(capsys.readouterr().err).strip()
    assert message in err and "\n" not in err


def _bf16_result():
    shape = parse_shape("3352x768x16384:nt")
    dt = "bfloat16->bfloat16"
    cells = {f"{mode}/{dt}/{compute}": {"digest": "x", "rel_error": 3e-3}
             for mode in ("PEDANTIC", "PEDANTIC+DISALLOW_RPR", "DEFAULT", "DEFAULT+DISALLOW_RPR")
             for compute in ("COMPUTE_32F", "COMPUTE_32F_PEDANTIC")}
    same = [cell for cell in cells if cell.endswith("/COMPUTE_32F")]
    modes = ScenarioResult("modes", Kind.COMPARISON, 3, 0, extra={
        "matrix": cells, "groups": [[c.rsplit("/", 1)[0] for c in same]],
        "all_groups": [same, [c for c in cells if c not in same]]})
    configs = gemms._configurations(_args(precision="mamba2-amp"))
    checks = {c.name: GemmCheck(shape, c, "argument", 0, "ab" * 32, 3e-3, (ScenarioResult("repeat", Kind.GUARANTEE,
              20, 0), modes)) for c in configs}
    names = [c.name for c in configs]
    arms = tuple(ArmTiming(Arm.read(n), (t,) * 10, (t,) * 10) for n, t in zip(names, (100.0, 100.0, 100.0, 3800.0)))
    ratios = (Ratio(names[3], names[0], 38.0, 37.8, 38.2, 10), Ratio(names[1], names[0], 1.0, 0.99, 1.01, 10),
              Ratio(names[2], names[0], 1.0, 0.99, 1.01, 10))
    timing = ShapeTiming(shape.name, shape.flop, 10, 1, 10, arms, ratios, 1.0)
    return BenchResult((ShapeReport(shape, checks, timing),), {"gpu": {"name": "NVIDIA H200"}}, "now", 1.0, "x")


def test_the_summary_answers_the_bf16_user():
    result = _bf16_result()
    (line,) = precision_lines(result)
    assert line == ("Same bits in bfloat16: PEDANTIC, PEDANTIC+DISALLOW_RPR, DEFAULT, DEFAULT+DISALLOW_RPR on 1 "
                    "shape; PEDANTIC/COMPUTE_32F_PEDANTIC changed them (1 of 1), "
                    "PEDANTIC+DISALLOW_RPR/COMPUTE_32F_PEDANTIC changed them (1 of 1), DEFAULT/COMPUTE_32F_PEDANTIC "
                    "changed them (1 of 1), DEFAULT+DISALLOW_RPR/COMPUTE_32F_PEDANTIC changed them (1 of 1)")
    assert cost_lines(result) == [
        "Time, PEDANTIC/COMPUTE_32F_PEDANTIC vs PEDANTIC: 38.00x the time (custom shapes)",
        "Time, PEDANTIC+DISALLOW_RPR vs PEDANTIC: no measurable difference on 1 of 1 shape (within ±1.0%)"]
    assert "bfloat16 -> bfloat16" in title(result)  # the element types, said once: the tables show roles


def test_the_table_compares_bf16_configurations_with_pedantic_in_bf16():
    result = _bf16_result()
    rows = table_rows(result.shapes[0])
    assert [row[0] for row in rows] == ["PEDANTIC", "DEFAULT", "PEDANTIC+DISALLOW_RPR", "PEDANTIC/COMPUTE_32F_PEDANTIC"]
    assert rows[0][-1] == "" and rows[3][-1] == "38.000 ±0.5%"


def test_the_title_names_the_machine_as_it_did_before_it_read_the_describer():
    result = dataclasses.replace(_bf16_result(), provenance={
        "gpu": {"name": "NVIDIA H200", "sm_count": 132}, "cublas_version": "13.1.0", "driver_version": "13.0"})
    assert title(result) == ("cublas_det x on NVIDIA H200 (132 SMs), cuBLAS 13.1.0, driver 13.0: 1 shape x 4 modes, "
                             "bfloat16 -> bfloat16, 1.0 s")
    assert title(_bf16_result()).startswith("cublas_det x on NVIDIA H200 (? SMs), cuBLAS ?, driver ?: ")
