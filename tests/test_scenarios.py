"""The scenario registry and the scenarios' own logic, on the CPU."""

import dataclasses
import os

import pytest

from cublas_det.results.check import GemmCheck, Kind, Outcome
from cublas_det.check.scenarios import (
    REGISTRY,
    ScenarioContext,
    validate_scenarios,
    without_workers,
)
from cublas_det.check.scenarios.batch import BATCH_INVARIANCE
from cublas_det.check.scenarios.processes import (
    FRESH_PROCESS,
    WORKSPACE_CONFIG_SCENARIO,
)
from cublas_det.check.worker.protocol import Answer, Task, TaskAnswer
from cublas_det.core.config import GemmConfig
from cublas_det.check.explain import sm_targets
from cublas_det.prescribe import verification_targets
from cublas_det.core.shapes import batch_ladder, gemm_key, parse_shape, preset, sm_count_ladder


def test_every_scenario_has_one_sentence_a_kind_and_a_label():
    assert list(REGISTRY) == ["repeat", "fresh-handle", "fresh-process", "streams-shared-handle",
                              "streams-per-handle", "workspace-config", "batch-invariance", "sm-count", "modes"]
    kinds = {name: scenario.kind for name, scenario in REGISTRY.items()}
    assert [n for n, k in kinds.items() if k is Kind.HAZARD] == ["streams-shared-handle", "batch-invariance", "sm-count"]
    assert [n for n, k in kinds.items() if k is Kind.COMPARISON] == ["modes"]
    for scenario in REGISTRY.values():
        assert scenario.description and scenario.description.count(". ") == 0 and scenario.label
        assert (scenario.body is None) == scenario.in_worker


def test_validate_and_quick_come_from_the_registry():
    assert validate_scenarios("repeat") == ("repeat",)
    assert validate_scenarios(["modes", "repeat", "modes"]) == ("modes", "repeat")
    with pytest.raises(ValueError, match=r"unknown scenario 'again'; choose from repeat, fresh-handle"):
        validate_scenarios(["repeat", "again"])
    assert without_workers(list(REGISTRY)) == tuple(n for n in REGISTRY if n not in ("fresh-process",
                                                                                       "workspace-config"))


def test_batch_ladder_and_sm_targets():
    assert batch_ladder(4096) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4095]
    assert batch_ladder(5) == [1, 2, 4]
    assert batch_ladder(1) == []
    assert sm_count_ladder(132) == [66, 116]
    assert sm_count_ladder(1) == []


def test_one_sm_count_ladder_gives_each_old_ladder_exactly():
    def check_ladder(n):  # check/scenarios/sm_count.py's
        return sorted({max(1, n // 2), max(1, n - n // 8)} - {n})

    def prescribe_ladder(n, fleet):  # prescribe.verification_targets'
        return tuple(sorted({t for t in (16, 33, n // 2, n - n // 8, *fleet) if 0 < t < n}))

    def explain_ladder(n):  # explain.sm_targets'
        return sorted({max(1, t) for t in (n - n // 8, n // 2, n // 4, n // 8)} - {n}, reverse=True)

    for n in range(1, 400):
        assert sm_count_ladder(n) == check_ladder(n), n
        assert sm_targets(n) == explain_ladder(n), n
        for fleet in ((), (1,), (114, 132), (n,), (n + 5, 7), (0, 33, 16)):
            assert verification_targets(n, fleet) == prescribe_ladder(n, fleet), (n, fleet)


def _context(shape):
    return ScenarioContext(shape, GemmConfig(), None, None, None, None, None, 2, 0, None)


def test_batch_invariance_does_not_apply_where_the_batch_is_the_reduction_axis():
    for shape in preset("trunk") + preset("mamba2-130m"):
        result = BATCH_INVARIANCE.body(_context(shape)) if shape.gemm_pass == "dW" else None
        if result is not None:
            assert result.outcome is Outcome.NOT_APPLICABLE and result.kind is Kind.HAZARD
            assert "reduction axis" in result.not_applicable and not result.changed_bits
    assert BATCH_INVARIANCE.body(_context(parse_shape("1x64x64"))).not_applicable == "M = 1: no smaller batch"


def test_fresh_process_workers_inherit_this_environment_unchanged(monkeypatch):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    monkeypatch.setenv("CUBLAS_DET_TEST_MARKER", "kept")
    tasks = (Task(parse_shape("64x64x64"), GemmConfig()),)
    plan = FRESH_PROCESS.plan(0, tasks, 5)
    assert len(plan) == 2
    for request, env in plan.values():
        assert env == dict(os.environ) and request.scenarios == () and request.tasks == tasks
    ((request, env),) = WORKSPACE_CONFIG_SCENARIO.plan(0, tasks, 5).values()
    assert env == {**os.environ, "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}  # only that variable changes
    assert request.scenarios == ("streams-shared-handle",)


def _check(digest, error=None):
    shape = parse_shape("64x64x64")
    return GemmCheck(shape, GemmConfig(), "argument", 0, digest, 1e-7, (), error=error)


def _answers(*digests):
    key = gemm_key("64x64x64:nn", GemmConfig().name)
    return {f"fresh-process#{i}": (Answer({key: TaskAnswer(d, 1e-7)}), None) for i, d in enumerate(digests)}


def test_fresh_process_compares_digests_and_a_failure_here_stays_an_error():
    assert FRESH_PROCESS.merge(_check("aa"), _answers("aa", "aa")).identical
    differ = FRESH_PROCESS.merge(_check("aa"), _answers("aa", "bb"))
    assert differ.changed_bits and (differ.runs, differ.differing_runs) == (3, 1)
    failed_here = FRESH_PROCESS.merge(_check("", error="reference: OutOfMemoryError: out of memory"),
                                      _answers("aa", "aa"))
    assert failed_here.outcome is Outcome.ERROR and "computed no output" in failed_here.error
    assert "OutOfMemoryError" in failed_here.error and failed_here.differing_runs == 0
    crashed = dict(_answers("aa"))
    crashed["fresh-process#1"] = (None, "worker exited with code 1: boom")
    assert FRESH_PROCESS.merge(_check("aa"), crashed).outcome is Outcome.ERROR


def test_workspace_config_names_where_a_difference_lies():
    from cublas_det.check.scenarios.streams import STREAMS_SHARED_HANDLE

    key = gemm_key("64x64x64:nn", GemmConfig().name)
    inner = STREAMS_SHARED_HANDLE.from_worst(16, 0, detail="4 rounds x 4 streams on one handle")
    answers = {"workspace-config": (Answer({key: TaskAnswer("bb", 1e-7, (inner,))}), None)}
    result = WORKSPACE_CONFIG_SCENARIO.merge(_check("aa"), answers)
    assert result.kind is Kind.GUARANTEE and result.identical
    assert result.detail.endswith("the worker's first output differs from this process's bits")
    assert result.extra["reference_matches_this_process"] is False


def test_configurations_share_a_modes_matrix_only_when_it_is_the_same_matrix():
    from cublas_det.bindings.cublas import ComputeType, MathMode
    from cublas_det.check.scenarios.modes import matrix_key

    fp32 = GemmConfig()
    assert matrix_key(fp32) == matrix_key(GemmConfig(MathMode.TF32))  # the modes of one matrix
    assert matrix_key(fp32) != matrix_key(GemmConfig(MathMode.PEDANTIC, True))  # the flag is a row of it
    bf16 = GemmConfig(input_dtype="bfloat16", output_dtype="bfloat16")
    assert matrix_key(bf16) != matrix_key(fp32)
    assert matrix_key(bf16) != matrix_key(GemmConfig(input_dtype="bfloat16", output_dtype="float32"))
    assert matrix_key(bf16) == matrix_key(GemmConfig(MathMode.DEFAULT, True, ComputeType.COMPUTE_32F_PEDANTIC,
                                                     "bfloat16", "bfloat16"))


def test_a_mode_outside_the_matrix_gets_a_row_of_its_own_so_its_bits_are_compared():
    from cublas_det.bindings.cublas import MathMode
    from cublas_det.check.scenarios.modes import matrix

    bf16x9 = GemmConfig(MathMode.FP32_EMULATED_BF16X9)
    rows = {cell.name for cell, _ in matrix(bf16x9)}
    assert rows == {"PEDANTIC", "DEFAULT", "TF32", "FP32_EMULATED_BF16X9"}
    assert {cell.name for cell, _ in matrix(GemmConfig())} == {"PEDANTIC", "DEFAULT", "TF32"}  # as before
    # In a run with BF16X9, every configuration has it as a row: one matrix, the same answer on every row.
    from cublas_det.check.scenarios.modes import matrix_key

    run = (GemmConfig(), GemmConfig(MathMode.TF32), bf16x9)
    assert {cell.name for cell, _ in matrix(GemmConfig(), run)} == rows
    assert matrix_key(GemmConfig(), run) == matrix_key(bf16x9, run) == matrix_key(GemmConfig(MathMode.TF32), run)


def test_cublaslt_and_cublasgemmex_configurations_of_a_run_share_one_matrix():
    from cublas_det.bindings.cublas import MathMode
    from cublas_det.check.scenarios.modes import matrix, matrix_key
    gemm_ex, lt, nosplitk = (GemmConfig.parse(m) for m in ("pedantic", "pedantic+lt", "default+lt-nosplitk"))
    run = (gemm_ex, lt, nosplitk)
    rows = [cell.name for cell, _ in matrix(gemm_ex, run)]
    assert list(dict.fromkeys(rows)) == ["PEDANTIC", "DEFAULT", "TF32", "DEFAULT/lt", "TF32/lt", "PEDANTIC/lt",
                                         "DEFAULT/lt-nosplitk", "TF32/lt-nosplitk"]  # PEDANTIC is DEFAULT in Lt
    assert matrix_key(gemm_ex, run) == matrix_key(lt, run) == matrix_key(nosplitk, run)
    assert {cell.name for cell, _ in matrix(gemm_ex)} == {"PEDANTIC", "DEFAULT", "TF32"}  # alone: as before
    assert {cell.name for cell, _ in matrix(lt)} >= {"PEDANTIC", "PEDANTIC/lt"}  # alone, still against GemmEx
    half = dataclasses.replace(lt, input_dtype="bfloat16", output_dtype="bfloat16")
    assert matrix_key(half, run) != matrix_key(lt, run)  # other element types: never compared
    assert all(cell.api == "lt" for cell, _ in matrix(half, run) if cell.name.startswith("PEDANTIC/lt"))
    bias = GemmConfig(MathMode.DEFAULT, api="lt", lt_epilogue="BIAS")
    assert {cell.api for cell, _ in matrix(bias, run)} == {"lt"}  # it adds a bias: compared with itself only
    assert bias.name not in {cell.name for cell, _ in matrix(gemm_ex, (*run, bias))}
    # The modes of a run's other element types are no rows here (TF32 has no bf16 form).
    assert {cell.math_mode for cell, _ in matrix(half, (half, GemmConfig(MathMode.TF32)))} == {
        MathMode.PEDANTIC, MathMode.DEFAULT}


def test_same_bits_as_is_read_from_the_configurations_own_comparison():
    from cublas_det.bindings.cublas import ComputeType, MathMode
    from cublas_det.results.check import ScenarioResult
    from cublas_det.render.text import modes_cell
    from cublas_det.results.check import modes_group

    half = GemmConfig(MathMode.PEDANTIC, False, ComputeType.COMPUTE_32F_PEDANTIC, "bfloat16", "bfloat16")
    groups = [["PEDANTIC/bfloat16->bfloat16", "DEFAULT/bfloat16->bfloat16"]]  # COMPUTE_32F cells only

    def check(extra):
        modes = ScenarioResult("modes", Kind.COMPARISON, 2, 0, extra=extra)
        return GemmCheck(parse_shape("64x64x65536:nn"), half, "argument", 0, "ab" * 32, 1e-3, (modes,))

    # Its name is in no group of modes; what it was compared with decides, not "none".
    assert modes_group(check({"groups": groups, "same_bits_as": ["PEDANTIC/bfloat16->bfloat16"]})) == [
        "PEDANTIC/bfloat16->bfloat16"]
    assert modes_cell(check({"groups": groups, "same_bits_as": []})) == "none"
    assert modes_group(check({"groups": [["PEDANTIC/COMPUTE_32F_PEDANTIC/bfloat16->bfloat16", "X"]]})) == ["X"]


def test_a_task_carries_its_whole_shape_to_the_worker():
    from cublas_det.check.worker.protocol import Request

    dw = next(s for s in preset("trunk") if s.gemm_pass == "dW")
    request = Request(0, (Task(dw, GemmConfig(), 3),), ("batch-invariance",), 5)
    (task,) = Request.from_dict(request.to_dict()).tasks
    assert task.shape == dw and task.shape.gemm_pass == "dW" and task.seed == 3  # so the worker knows K is T


def test_worst_of_counts_the_elements_of_the_comparison_they_describe():
    from cublas_det.bits.compare import Mismatch
    from cublas_det.check.scenarios.base import NO_MISMATCH, worst_of

    far = Mismatch(1, 100, 0.5, 9, (0, 3), 1.0, 1.5)  # one element, 9 ULP away
    many = Mismatch(50, 200, 2.0, 1, (1, 0), 4.0, 6.0)  # fifty elements of another size, 1 ULP each
    worst = worst_of([Mismatch(0, 100, 0.0, 0, None), far, many])
    # "up to 50 elements" (of that run's 200), the greatest ULP where it is, the greatest difference of all
    assert (worst.mismatched_elements, worst.total_elements) == (50, 200)
    assert (worst.max_ulp, worst.index, worst.reference_value, worst.actual_value) == (9, (0, 3), 1.0, 1.5)
    assert worst.max_abs_diff == 2.0
    assert worst_of([Mismatch(0, 100, 0.0, 0, None)]) is NO_MISMATCH


def test_worst_of_ranks_a_nan_only_comparison_below_every_number():
    from cublas_det.bits.compare import Mismatch
    from cublas_det.check.scenarios.base import worst_of

    nan_only = Mismatch(4, 100, None, None, (0, 0), 1.0, float("nan"), nan_mismatches=4)
    zero = Mismatch(1, 100, 0.0, 0, (2, 2), 0.0, -0.0, signed_zero_mismatches=1)
    worst = worst_of([nan_only, zero])
    assert (worst.max_ulp, worst.index, worst.max_abs_diff) == (0, (2, 2), 0.0)  # the signed zero: 0 ULP > NaN
    assert (worst.mismatched_elements, worst.nan_mismatches, worst.signed_zero_mismatches) == (4, 4, 0)  # the most
    alone = worst_of([nan_only])
    assert alone.max_ulp is None and alone.max_abs_diff is None and alone.index == (0, 0)
