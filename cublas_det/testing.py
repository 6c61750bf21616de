"""``assert_gemm_reproducible``: judge a :class:`GemmCheck` and fail with the facts.

The pytest plugin (the ``gpu`` marker, the ``cublas_handle`` fixture, ``all_math_modes``) lives
in :mod:`cublas_det.pytest_plugin` and is loaded automatically once the package is installed.
"""

from __future__ import annotations

from ._check import DEFAULT_SCENARIOS, GemmCheck, ScenarioResult, check_gemm

__all__ = ["assert_gemm_reproducible", "format_failure"]


def assert_gemm_reproducible(shape_or_check, mode=None, *, scenarios=DEFAULT_SCENARIOS, repeats: int = 20,
                             seed: int = 0, gemm_fn=None) -> GemmCheck:
    """Assert that a GEMM's bits repeat in every scenario; return the check when they do.

    Args:
        shape_or_check: a ``GemmShape``, a shape string (``"128x56x4096:nt"``) or a finished
            :class:`GemmCheck` to judge.
        mode, scenarios, repeats, seed, gemm_fn: as for :func:`cublas_det.check_gemm`.
    Raises:
        AssertionError: a header line, a blank line, then for each failing scenario the
            mismatched elements, the greatest difference and where, and the mode and its source.
    """
    if isinstance(shape_or_check, GemmCheck):
        check = shape_or_check
    else:
        check = check_gemm(shape_or_check, mode, repeats=repeats, scenarios=scenarios, seed=seed, gemm_fn=gemm_fn)
    if not check.reproducible:
        raise AssertionError(format_failure(check))
    return check


def format_failure(check: GemmCheck) -> str:
    """The assertion message for a check that is not reproducible."""
    failures = check.failures
    names = ", ".join(result.scenario for result in failures)
    lines = [f"GEMM {check.shape} is not bit-for-bit reproducible in {check.mode_name} math ({names}).", ""]
    for result in failures:
        lines += _scenario_lines(check, result)
    lines.append(f"Math mode: {check.mode_name} (from {check.mode_source}); seed {check.seed}; "
                 f"reference digest {check.digest[:16]}")
    return "\n".join(lines).rstrip()


def _scenario_lines(check: GemmCheck, result: ScenarioResult) -> list[str]:
    lines = [f"Scenario: {result.scenario}" + (f" ({result.detail})" if result.detail else "")]
    if result.error:
        return lines + [f"Could not run: {result.error}", ""]
    lines.append(f"Runs differing from the first: {result.differing_runs} / {result.runs}")
    if result.total_elements:
        share = 100.0 * result.mismatched_elements / result.total_elements
        lines.append(f"Mismatched elements: {result.mismatched_elements} / {result.total_elements} ({share:.1f}%)"
                     " in the worst run")
    if result.index is not None:
        lines.append(f"Greatest absolute difference: {result.max_abs_diff:.3g}; greatest ULP distance: "
                     f"{result.max_ulp} at index {result.index} (expected {result.reference_value!r}, "
                     f"got {result.actual_value!r})")
    return lines + [""]
