"""One table per vocabulary: element types (cublas_det.base.dtypes) and math modes (cublas_det.core.config).

The expected values are the headers' (library_types.h, cublas_api.h) and the spellings of the CLI and
the logs; each module that uses a type or a mode, GPU modules included, is checked to take it from its table.
"""

import dataclasses
import inspect

import numpy as np
import pytest

from cublas_det.core import call, memory
from cublas_det import prescribe, pytest_plugin
from cublas_det.core import handle as lt
from cublas_det.core import plan
from cublas_det.bindings.cublas import MATH_MODE_FLAGS
from cublas_det.bits import gpu, streams
from cublas_det.apilog import findings, parse
from cublas_det.core import key as replay
from cublas_det.cli import bench as bench_cli
from cublas_det.cli import diff as diff_cli
from cublas_det.cli import gemms as gemms_cli
from cublas_det.core.config import (DEFAULT_MODES, FLAG_NAME, HALF_DEFAULT_MODES, HOPPER_WORKSPACE_BYTES,
    LT_WORKSPACE_BYTES, MODE_CHOICES, PRECISIONS, GemmConfig, math_mode_name)
from cublas_det.check.scenarios.modes import matrix
from cublas_det.base.dtypes import ALIASES, BY_CUDA, BY_CUDA_NAME, ELEMENT_TYPES, GEMM_TYPES
from cublas_det.render import capture as capture_report
from cublas_det.rundiff import layouts
from cublas_det.core.shapes import parse_shape
from cublas_det.core.config import name_role as role

# cudaDataType_t (library_types.h): CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_C_32F = 4,
# CUDA_C_64F = 5, CUDA_R_16BF = 14.
CUDA_DATA_TYPES = {"float32": 0, "float64": 1, "float16": 2, "complex64": 4, "complex128": 5, "bfloat16": 14}
ITEMSIZES = {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8, "int8": 1, "int16": 2, "int32": 4,
             "int64": 8, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1}
# The aliases of the types that bits/streams reads (DTYPES: no complex type).
FLOAT_ALIASES = {"fp32": "float32", "f32": "float32", "bf16": "bfloat16", "fp16": "float16", "f16": "float16",
               "half": "float16", "fp64": "float64", "f64": "float64"}
# cublasMath_t (cublas_api.h): the log's enumerators, as apilog/parse.MATH_MODES reads them.
LOG_MATH_MODES = {"CUBLAS_DEFAULT_MATH": 0, "CUBLAS_TENSOR_OP_MATH": 1, "CUBLAS_PEDANTIC_MATH": 2,
                  "CUBLAS_TF32_TENSOR_OP_MATH": 3, "CUBLAS_FP32_EMULATED_BF16X9_MATH": 4,
                  "CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION": 16}


def test_the_element_types_keep_their_cuda_enums_sizes_and_names():
    assert {name: t.cuda for name, t in ELEMENT_TYPES.items() if t.cuda is not None} == CUDA_DATA_TYPES
    assert {name: t.itemsize for name, t in streams.DTYPES.items()} == ITEMSIZES
    assert {alias: name for alias, name in ALIASES.items() if name in streams.DTYPES} == FLOAT_ALIASES
    assert list(GEMM_TYPES) == ["float32", "bfloat16", "float16"]
    # The GPU modules' ints: cublasGemmEx's Atype/Ctype, cuBLASLt's scale type, the bias's type.
    assert call.CUDA_R_32F == 0 and {BY_CUDA[v].name for v in (0, 2, 14)} == set(GEMM_TYPES)
    assert [GEMM_TYPES[n].cuda for n in GEMM_TYPES] == [0, 14, 2] and plan.BY_CUDA_NAME is BY_CUDA_NAME
    assert gpu._FORMATS == {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}
    with pytest.raises(TypeError, match="cannot compare float64 bit for bit: float32, bfloat16, float16 expected"):
        gpu.kernel_format(np.dtype("float64"))
    # The cuBLAS log's spellings (Atype=CUDA_R_32F ...) and the typed GEMMs' letters.
    assert replay._DTYPES == {"R_32F": "float32", "R_16BF": "bfloat16", "R_16F": "float16"}
    assert parse._TYPED == {"S": ("R_32F", "COMPUTE_32F"), "D": ("R_64F", "COMPUTE_64F"),
                            "H": ("R_16F", "COMPUTE_16F"), "C": ("C_32F", "COMPUTE_32F"),
                            "Z": ("C_64F", "COMPUTE_64F")}
    assert parse._GEMM.match("cublasZgemm") and not parse._GEMM.match("cublasQgemm")
    assert findings._HALF == {"R_16F", "R_16BF"} and replay._SCALE_TYPES == (None, "R_32F", "R_16F")
    # The short labels of the capture's table and of a lock's entries.
    assert {n: capture_report._label(n) for n in ("R_32F", "R_16BF", "R_16F", "R_64F", "C_32F", "C_64F", "X")} == {
        "R_32F": "fp32", "R_16BF": "bf16", "R_16F": "fp16", "R_64F": "fp64", "C_32F": "c64", "C_64F": "c128", "X": "X"}
    assert layouts.SAFETENSORS_DTYPES == {
        "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
        "I16": "int16", "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool"}
    assert {name: t.label for name, t in GEMM_TYPES.items()} == {"float32": "fp32", "bfloat16": "bf16",
                                                                 "float16": "fp16"}
    assert str(lt.GemmKey("bfloat16", "float32", "COMPUTE_32F", False, True, 8, 4)) == "Mx8x4:tn bf16->fp32"


def test_the_math_modes_keep_their_values_and_spellings():
    assert parse.MATH_MODES == LOG_MATH_MODES and MATH_MODE_FLAGS == 16
    assert MODE_CHOICES == ("pedantic", "default", "tf32", "bf16x9")
    assert pytest_plugin.ALL_MODES == ("PEDANTIC", "DEFAULT", "TF32")  # the benchmark's default modes
    # The CLI's and cublas_api.h's names of the modes and of the flag, in any case.
    for text, mode in {"pedantic": 2, "default": 0, "tf32": 3, "bf16x9": 4, "cublas_pedantic_math": 2,
                       "cublas_default_math": 0, "cublas_tf32_tensor_op_math": 3,
                       "cublas_fp32_emulated_bf16x9_math": 4}.items():
        for flag in ("disallow-rpr", "disallow_rpr", "disallow_reduced_precision_reduction",
                     "cublas_math_disallow_reduced_precision_reduction"):
            assert GemmConfig.parse(f"{text.upper()}+{flag}").math_mode_value == mode | 16
    with pytest.raises(ValueError, match=": not pedantic"):
        GemmConfig.parse("CUBLAS_TENSOR_OP_MATH")  # a log can show it; nothing here runs it
    # One spelling of a raw value, for handles read back and for captures alike.
    assert [math_mode_name(v) for v in (0, 1, 2, 3, 4, 18, 17, 7, None)] == [
        "DEFAULT", "TENSOR_OP", "PEDANTIC", "TF32", "FP32_EMULATED_BF16X9", "PEDANTIC+DISALLOW_RPR",
        "TENSOR_OP+DISALLOW_RPR", "7", "unknown"]
    assert math_mode_name(16, narrow=True) == "DEFAULT+DRPR"
    # The flag's narrow label is the vocabulary's (config.FLAG_NAME.label), not the capture table's own.
    assert [math_mode_name(v, narrow=True) for v in (18, 3, 7 | 16, None)] == [
        "PEDANTIC+DRPR", "TF32", "7+DRPR", "unknown"]
    assert math_mode_name(18, narrow=True) == "PEDANTIC+DRPR" and FLAG_NAME.label == "DRPR"
    assert '"DRPR"' not in inspect.getsource(capture_report)


def test_one_figure_for_cublas_s_recommended_workspace():
    # cuBLAS's docs (cublasSetWorkspace): 32 MiB on Hopper and later, 4 MiB before; one constant each.
    assert memory.WORKSPACE_BYTES == LT_WORKSPACE_BYTES == HOPPER_WORKSPACE_BYTES == 32 << 20
    assert findings.OTHER_WORKSPACE == 4 << 20


def _cures(monkeypatch, config):
    monkeypatch.setattr(prescribe, "pinned_algorithm", lambda shape, config: (("algo_id", 20), ("splitk", 66)))
    return [c for _, c in prescribe.candidates(parse_shape("128x56x4096:nt"), config, fleet=(66, 132))
            if isinstance(c, GemmConfig)]


def test_every_configuration_reads_back_from_its_name(monkeypatch):
    configs = [GemmConfig.parse(m) for m in (*DEFAULT_MODES, *HALF_DEFAULT_MODES, *MODE_CHOICES)]
    configs += [GemmConfig.parse(f"{m}+{lt}") for m in ("pedantic", "default", "tf32")
                for lt in ("lt", "lt-nosplitk", "lt-sm16", "lt-nosplitk-sm16")]
    configs += [c for _, presets in PRECISIONS.values() for c in presets]
    configs += [dataclasses.replace(cell, compute_type=compute) for base in list(configs)
                for cell, compute in matrix(base)]
    configs += [GemmConfig(algo=99, workspace_bytes=4 << 20), GemmConfig(workspace_bytes=1000),
                GemmConfig(api="lt", lt_reduction_scheme_mask=2, lt_epilogue="BIAS", input_dtype="bf16",
                           output_dtype="float32")]
    cures = [c for base in list(configs) if base.api == "gemm_ex" for c in _cures(monkeypatch, base)]
    pinned = [c for c in cures if c.lt_algo]
    assert pinned and len(cures) > len(pinned) + 10
    for config in configs + [c for c in cures if not c.lt_algo]:
        assert GemmConfig.parse(config.name) == config, config.name
    for config in pinned:  # a digest of the algorithm: what it pins is in the run file, not the name
        with pytest.raises(ValueError, match="pinned cuBLASLt algorithm is named by a digest"):
            GemmConfig.parse(config.name)


@pytest.mark.parametrize("name", [*ELEMENT_TYPES, *ALIASES, "float8", "F8_E4M3"])
def test_bench_and_diff_take_the_same_dtype_names(name, capsys):
    """One table: a name means one type in both; bench runs the GEMM types, diff compares any that is
    not complex, and each refuses the rest in one line."""
    element = ELEMENT_TYPES.get(ALIASES.get(name, name))
    refusal = "unknown" if element is None else "is not supported"
    try:
        in_diff = diff_cli.build_parser().parse_args(["a", "b", "--dtype", name]).dtype
    except SystemExit:
        in_diff = None
        assert refusal in capsys.readouterr().err
    bench_args = bench_cli.build_parser().parse_args(["--dtype", name])
    try:
        in_bench = {c.input_dtype for c in gemms_cli._configurations(bench_args)}
    except ValueError as err:
        in_bench = None
        assert refusal in str(err) and "--dtype" in str(err)
    assert in_diff == (element.name if element and element.comparable else None)
    assert in_bench == ({element.name} if element and element.gemm else None)


def test_a_timing_role_leaves_out_what_a_run_s_configurations_share():
    cases = {"DEFAULT/algo99/ws32M/bfloat16->bfloat16": "DEFAULT",
             "PEDANTIC+DISALLOW_RPR/ws1000": "PEDANTIC+DISALLOW_RPR",
             "TF32/COMPUTE_32F_PEDANTIC/algo-1": "TF32/COMPUTE_32F_PEDANTIC",
             "DEFAULT/lt-nosplitk": "DEFAULT/lt-nosplitk",
             "PEDANTIC/lt-pin20k66.3fa2c1-bias/bfloat16->float32": "PEDANTIC/lt-pin20k66.3fa2c1-bias"}
    assert {name: role(name) for name in cases} == cases
    assert all(GemmConfig.parse(name).role == shown for name, shown in cases.items() if "-pin" not in name)


def test_the_modes_matrix_runs_the_default_modes_of_the_benchmark():
    from cublas_det.bindings.cublas import MathMode
    from cublas_det.check.scenarios import modes

    assert modes.MODES == (MathMode.PEDANTIC, MathMode.DEFAULT, MathMode.TF32)
    assert modes.HALF_MODES == (MathMode.PEDANTIC, MathMode.DEFAULT)
