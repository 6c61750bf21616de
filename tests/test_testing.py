import pytest

from cublas_det._check import GemmCheck, ScenarioResult
from cublas_det.shapes import parse_shape
from cublas_det.testing import assert_gemm_reproducible, format_failure


def _check(*results):
    return GemmCheck(parse_shape("64x64x65536:nn"), 2, "env", 0, "ab" * 32, 3e-7, tuple(results))


def test_message_has_header_blank_line_then_the_facts():
    failing = ScenarioResult("streams-shared-handle", 64, 26, 812, 4096, 3.0517578125e-05, 2, (12, 40),
                             1.25, 1.2500305, detail="16 rounds x 4 streams on one handle")
    message = format_failure(_check(ScenarioResult("repeat", 20, 0), failing))
    lines = message.splitlines()
    assert lines[0] == ("GEMM 64x64x65536:nn is not bit-for-bit reproducible in PEDANTIC math "
                        "(streams-shared-handle).")
    assert lines[1] == ""
    assert lines[2] == "Scenario: streams-shared-handle (16 rounds x 4 streams on one handle)"
    assert "Runs differing from the first: 26 / 64" in lines
    assert "Mismatched elements: 812 / 4096 (19.8%) in the worst run" in lines
    assert ("Greatest absolute difference: 3.05e-05; greatest ULP distance: 2 at index (12, 40) "
            "(expected 1.25, got 1.2500305)") in lines
    assert lines[-1] == "Math mode: PEDANTIC (from env); seed 0; reference digest abababababababab"
    assert "repeat" not in message.split("\n", 1)[1].split("Math mode")[0].replace("Scenario: streams", "")


def test_scenario_that_could_not_run_is_a_failure_with_its_error():
    message = format_failure(_check(ScenarioResult("fresh-process", 0, 0, error="worker exited with code 1: boom")))
    assert "Scenario: fresh-process" in message and "Could not run: worker exited with code 1: boom" in message


def test_assert_passes_a_reproducible_check_through():
    check = _check(ScenarioResult("repeat", 20, 0), ScenarioResult("fresh-handle", 10, 0))
    assert assert_gemm_reproducible(check) is check
    with pytest.raises(AssertionError, match="not bit-for-bit reproducible"):
        assert_gemm_reproducible(_check(ScenarioResult("repeat", 20, 1, 1, 4096, 1e-7, 1, (0, 0), 1.0, 1.0000001)))


def test_gemm_check_json_round_trip_of_scenarios():
    result = ScenarioResult("repeat", 20, 1, 1, 4096, 1e-7, 1, (3, 4), 1.0, 1.0000001, "x", {"k": 1})
    data = result.to_dict()
    assert data["index"] == [3, 4] and data["identical"] is False and data["guaranteed"] is True
    assert ScenarioResult.from_dict(data) == result
    check = _check(result)
    as_dict = check.to_dict()
    assert as_dict["mode"] == "PEDANTIC" and as_dict["reproducible"] is False
    assert as_dict["shape"]["spec"] == "64x64x65536:nn"
    assert "NOT reproducible: repeat: 1/20 runs differ, up to 1 elements, 1 ULP at (3, 4)" in str(check)
