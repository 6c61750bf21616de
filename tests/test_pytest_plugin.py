"""The plugin seen from a user's test suite (run in a temporary directory with pytester)."""

import glob


def test_gpu_marker_skips_with_reason_or_runs(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.gpu
        def test_needs_gpu():
            import cupy
            assert cupy.cuda.runtime.getDeviceCount() > 0

        @pytest.mark.gpu
        def test_needs_gpu_with_a_handle(cublas_handle):
            assert cublas_handle.read_math_mode() is not None

        def test_plain():
            pass

        def test_a_handle_unmarked(cublas_handle):  # errored with a NoGpuError traceback without a GPU
            assert cublas_handle.read_math_mode() is not None
    """)
    result = pytester.runpytest("-rs")
    from cublas_det import gpu_available
    from cublas_det.core.device import gpu_unavailable_reason

    if gpu_available():
        result.assert_outcomes(passed=4)
    else:
        # skipped before the cublas_handle fixture runs; the marked skips folded into one summary line, the
        # unmarked one (skipped by the fixture) shown at the test, as pytest shows a fixture's skip
        result.assert_outcomes(passed=1, skipped=3)
        reason = glob.escape(gpu_unavailable_reason())
        result.stdout.fnmatch_lines([f"SKIPPED [[]2[]] *pytest_plugin.py:*: {reason}",
                                     f"SKIPPED [[]1[]] *test_gpu_marker_skips_with_reason_or_runs.py:*: {reason}"])
        assert result.stdout.str().count(gpu_unavailable_reason()) == 2


def test_all_math_modes_parametrizes_three_ids(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.all_math_modes
        def test_mode(cublas_math_mode):
            assert cublas_math_mode.name in ("PEDANTIC", "DEFAULT", "TF32")
    """)
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*test_mode?pedantic?*PASSED*", "*test_mode?default?*PASSED*", "*test_mode?tf32?*PASSED*"])


def test_the_math_mode_prints_its_name(pytester):
    """print(cublas_math_mode) printed 3, IntEnum's str, not TF32."""
    pytester.makepyfile("def test_mode(cublas_math_mode):\n    print(f'mode={cublas_math_mode}', cublas_math_mode)\n")
    result = pytester.runpytest("-s", "--cublas-math-mode=tf32")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*mode=TF32 TF32*"])


def test_math_mode_option_and_env_feed_the_fixture(pytester, monkeypatch):
    pytester.makepyfile("""
        import os

        def test_mode(cublas_math_mode):
            assert cublas_math_mode.name == os.environ["EXPECTED_MODE"]
    """)
    monkeypatch.setenv("CUBLAS_DET_MATH_MODE", "default")
    monkeypatch.setenv("EXPECTED_MODE", "DEFAULT")
    pytester.runpytest().assert_outcomes(passed=1)
    monkeypatch.setenv("EXPECTED_MODE", "TF32")
    pytester.runpytest("--cublas-math-mode=tf32").assert_outcomes(passed=1)
    monkeypatch.setenv("EXPECTED_MODE", "PEDANTIC")
    monkeypatch.delenv("CUBLAS_DET_MATH_MODE")
    pytester.runpytest().assert_outcomes(passed=1)


def test_bad_math_mode_option_is_a_usage_error(pytester):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--cublas-math-mode=fastest")
    assert result.ret == 4  # pytest's usage error
    result.stderr.fnmatch_lines(["*--cublas-math-mode='fastest': not pedantic*"])


def test_a_refused_math_mode_is_offered_only_forms_the_option_takes(pytester):
    from cublas_det.core.config import MODE_CHOICES

    pytester.makepyfile("def test_x(): pass")
    offered = f"{', '.join(MODE_CHOICES)}, optionally +disallow-rpr"
    for bad in ("fastest", "default+lt", "pedantic+lt-nosplitk", "pedantic+disallow-rpr+disallow-rpr"):
        result = pytester.runpytest(f"--cublas-math-mode={bad}")
        said = " ".join(result.stderr.str().replace(f"{bad!r}", "").split())  # the value itself echoed aside
        assert result.ret == 4 and offered in said and "+lt" not in said, result.stderr.str()
        assert max(map(len, result.stderr.lines)) <= 100, result.stderr.str()
    for choice in [f"{mode}{flag}" for mode in MODE_CHOICES for flag in ("", "+disallow-rpr")]:
        pytester.runpytest(f"--cublas-math-mode={choice}").assert_outcomes(passed=1)


def test_math_mode_help_names_every_mode_it_accepts(pytester):
    from cublas_det.core.config import MODE_CHOICES

    helped = " ".join(pytester.runpytest("--help").stdout.str().split())
    assert f"math mode for the cublas_handle fixture: {', '.join(MODE_CHOICES)}, optionally +disallow-rpr" in helped
    pytester.makepyfile("def test_mode(cublas_math_mode):\n    assert cublas_math_mode.name == 'FP32_EMULATED_BF16X9'\n")
    pytester.runpytest("--cublas-math-mode=bf16x9+disallow-rpr").assert_outcomes(passed=1)


def test_the_handle_configuration_keeps_disallow_rpr_from_the_option_and_the_env(pytester, monkeypatch):
    from cublas_det.core.config import GemmConfig

    expected = GemmConfig.parse("pedantic+disallow-rpr").math_mode_value
    assert expected == 18  # PEDANTIC (2) with the DISALLOW_REDUCED_PRECISION_REDUCTION flag (16)
    pytester.makepyfile(f"def test_mode(cublas_config):\n    assert cublas_config.math_mode_value == {expected}\n")
    pytester.runpytest("--cublas-math-mode=pedantic+disallow-rpr").assert_outcomes(passed=1)
    monkeypatch.setenv("CUBLAS_DET_MATH_MODE", "pedantic+disallow-rpr")
    pytester.runpytest().assert_outcomes(passed=1)
