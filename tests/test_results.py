"""The verdict vocabulary: reproducible is judged on guarantees only; hazards are findings; modes compare."""

import dataclasses
import json
import math

import numpy as np

from cublas_det.bits.compare import Mismatch, compare
from cublas_det.bits.streams import compare_arrays
from cublas_det.results.check import GemmCheck, Kind, Outcome, Reproducible, ScenarioResult
from cublas_det.core.config import GemmConfig
from cublas_det.results.bench import BenchResult, ShapeReport
from cublas_det.check.stored import bench_result
from cublas_det.core.shapes import parse_shape
from cublas_det.store.run import run_from_dict

from .conftest import bench_json

G, H, C = Kind.GUARANTEE, Kind.HAZARD, Kind.COMPARISON


def _check(*results, digest="ab" * 32, error=None):
    return GemmCheck(parse_shape("64x64x65536:nn"), GemmConfig(), "env", 0, digest, 3e-7, tuple(results), error=error)


def _stored(check):
    """``check``'s run-file entry (``extra_info``) and the check read back from it."""
    result = BenchResult((ShapeReport(check.shape, {check.mode_name: check}),), {}, "2026-12-01T00:00:00+00:00",
                         1.0, "0.2.0", seed=check.seed)
    data = json.loads(json.dumps(bench_json(result)))
    return data["benchmarks"][0]["extra_info"], bench_result(run_from_dict(data, "run.json")).shapes[0].checks[
        check.mode_name]


def test_hazards_and_modes_never_make_a_gemm_not_reproducible():
    check = _check(ScenarioResult("repeat", G, 20, 0), ScenarioResult("modes", C, 2, 1),
                   ScenarioResult("batch-invariance", H, 13, 13, 5, 100, 1e-6, 3, (0, 1), 1.0, 1.0000002),
                   ScenarioResult("sm-count", H, 2, 0))
    assert check.verdict is Reproducible.YES and check.reproducible
    assert [r.scenario for r in check.findings] == ["batch-invariance"] and check.guarantee_failures == ()
    assert str(check).startswith("64x64x65536:nn PEDANTIC: reproducible: yes; bits changed under the hazards "
                                 "batch-invariance")


def test_a_guarantee_that_differs_is_no_one_that_errs_is_error_none_is_not_checked():
    differing = ScenarioResult("fresh-handle", G, 10, 1, 1, 4096, 1e-7, 1, (0, 0), 1.0, 1.0000001)
    assert _check(ScenarioResult("repeat", G, 20, 0), differing).verdict is Reproducible.NO
    erred = ScenarioResult("fresh-process", G, 0, 0, error="worker exited with code 1")
    assert _check(ScenarioResult("repeat", G, 20, 0), erred).verdict is Reproducible.ERROR
    assert _check(differing, erred).verdict is Reproducible.NO  # other bits outrank a failure to run
    assert _check(ScenarioResult("sm-count", H, 2, 2)).verdict is Reproducible.NOT_CHECKED
    assert _check().verdict is Reproducible.NOT_CHECKED
    assert _check(ScenarioResult("repeat", G, 0, 0, error="no output to check: reference: boom"), digest="",
                  error="reference: boom").verdict is Reproducible.ERROR


def test_outcomes():
    assert ScenarioResult("repeat", G, 20, 0).outcome is Outcome.IDENTICAL
    assert ScenarioResult("repeat", G, 20, 2).outcome is Outcome.DIFFER
    assert ScenarioResult("repeat", G, 0, 0, error="x").outcome is Outcome.ERROR
    skipped = ScenarioResult("batch-invariance", H, 0, 0, not_applicable="the batch (T) is K")
    assert skipped.outcome is Outcome.NOT_APPLICABLE and not skipped.identical and not skipped.changed_bits
    assert str(skipped) == "batch-invariance: not applicable: the batch (T) is K"


def test_json_round_trips_of_results_and_checks():
    result = ScenarioResult("repeat", G, 20, 1, 1, 4096, 1e-7, 1, (3, 4), 1.0, 1.0000001, "x", {"k": 1})
    data = result.to_dict()
    assert data["index"] == [3, 4] and data["kind"] == "guarantee" and data["outcome"] == "bits differ"
    assert ScenarioResult.from_dict(data) == result
    check = _check(result, ScenarioResult("sm-count", H, 2, 1))
    as_dict, back = _stored(check)
    assert as_dict["config"]["name"] == "PEDANTIC" and as_dict["reproducible"] == "NO"
    assert as_dict["findings"] == ["sm-count"]
    assert as_dict["shape"]["spec"] == "64x64x65536:nn" and as_dict["config"]["math_mode"] == "PEDANTIC"
    assert back == check
    _, failed = _stored(_check(ScenarioResult("repeat", G, 0, 0, error="not run"), digest="",
                               error="operands: OutOfMemoryError"))
    assert failed.error == "operands: OutOfMemoryError" and math.isclose(failed.rel_error, 3e-7)


def test_a_check_keeps_its_public_to_dict_with_the_values_its_run_file_entry_stores():
    check = _check(ScenarioResult("repeat", G, 20, 1, 1, 4096, 1e-7, 1, (3, 4), 1.0, 1.0000001, "x", {"k": 1}),
                   ScenarioResult("sm-count", H, 2, 1))
    data = json.loads(json.dumps(check.to_dict()))
    stored, _ = _stored(check)
    for key in ("config", "mode_source", "digest", "rel_error", "reproducible", "findings", "scenarios"):
        assert data[key] == stored[key], key
    assert data["shape"] == stored["shape"] and data["mode"] == "PEDANTIC" and data["seed"] == 0


def test_a_result_carries_its_worst_mismatch_field_for_field():
    worst = Mismatch(3, 100, 1e-6, 2, (0, 1), 1.0, 1.0000001)
    result = ScenarioResult.from_worst("sm-count", H, 2, 1, worst, "66 SMs", {"a": 1})
    assert Mismatch(**{f.name: getattr(result, f.name) for f in dataclasses.fields(Mismatch)}) == worst
    assert (result.detail, result.extra, result.runs, result.differing_runs) == ("66 SMs", {"a": 1}, 2, 1)


def test_a_nan_only_result_is_said_and_stored_with_its_counts():
    """No ULP distance (null in the run file), the NaN pairs counted; the counts read back."""
    worst = Mismatch(2, 4096, None, None, (0, 5), 1.0, float("nan"), nan_mismatches=2)
    result = ScenarioResult.from_worst("repeat", G, 20, 1, worst)
    assert str(result) == "repeat: 1/20 runs differ, up to 2 elements (2 with NaN), NaN only at (0, 5)"
    data = result.to_dict()
    assert (data["max_ulp"], data["max_abs_diff"], data["nan_mismatches"], data["signed_zero_mismatches"]) == \
        (None, None, 2, 0)
    zero = ScenarioResult.from_worst("fresh-handle", G, 10, 1, Mismatch(1, 4096, 0.0, 0, (1, 1), 0.0, -0.0,
                                                                        signed_zero_mismatches=1))
    stored, back = _stored(_check(result, zero))
    assert [s["nan_mismatches"] for s in stored["scenarios"]] == [2, 0] and stored["scenarios"][0]["max_ulp"] is None
    assert back.scenario("repeat").nan_mismatches == 2 and back.scenario("fresh-handle").signed_zero_mismatches == 1
    assert str(back.scenario("fresh-handle")) == "fresh-handle: 1/10 runs differ, up to 1 elements, 0 ULP at (1, 1)"


def test_an_identical_result_stores_0_ulp_and_0_difference_as_stored_runs_do():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for found in (compare(a, a.copy()), compare_arrays(a, a.copy(), "float32")):
        assert (found.identical, found.max_ulp, found.max_abs_diff, found.index) == (True, 0, 0.0, None)
    stored = ScenarioResult.from_worst("repeat", G, 5, 0, compare(a, a.copy())).to_dict()
    assert (stored["max_ulp"], stored["max_abs_diff"]) == (0, 0.0)  # as a 0.2.0 run file holds them
    only_nan = compare(np.array([np.nan], np.float32), np.array([-np.nan], np.float32))
    assert (only_nan.max_ulp, only_nan.max_abs_diff, only_nan.nan_mismatches) == (None, None, 1)
