"""``cublas_det.testing.assert_runs_identical``: pass identical runs through, fail with the facts."""

import numpy as np
import pytest

from cublas_det.testing import assert_runs_identical

from .test_diff import PLANTED, _npy_run, write_seed_run


def seed_runs_of(tmp_path, diverged: bool):
    return write_seed_run(tmp_path / "a", False), write_seed_run(tmp_path / "b", diverged)


def test_assert_runs_identical_passes_identical_runs_through(tmp_path):
    a = write_seed_run(tmp_path / "a", False, steps=(1, 2))
    b = write_seed_run(tmp_path / "b", False, steps=(1, 2))
    comparison = assert_runs_identical(a, b)
    assert comparison.identical and len(comparison.steps) == 2


def test_assert_runs_identical_message_header_blank_line_then_facts(tmp_path):
    with pytest.raises(AssertionError) as caught:
        assert_runs_identical(*seed_runs_of(tmp_path, True))
    lines = str(caught.value).splitlines()
    assert lines[0] == (f"Runs are not bit-for-bit identical: first divergence at step 2 in leaf {PLANTED}; "
                        "all of step 1 equal.")
    assert lines[1] == ""
    assert lines[2].startswith("Run A: ") and lines[3].startswith("Run B: ")
    assert "Step 2: 1 of 26 leaves diverges" in lines
    fact = next(line for line in lines if line.startswith(f"  Leaf {PLANTED}:"))
    assert "3 / 4096 elements differ (<0.1%); greatest ULP distance 2" in fact and "worst at index [4000]" in fact
    assert lines[-1] == "Later steps not compared: 1 (all_steps=True compares them)"


def test_assert_runs_identical_signed_zero_and_missing_facts(tmp_path):
    a = _npy_run(tmp_path / "a", {0: {"z": np.zeros(2, np.float32), "w": np.ones(2, np.float32)}})
    b = _npy_run(tmp_path / "b", {0: {"z": np.array([0.0, -0.0], np.float32)}})
    with pytest.raises(AssertionError) as caught:
        assert_runs_identical(a, b)
    message = str(caught.value)
    assert "Leaf w: missing in B (A has float32[2])" in message
    assert "Leaf z: 1 / 2 elements differ (50.0%); signed zero only (+0 against -0, 0 ULP)" in message


def test_a_share_that_rounds_to_nothing_is_never_said_as_0_percent(tmp_path):
    """1 of 4,096 elements read "(0.0%)": some elements differ, so the share is "<0.1%"."""
    one = np.zeros(4096, np.float32)
    one[7] = 1.0
    a, b = _npy_run(tmp_path / "a", {0: {"w": np.zeros(4096, np.float32)}}), _npy_run(tmp_path / "b", {0: {"w": one}})
    with pytest.raises(AssertionError) as caught:
        assert_runs_identical(a, b)
    message = str(caught.value)
    assert "Leaf w: 1 / 4096 elements differ (<0.1%)" in message and "0.0%" not in message
    assert "Step 0: 1 of 1 leaf diverges" in message
