"""The GEMM configuration: parsing from arguments, the env var and the CLI, names, JSON both ways."""

import pytest

from cublas_det import ComputeType, GemmConfig, MathMode
from cublas_det.bindings.cublas import HALF_SCALAR_COMPUTE
from cublas_det.core.config import ModeSource, math_mode_name, resolve_config


@pytest.mark.parametrize("text, expected", [
    ("pedantic", MathMode.PEDANTIC), ("PEDANTIC", MathMode.PEDANTIC), (" Tf32 ", MathMode.TF32),
    ("default", MathMode.DEFAULT), ("CUBLAS_PEDANTIC_MATH", MathMode.PEDANTIC),
    ("cublas_default_math", MathMode.DEFAULT), ("CUBLAS_TF32_TENSOR_OP_MATH", MathMode.TF32),
])
def test_parse_math_mode_names(text, expected):
    assert GemmConfig.parse(text).math_mode is expected
    assert GemmConfig.parse(text) == GemmConfig(expected)


@pytest.mark.parametrize("text", ["fast", "1", "", "pedantic2", "CUBLAS_TENSOR_OP_MATH", "pedantic+fast",
                                  "pedantic+disallow-rpr+disallow-rpr"])
def test_parse_rejects_with_the_choices(text):
    with pytest.raises(ValueError) as info:
        GemmConfig.parse(text, source="CUBLAS_DET_MATH_MODE")
    message = str(info.value)
    assert f"CUBLAS_DET_MATH_MODE={text!r}" in message
    assert "pedantic, default, tf32" in message and "+disallow-rpr" in message


def test_a_bad_mode_names_every_mode_parse_takes_and_fits_a_line():
    from cublas_det.core.config import FLAG_NAME, MODE_CHOICES

    with pytest.raises(ValueError) as info:
        GemmConfig.parse("fast", source="--modes")
    message = str(info.value)
    named = message.split(": not ", 1)[1]
    for mode in MODE_CHOICES:
        assert mode in named
        GemmConfig.parse(mode)  # each mode named is one parse takes
    assert f"+{FLAG_NAME.choice}" in named and "+lt" in named
    assert GemmConfig.parse(f"default+{FLAG_NAME.choice}").disallow_reduced_precision_reduction
    assert GemmConfig.parse("default+lt").api == "lt"
    assert len("cublas-det bench: error: " + message) <= 100


def test_the_flag_is_part_of_the_configuration():
    config = GemmConfig.parse("Pedantic+DISALLOW-RPR")
    assert config == GemmConfig(MathMode.PEDANTIC, disallow_reduced_precision_reduction=True)
    assert config.math_mode_value == 18 and config.name == "PEDANTIC+DISALLOW_RPR"
    assert GemmConfig.from_math_mode_value(18) == config
    assert math_mode_name(18) == "PEDANTIC+DISALLOW_RPR" and math_mode_name(3) == "TF32"


def test_names_keep_the_plain_mode_names_of_earlier_json():
    assert [GemmConfig(m).name for m in (MathMode.PEDANTIC, MathMode.DEFAULT, MathMode.TF32)] == [
        "PEDANTIC", "DEFAULT", "TF32"]
    assert GemmConfig(MathMode.TF32, compute_type=ComputeType.COMPUTE_32F_PEDANTIC).name == "TF32/COMPUTE_32F_PEDANTIC"


def test_json_round_trip():
    for config in (GemmConfig(), GemmConfig(MathMode.TF32, True, ComputeType.COMPUTE_32F_FAST_TF32)):
        data = config.to_dict()
        assert data["name"] == config.name and data["math_mode_value"] == config.math_mode_value
        assert GemmConfig.from_dict(data) == config


def test_invalid_combinations_name_the_combination():
    with pytest.raises(ValueError, match="compute type COMPUTE_64F does not take float32 inputs with a float32 "
                                         "output; choose COMPUTE_32F"):
        GemmConfig(compute_type=ComputeType.COMPUTE_64F)
    with pytest.raises(ValueError, match="input dtype 'int8' is not supported; choose float32, bfloat16, float16"):
        GemmConfig(input_dtype="int8")
    with pytest.raises(ValueError, match="compute type COMPUTE_16F does not take bfloat16 inputs with a bfloat16"):
        GemmConfig(compute_type=ComputeType.COMPUTE_16F, input_dtype="bf16", output_dtype="bf16")
    with pytest.raises(ValueError, match="float16 inputs with a bfloat16 output are not supported; choose float16, "
                                         "float32"):
        GemmConfig(input_dtype="float16", output_dtype="bfloat16")
    with pytest.raises(ValueError, match="TF32 math applies to float32 inputs, not bfloat16"):
        GemmConfig(MathMode.TF32, input_dtype="bfloat16", output_dtype="bfloat16")
    with pytest.raises(ValueError, match="a flag, not a math mode"):
        GemmConfig(MathMode.DISALLOW_REDUCED_PRECISION_REDUCTION)
    with pytest.raises(ValueError, match="GemmConfig: 7 is not a valid MathMode"):
        GemmConfig(7)


def test_precedence_argument_over_env_over_default(monkeypatch):
    monkeypatch.delenv("CUBLAS_DET_MATH_MODE", raising=False)
    assert resolve_config(None) == (GemmConfig(MathMode.PEDANTIC), ModeSource.DEFAULT)
    monkeypatch.setenv("CUBLAS_DET_MATH_MODE", "tf32+disallow-rpr")
    assert resolve_config(None) == (GemmConfig(MathMode.TF32, True), ModeSource.ENV)
    assert resolve_config("default") == (GemmConfig(MathMode.DEFAULT), ModeSource.ARGUMENT)
    assert resolve_config(MathMode.PEDANTIC) == (GemmConfig(), ModeSource.ARGUMENT)
    config = GemmConfig(MathMode.TF32)
    assert resolve_config(config)[0] is config
    monkeypatch.setenv("CUBLAS_DET_MATH_MODE", "")
    assert resolve_config(None) == (GemmConfig(), ModeSource.DEFAULT)


def test_env_is_read_at_call_time_and_a_bad_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("CUBLAS_DET_MATH_MODE", "default")
    assert resolve_config(None)[0].math_mode is MathMode.DEFAULT
    monkeypatch.setenv("CUBLAS_DET_MATH_MODE", "turbo")
    with pytest.raises(ValueError, match=r"CUBLAS_DET_MATH_MODE='turbo'.*pedantic, default, tf32"):
        resolve_config(None)


def test_bad_ints_and_types_are_rejected():
    assert resolve_config(MathMode.PEDANTIC | MathMode.DISALLOW_REDUCED_PRECISION_REDUCTION)[0].math_mode_value == 18
    assert resolve_config(4)[0].math_mode is MathMode.FP32_EMULATED_BF16X9
    for bad in (1, 5, 7, 256):
        with pytest.raises(ValueError, match="not a supported math mode"):
            resolve_config(bad)
    with pytest.raises(TypeError, match="GemmConfig, MathMode, int or str"):
        resolve_config(2.0)
    with pytest.raises(TypeError):
        resolve_config(True)


def test_half_precision_configurations_are_rows_of_the_tables():
    amp = GemmConfig(MathMode.PEDANTIC, input_dtype="bf16", output_dtype="bfloat16")
    assert (amp.input_dtype, amp.output_dtype, amp.a_type.itemsize) == ("bfloat16", "bfloat16", 2)
    assert amp.name == "PEDANTIC/bfloat16->bfloat16" and GemmConfig.from_dict(amp.to_dict()) == amp
    half = GemmConfig(compute_type=ComputeType.COMPUTE_16F, input_dtype="float16", output_dtype="float16")
    assert half.compute_type in HALF_SCALAR_COMPUTE and amp.compute_type not in HALF_SCALAR_COMPUTE
    assert half.c_type.cuda == 2 and amp.a_type.cuda == 14
    assert GemmConfig.parse("bf16x9").math_mode is MathMode.FP32_EMULATED_BF16X9
