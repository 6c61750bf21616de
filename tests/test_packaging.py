"""The package as published: sdist and wheel contents, metadata, tests in the unpacked sdist, the README commands.

Building runs ``build``'s own builder in an isolated environment with setuptools from the index (as
pip and every builder do), the sdist and then the wheel from it, about 6 s; in the unpacked sdist a
smoke subset runs: the whole suite runs here.
"""

import email
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Set in the test run inside the unpacked sdist, so that it does not build and recurse again.
NESTED = "CUBLAS_DET_TEST_IN_SDIST"


def _readme_commands():
    """The README's bash blocks under "The two commands": (main job, tests)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)\n```", section, re.DOTALL)


def test_readme_commands_start_from_a_clone_in_a_fresh_venv():
    main_job, tests = _readme_commands()
    for command in (main_job, tests):
        assert command.startswith("python3 -m venv .venv && . .venv/bin/activate && python -m pip install ")
    assert main_job.endswith("&& python -m cublas_det.bench")
    assert tests.endswith("&& python -m pytest")


def test_ci_runs_the_readme_test_command_as_written():
    _, tests = _readme_commands()
    assert tests in (ROOT / ".ci" / "run").read_text().splitlines()


def test_readme_cites_only_files_of_the_repository():
    text = (ROOT / "README.md").read_text()
    assert "shared/" not in text
    for path in re.findall(r"`((?:bench|tests|cublas_det)/[\w./]+\.py)`", text):
        assert (ROOT / path).is_file(), path


# Without PYTHONDONTWRITEBYTECODE, which only makes setuptools warn that it will not byte-compile.
BUILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
# What the unpacked sdist must pass: its package imports and keeps its layers, reads the stored runs of
# tests/data, and renders and compares them (a few seconds; the whole suite runs from the clone).
SDIST_SMOKE = ["tests/test_layers.py", "tests/test_compare_runs.py", "tests/test_config.py", "tests/test_shapes.py"]


class _Builds:
    """``build``'s ProjectBuilder in one isolated environment of the project's build requirements, for
    the sdist and for the wheel from it (what ``python -m build`` does, with one environment made
    instead of two); ``log`` keeps the backend's output."""

    def __init__(self, env):
        self.env, self.log = env, []

    def _runner(self, cmd, cwd=None, extra_environ=None):
        result = subprocess.run(cmd, cwd=cwd, env={**BUILD_ENV, **(extra_environ or {})}, capture_output=True,
                                text=True, check=False)
        self.log += (result.stdout + result.stderr).splitlines()
        result.check_returncode()

    def __call__(self, distribution: str, source, out) -> pathlib.Path:
        from build import ProjectBuilder

        builder = ProjectBuilder.from_isolated_env(self.env, source, runner=self._runner)
        try:
            self.env.install(builder.build_system_requires)
        except subprocess.CalledProcessError as err:
            if b"No matching distribution found for setuptools" in (err.stdout or b"") + (err.stderr or b""):
                pytest.skip("cannot install the build backend: no package index reachable (a GPU host without "
                            "network)")
            raise
        self.env.install(builder.get_requires_for_build(distribution))
        return pathlib.Path(builder.build(distribution, out))


def _unpack(sdist, into):
    with tarfile.open(sdist) as archive:
        # The "data" filter where this Python has it (3.12, and 3.10.12/3.11.4 on): 3.14's default.
        archive.extractall(into, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (unpacked,) = into.iterdir()
    return unpacked


def _make_dists(root: pathlib.Path, environ: dict):
    """(sdist, wheel, the smoke run's process, the backend's log) under ``root``: as ``python -m build``
    makes them, the wheel from the sdist; the smoke subset starts in the unpacked sdist as soon as it
    exists and runs while the wheel builds, in ``environ`` (not what a test running meanwhile set)."""
    from build.env import DefaultIsolatedEnv

    source = root / "src" / "cublas_det"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".benchmarks"))
    out = root / "dist"
    with DefaultIsolatedEnv() as env:
        build = _Builds(env)
        sdist = build("sdist", source, out)
        (root / "tested").mkdir()
        tested = _unpack(sdist, root / "tested")
        # The unpacked copy of cublas_det comes first on the path, before this environment's install.
        smoke = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SDIST_SMOKE],
                                 cwd=tested, env={**environ, NESTED: "1", "PYTHONPATH": str(tested)},
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            (root / "unpacked").mkdir()
            wheel = build("wheel", _unpack(sdist, root / "unpacked"), out)
        except BaseException:
            smoke.kill()
            smoke.communicate()
            raise
    return sdist, wheel, smoke, build.log


class _Building:
    """:func:`_make_dists` in a thread, so that the builds (some 10 s, mostly waiting on pip and the
    backend) run while the rest of the suite does (:func:`start_early`)."""

    def __init__(self):
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="cublas_det_dists_"))
        self.environ = dict(os.environ)  # the session's, before any test patches it
        self.result, self.error, self.done = None, None, threading.Event()
        threading.Thread(target=self._run, name="cublas_det dists", daemon=True).start()

    def _run(self):
        try:
            self.result = _make_dists(self.root, self.environ)
        except BaseException as err:  # a skip included: raised again where the fixture waits
            self.error = err
        finally:
            self.done.set()


_building = []


def _start_building() -> _Building:
    """The builds, started now unless they are under way."""
    if not _building:
        _building.append(_Building())
    return _building[0]


# `pip install -e ".[test]"` alone installs no CuPy: the suite, run again with CuPy hidden (and so the CUDA
# extra, as the tests see it), passes there too, each test that needs it skipped with the reason.
HIDE_CUPY = ("import sys; sys.modules.update(dict.fromkeys(('cupy', 'cupy_backends', 'cupyx'))); import pytest; "
             "sys.exit(pytest.main(sys.argv[1:]))")
_without_cupy = []


def _start_without_cupy() -> subprocess.Popen:
    """The suite without CuPy (this module aside: it builds), started now unless it is under way."""
    if not _without_cupy:
        basetemp = tempfile.mkdtemp(prefix="cublas_det_without_cupy_")  # not the outer run's numbered temp dirs
        _without_cupy.append(subprocess.Popen(
            [sys.executable, "-c", HIDE_CUPY, "-q", "-p", "no:cacheprovider", f"--basetemp={basetemp}",
             "--ignore", str(ROOT / "tests" / "test_packaging.py"), str(ROOT / "tests")],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return _without_cupy[0]


def start_early(items) -> None:
    """conftest, once the session is collected: start the builds, and the suite without CuPy, if a selected
    test needs them."""
    if (any("dists" in item.fixturenames for item in items) and not os.environ.get(NESTED)
            and importlib.util.find_spec("build") is not None):
        _start_building()
    if any("suite_without_cupy" in item.fixturenames for item in items) and importlib.util.find_spec("cupy"):
        _start_without_cupy()


@pytest.fixture(scope="module")
def suite_without_cupy():
    """The process of :func:`_start_without_cupy`, started early."""
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("CuPy is not installed: this run is the run without it")
    process = _start_without_cupy()
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def test_the_suite_passes_without_cupy_as_the_test_extra_alone_installs_it(suite_without_cupy):
    """`pip install -e ".[test]"`, then pytest: a collection error (test_footprint.py) and 27 failures."""
    stdout, stderr = suite_without_cupy.communicate(timeout=600)
    assert suite_without_cupy.returncode == 0, stdout[-3000:] + stderr[-3000:]
    last = stdout.splitlines()[-1]
    assert re.search(r"\d+ passed", last) and "error" not in last and "failed" not in last, last


@pytest.fixture(scope="module")
def dists():
    """(sdist, wheel, the smoke run's process): :func:`_make_dists`, made in the background."""
    if os.environ.get(NESTED):
        pytest.skip("already inside the unpacked sdist's test run")
    pytest.importorskip("build", reason="needs the test extra's 'build' (pip install -e '.[cuda12,test]')")
    building = _start_building()
    building.done.wait()
    smoke = building.result[2] if building.result else None
    try:
        if building.error is not None:
            raise building.error
        sdist, wheel, _, log = building.result
        assert not [line for line in log if "deprecat" in line.lower() or line.lower().startswith("warning:")], log
        yield sdist, wheel, smoke
    finally:
        if smoke is not None:
            if smoke.poll() is None:
                smoke.kill()
            smoke.communicate()
        shutil.rmtree(building.root, ignore_errors=True)


def test_wheel_holds_py_typed_license_and_lean_extras(dists):
    _, wheel, _ = dists
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_string(archive.read(f"{dist_info}/METADATA").decode())
    assert "cublas_det/py.typed" in names
    assert f"{dist_info}/licenses/LICENSE" in names
    assert meta["License-Expression"] == "MIT"
    assert "Typing :: Typed" in meta.get_all("Classifier")
    requires = meta.get_all("Requires-Dist")
    for cuda in ("12", "13"):
        extra = sorted(r.split(";")[0].strip() for r in requires if f'extra == "cuda{cuda}"' in r)
        assert extra == [f"cuda-toolkit[cublas,cudart,nvrtc]=={cuda}.*", f"cupy-cuda{cuda}x<15,>=14", "ml-dtypes>=0.4"]
    assert not any("ctk" in r for r in requires)
    test = sorted(r.split(";")[0].strip() for r in requires if 'extra == "test"' in r)
    assert "safetensors>=0.4" in test, test  # so that test_diff reads files the package wrote


def test_sdist_holds_what_the_tests_need(dists):
    sdist, _, _ = dists
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for path in ("LICENSE", "README.md", "pyproject.toml", ".ci/run", "cublas_det/py.typed", "tests/__init__.py",
                 "tests/conftest.py", "tests/data/h200_run.json", "bench/check_overhead.py",
                 "bench/host_overhead.py", "bench/profiler_crosscheck.py", "bench/test_gemm_modes.py"):
        assert path in names, path
    assert not any("__pycache__" in name for name in names)


def test_manifest_takes_every_file_the_tests_benches_and_docs_hold(monkeypatch):
    """Without building: MANIFEST.in, as setuptools reads it, matches every file under tests/, bench/, docs/."""
    filelist = pytest.importorskip("setuptools._distutils.filelist")
    monkeypatch.chdir(ROOT)
    found = filelist.FileList()
    found.findall()
    for line in (ROOT / "MANIFEST.in").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            found.process_template_line(line)
    taken = {str(pathlib.Path(name).resolve().relative_to(ROOT)) for name in found.files}
    needed = {str(path.relative_to(ROOT)) for folder in ("tests", "bench", "docs") for path in (ROOT / folder).rglob("*")
              if path.is_file() and "__pycache__" not in path.parts}
    assert "tests/data/h200_run.json" in needed and not needed - taken, sorted(needed - taken)


def test_pytest_passes_in_the_unpacked_sdist(dists):
    *_, smoke = dists
    stdout, stderr = smoke.communicate(timeout=600)
    assert smoke.returncode == 0, stdout[-3000:] + stderr[-3000:]
    assert re.search(r"\d+ passed", stdout.splitlines()[-1]), stdout[-500:]
