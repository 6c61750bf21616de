import pytest

from cublas_det.results.check import GemmCheck, Kind, ScenarioResult
from cublas_det.core.config import GemmConfig
from cublas_det.core.shapes import parse_shape
from cublas_det.testing import assert_gemm_reproducible, format_failure

G, H, C = Kind.GUARANTEE, Kind.HAZARD, Kind.COMPARISON


def _check(*results):
    return GemmCheck(parse_shape("64x64x65536:nn"), GemmConfig(), "env", 0, "ab" * 32, 3e-7, tuple(results))


def test_message_has_header_blank_line_then_the_facts():
    failing = ScenarioResult("streams-per-handle", G, 64, 26, 812, 4096, 3.0517578125e-05, 2, (12, 40),
                             1.25, 1.2500305, detail="16 rounds x 4 streams, one handle each")
    message = format_failure(_check(ScenarioResult("repeat", G, 20, 0), failing))
    lines = message.splitlines()
    assert lines[0] == ("GEMM 64x64x65536:nn is not bit-for-bit reproducible in PEDANTIC math "
                        "(streams-per-handle).")
    assert lines[1] == ""
    assert lines[2] == "Scenario: streams-per-handle (guarantee): 16 rounds x 4 streams, one handle each"
    assert "Runs differing from the first: 26 / 64" in lines
    assert "Mismatched elements: 812 / 4096 (19.8%) in the worst run" in lines
    assert ("Greatest absolute difference: 3.05e-05; greatest ULP distance: 2 at index (12, 40) "
            "(expected 1.25, got 1.2500305)") in lines
    assert lines[-1] == "Math mode: PEDANTIC (from env); seed 0; reference digest abababababababab"
    assert "Scenario: repeat" not in message


def test_message_of_nan_pairs_says_their_count_and_no_distance():
    only_nan = ScenarioResult("repeat", G, 20, 1, 2, 4096, None, None, (0, 5), 1.0, float("nan"), nan_mismatches=2)
    lines = format_failure(_check(only_nan)).splitlines()
    assert ("Greatest absolute difference: none; greatest ULP distance: none at index (0, 5) (expected 1.0, got nan); "
            "2 with NaN (no ULP distance)") in lines


def test_scenario_that_could_not_run_is_a_failure_with_its_error():
    check = _check(ScenarioResult("repeat", G, 20, 0),
                   ScenarioResult("fresh-process", G, 0, 0, error="worker exited with code 1: boom"))
    message = format_failure(check)
    assert message.startswith("GEMM 64x64x65536:nn could not be fully checked in PEDANTIC math (fresh-process could")
    assert "Scenario: fresh-process" in message and "Could not run: worker exited with code 1: boom" in message
    with pytest.raises(AssertionError, match="could not be fully checked"):
        assert_gemm_reproducible(check)


def test_assert_passes_a_reproducible_check_through():
    check = _check(ScenarioResult("repeat", G, 20, 0), ScenarioResult("fresh-handle", G, 10, 0))
    assert assert_gemm_reproducible(check) is check
    with pytest.raises(AssertionError, match="not bit-for-bit reproducible"):
        assert_gemm_reproducible(_check(ScenarioResult("repeat", G, 20, 1, 1, 4096, 1e-7, 1, (0, 0), 1.0, 1.0000001)))


def test_modes_and_hazards_do_not_fail_the_assertion_unless_asked():
    hazard = ScenarioResult("batch-invariance", H, 13, 13, 10, 4096, 1e-6, 4, (0, 3), 1.0, 1.0000004)
    check = _check(ScenarioResult("repeat", G, 20, 0), ScenarioResult("modes", C, 2, 1), hazard)
    assert assert_gemm_reproducible(check) is check  # the modes scenario compares, it does not judge
    with pytest.raises(AssertionError) as info:
        assert_gemm_reproducible(check, fail_on_hazards=True)
    lines = str(info.value).splitlines()
    assert lines[0] == ("GEMM 64x64x65536:nn changed bits under hazard scenarios in PEDANTIC math "
                        "(batch-invariance), and fail_on_hazards=True.")
    assert "Scenario: batch-invariance (hazard)" in lines[2]


def test_nothing_checked_is_never_passed_as_reproducible():
    only_hazard = _check(ScenarioResult("sm-count", H, 2, 0))
    with pytest.raises(AssertionError, match="no guarantee scenario was checked .*scenarios: sm-count"):
        assert_gemm_reproducible(only_hazard)
    assert assert_gemm_reproducible(only_hazard, fail_on_hazards=True) is only_hazard
