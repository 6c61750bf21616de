"""Prescribing on the CPU: the hazards come from the registry, and planning and judging cures run on
checks made here (the GPU's part, checking and timing, is in test_lt.py)."""

import dataclasses
import types

import cublas_det.prescribe as prescribe
from cublas_det.results.check import GemmCheck, Kind, ScenarioResult
from cublas_det.check.scenarios import HAZARDS, REGISTRY
from cublas_det.core.config import GemmConfig
from cublas_det.lock.file import GemmKey
from cublas_det.prescribe import (
    BASE_SCENARIOS,
    VERIFY_SCENARIOS,
    plan_cures,
    problems_of,
    verify_cures,
)
from cublas_det.core.shapes import parse_shape
from cublas_det.results.stats import Ratio

G, H = Kind.GUARANTEE, Kind.HAZARD
SHAPE = parse_shape("128x56x4096:nt")
PINNED = GemmConfig(api="lt", lt_algo={"algo_id": 20})
NO_SPLIT = GemmConfig(api="lt", lt_reduction_scheme_mask=0)
PLANNED = GemmConfig(api="lt", lt_sm_count_target=66)


def _check(config, *results, digest="ab" * 32):
    return GemmCheck(SHAPE, config, "env", 0, digest, 3e-7, tuple(results))


def _candidates(shape, config, fleet):
    return [("pin the cuBLASLt algorithm", PINNED), ("cuBLASLt without split-K", NO_SPLIT),
            ("cuBLASLt planning for 66 SMs", PLANNED), ("BF16X9 math", "no BF16X9 here")]


def test_every_hazard_of_the_registry_is_prescribed_and_declares_its_evidence():
    assert set(HAZARDS) == {name for name, s in REGISTRY.items() if s.kind is Kind.HAZARD}
    assert all(REGISTRY[h].evidence for h in HAZARDS)
    assert VERIFY_SCENARIOS == ("repeat", "sm-count", "streams-shared-handle", "batch-invariance")
    assert BASE_SCENARIOS == ("repeat", "streams-per-handle", "workspace-config", *VERIFY_SCENARIOS[1:])
    for hazard in HAZARDS:
        for scenario, label in REGISTRY[hazard].setup_cures:
            assert REGISTRY[scenario].kind is G and label


def test_a_plan_tries_each_cure_once_per_configuration_and_keeps_those_it_cannot_make():
    base = GemmConfig()
    check = _check(base, ScenarioResult("repeat", G, 5, 0), ScenarioResult("sm-count", H, 2, 1, detail="66 SMs"),
                   ScenarioResult("batch-invariance", H, 3, 0), ScenarioResult("streams-shared-handle", H, 16, 2))
    plan = plan_cures(SHAPE, [check], candidates_of=_candidates)
    assert [h for _, h in plan.hazardous] == ["sm-count", "streams-shared-handle"]
    assert plan.cure_configs == [PINNED, NO_SPLIT, PLANNED]
    assert [c.evidence for c in plan.impossible[base.name]] == ["no BF16X9 here"]
    assert not plan_cures(SHAPE, [_check(base, ScenarioResult("sm-count", H, 2, 0))], candidates_of=_candidates).hazardous


def test_cures_are_judged_by_their_own_checks_and_the_setup_cures_by_the_configurations():
    base = GemmConfig()
    check = _check(base, ScenarioResult("repeat", G, 5, 0), ScenarioResult("sm-count", H, 2, 1, detail="66 SMs"),
                   ScenarioResult("streams-shared-handle", H, 16, 2),
                   ScenarioResult("streams-per-handle", G, 16, 0), ScenarioResult("workspace-config", G, 16, 3,
                                                                                  detail="3 runs differ"))
    plan = plan_cures(SHAPE, [check], candidates_of=_candidates)
    same = (ScenarioResult("sm-count", H, 2, 0), ScenarioResult("streams-shared-handle", H, 16, 0))
    verified = {
        PINNED.name: _check(PINNED, ScenarioResult("repeat", G, 5, 0), *same),
        NO_SPLIT.name: _check(NO_SPLIT, ScenarioResult("repeat", G, 5, 0), ScenarioResult("sm-count", H, 2, 0),
                              ScenarioResult("streams-shared-handle", H, 16, 1, detail="1 of 16 runs differs"),
                              ScenarioResult("batch-invariance", H, 3, 1), digest="cd" * 32),
        PLANNED.name: _check(PLANNED, ScenarioResult("repeat", G, 5, 1), *same),
    }
    found = {p.hazard: p for p in verify_cures(plan, verified, (16, 66))}
    assert list(found) == ["sm-count", "streams-shared-handle"]
    sm = {c.label: c for c in found["sm-count"].cures}
    assert sm["pin the cuBLASLt algorithm"].verified and sm["pin the cuBLASLt algorithm"].keeps_bits
    assert sm["pin the cuBLASLt algorithm"].evidence == "same bits under SM-count targets 16, 66 and the full count"
    split = sm["cuBLASLt without split-K"]
    assert split.verified and not split.keeps_bits and split.introduces == ("batch-invariance",)
    assert split.evidence.endswith("; brings in: batch size")
    planned = sm["cuBLASLt planning for 66 SMs"]
    assert planned.untested and not planned.verified and "at least 66 SMs by construction" in planned.evidence
    assert not sm["BF16X9 math"].verified and sm["BF16X9 math"].config is None
    assert found["sm-count"].best.label == "pin the cuBLASLt algorithm"
    shared = {c.label: c for c in found["streams-shared-handle"].cures}
    assert shared["pin the cuBLASLt algorithm"].evidence == "same bits in 16 runs on 4 streams of one handle"
    assert shared["cuBLASLt without split-K"].evidence == "bits change: 1 of 16 runs differs; brings in: batch size"
    assert shared["cuBLASLt planning for 66 SMs"].evidence == (
        "same bits in 16 runs on 4 streams of one handle; yet its own bits did not repeat (NO)")
    assert shared["a handle and workspace per stream"].verified
    assert shared["a handle and workspace per stream"].evidence == "same bits in 16 runs"
    assert not shared["CUBLAS_WORKSPACE_CONFIG=:4096:8"].verified
    assert shared["CUBLAS_WORKSPACE_CONFIG=:4096:8"].evidence == "3 runs differ"
    assert "a handle and workspace per stream" not in {c.label for c in found["sm-count"].cures}


def test_a_cure_whose_check_could_not_run_or_does_not_apply_says_so():
    base = GemmConfig()
    check = _check(base, ScenarioResult("repeat", G, 5, 0), ScenarioResult("batch-invariance", H, 3, 1))
    plan = plan_cures(SHAPE, [check], candidates_of=lambda *_: [("a", PINNED), ("b", NO_SPLIT)])
    verified = {PINNED.name: _check(PINNED, ScenarioResult("batch-invariance", H, 0, 0, error="out of memory")),
                NO_SPLIT.name: _check(NO_SPLIT, ScenarioResult("batch-invariance", H, 0, 0, not_applicable="M = 1"))}
    (found,) = verify_cures(plan, verified, ())
    assert [c.evidence for c in found.cures] == ["could not run: out of memory", "does not apply: M = 1"]
    assert found.best is None


def test_a_new_hazard_without_evidence_is_prescribed_all_the_same(monkeypatch):
    new = dataclasses.replace(REGISTRY["batch-invariance"], name="new-hazard", evidence=None)
    monkeypatch.setitem(REGISTRY, "new-hazard", new)
    monkeypatch.setattr(prescribe, "HAZARDS", HAZARDS + ("new-hazard",))
    check = _check(GemmConfig(), ScenarioResult("new-hazard", H, 3, 1))
    plan = prescribe.plan_cures(SHAPE, [check], candidates_of=lambda *_: [("a", PINNED)])
    (found,) = verify_cures(plan, {PINNED.name: _check(PINNED, ScenarioResult("repeat", G, 5, 0),
                                                       ScenarioResult("new-hazard", H, 3, 0))}, ())
    assert found.hazard == "new-hazard" and found.cures[0].verified and found.cures[0].evidence == "same bits"


def test_problems_are_the_configurations_own_errors_and_failed_guarantees():
    failed = _check(GemmConfig(), ScenarioResult("repeat", G, 5, 1, 3, 100, 1e-6, 2, (0, 0), 1.0, 1.0))
    fine = _check(GemmConfig(), ScenarioResult("repeat", G, 5, 0), ScenarioResult("sm-count", H, 2, 1))
    (problem,) = problems_of([failed, fine])
    assert problem.startswith("128x56x4096:nt PEDANTIC: repeat: 1/5 runs differ")


def _ratio(median, low, high):
    return Ratio("cure", "base", median, low, high, 24)


def test_a_lock_entry_holds_for_any_m_only_where_every_row_keeps_its_bits():
    shape = parse_shape("4096x56x128:tn")
    key = GemmKey.of(shape, PINNED)
    steady = (ScenarioResult("repeat", G, 5, 0), ScenarioResult("sm-count", H, 2, 0))
    checked = ScenarioResult("batch-invariance", H, 13, 0, extra={"mismatched_by_m": {1: 0, 4095: 0}})
    rows = _check(PINNED, *steady, checked, ScenarioResult("streams-shared-handle", H, 16, 1))
    entry, why = prescribe._lock_entry(shape, key, PINNED, rows, (16, 66), 5)
    assert why == "" and entry.key == key and entry.verified["rows"][-1] == 4095
    assert entry.verified["shared_workspace"] == "other bits: one workspace per stream"
    # A batch of matrices of one row each: only the batch count was checked, so the entry is for its M alone.
    single = parse_shape("1x56x128:tn:b8")
    batches = ScenarioResult("batch-invariance", H, 3, 0, extra={"mismatched_by_m": {}, "mismatched_by_batch": {1: 0}})
    one, why = prescribe._lock_entry(single, GemmKey.of(single, PINNED), PINNED, _check(PINNED, *steady, batches),
                                       (16, 66), 5)
    assert why == "" and one.key.m == 1 and one.verified["batches"] == [1]
    alone = _check(PINNED, *steady, ScenarioResult("batch-invariance", H, 13, 2, detail="m = 1 differs"))
    entry, _ = prescribe._lock_entry(shape, key, PINNED, alone, (16, 66), 5)
    assert entry.key == key.at(4096) and entry.verified["rows_note"] == "m = 1 differs; holds for M = 4096 alone"
    assert entry.verified["shared_workspace"] == "not checked"
    moved = _check(PINNED, ScenarioResult("repeat", G, 5, 0), ScenarioResult("sm-count", H, 2, 1, detail="66 SMs"))
    assert prescribe._lock_entry(shape, key, PINNED, moved, (16, 66), 5) == (None, "sm-count: 66 SMs")


def test_the_times_keep_their_json_form(monkeypatch):
    cure = prescribe.Cure("pin", PINNED, True, "same bits", _ratio(1.003, 1.001, 1.005))
    assert cure.to_dict()["time_ratio"] == {"median": 1.003, "ci_low": 1.001, "ci_high": 1.005}

    class Timing:
        def ratio(self, arm, reference):
            return {PINNED.name: _ratio(1.2, 1.1, 1.3), "PEDANTIC": _ratio(1.5, 1.4, 1.6)}[arm]

    run = types.SimpleNamespace(timings={SHAPE.name: Timing()})
    monkeypatch.setattr(prescribe, "time_shapes", lambda *args, **options: run)
    entry = prescribe.LockEntry(GemmKey.of(SHAPE, PINNED), PINNED, {})
    heuristic = dataclasses.replace(PINNED, lt_algo=())
    (timed,) = prescribe._lock_costs([entry], {entry.key: (SHAPE, GemmConfig(), PINNED)}, 0, None,
                                     lambda text: None, {})
    assert timed.cost == {"against_heuristic": {"config": heuristic.name, "median": 1.2, "ci_low": 1.1,
                                                "ci_high": 1.3},
                          "against": {"config": "PEDANTIC", "median": 1.2 / 1.5}}


def test_the_scenarios_declare_their_part_in_a_lock_entry():
    parts = {name: scenario.lock for name, scenario in REGISTRY.items() if scenario.lock}
    assert parts == {"repeat": "bits", "sm-count": "bits", "batch-invariance": "rows",
                     "streams-shared-handle": "workspace"}
    assert set(parts) <= set(prescribe.VERIFY_SCENARIOS)


def test_prescribe_runs_the_repeats_its_help_says():
    import re

    from cublas_det.cli import prescribe as command

    parser = command.build_parser("cublas-det prescribe")
    help_text = " ".join(parser.format_help().split())
    most, quick, default = map(int, re.search(r"--repeats N runs per scenario, at most (\d+) \((\d+) with --quick\) "
                                              r"\(default: (\d+)\)", help_text).groups())
    assert f"--quick {quick} repeats," in help_text
    for argv, runs in (([], default), (["--repeats", "1000"], most), (["--quick"], quick)):
        assert command._steps(parser.parse_args(argv))["repeats"] == runs, argv


def test_a_pin_whose_bits_change_is_retried_without_split_k(monkeypatch):
    """lock_entries on the CPU, its GPU parts stubbed: the heuristic's pick is pinned first; when that entry is
    refused, the pick under reduction scheme NONE is pinned and verified, and the refusal names both."""
    picked = []

    class Lt:
        def algorithm(self, geometry):
            return (("algo_id", 20 if picked[-1] is None else 55),)

    class Handle:
        lt = Lt()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def create_handle(config):
        picked.append(config.lt_reduction_scheme_mask)
        return Handle()

    monkeypatch.setattr(prescribe, "create_handle", create_handle)
    monkeypatch.setattr(prescribe, "device_properties", lambda: {"sm_count": 132})
    monkeypatch.setattr(prescribe, "_verification", lambda shapes, configs, *args: configs)
    monkeypatch.setattr(prescribe, "_lock_costs", lambda entries, *args: entries)
    accepted = {"without split-K": True}

    def lock_entry(shape, key, pinned, check, targets, repeats):  # only the no-split-K pick keeps its bits
        if dict(pinned.lt_algo)["algo_id"] == 55 and accepted["without split-K"]:
            return types.SimpleNamespace(key=key, config=pinned), ""
        return None, "sm-count: 116 SMs: 9 elements differ"

    monkeypatch.setattr(prescribe, "_lock_entry", lock_entry)
    base = GemmConfig(input_dtype="bfloat16", output_dtype="bfloat16")
    (entry,), refused = prescribe.lock_entries([SHAPE], [base])
    assert picked == [None, 0] and dict(entry.config.lt_algo) == {"algo_id": 55} and not refused
    accepted["without split-K"] = False
    picked.clear()
    entries, (refusal,) = prescribe.lock_entries([SHAPE], [base])
    assert not entries and picked == [None, 0]
    assert "pinned, its bits still change" in refusal and "pinned without split-K, its bits still change" in refusal
