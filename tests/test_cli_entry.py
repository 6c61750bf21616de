"""Every command line entry, as a user types it: its name in errors, one line and exit 2 without a GPU, --help.

Behaviour runs in this process (the ``typed`` fixture); the process boundary (the name an entry
gives itself, its exit status) runs in real interpreters, a usage error for each entry and the
bench without a GPU, started together.
"""

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import pytest

from cublas_det.core import device as _device

from .conftest import BIN, ROOT, needs_cuda_extra, needs_no_gpu, unwrapped

PYTHON = os.path.basename(sys.executable)
CONSOLE_SCRIPT = BIN / "cublas-det-bench"  # installed beside this interpreter
COMMAND = BIN / "cublas-det"
BENCH = ROOT / "bench"
SCRIPTS = ("check_overhead.py", "host_overhead.py", "profiler_crosscheck.py")

# (command, the name it calls itself in messages: what the user typed)
ENTRIES = {
    "python -m cublas_det": ([sys.executable, "-m", "cublas_det"], f"{PYTHON} -m cublas_det"),
    "python -m cublas_det.bench": ([sys.executable, "-m", "cublas_det.bench"], f"{PYTHON} -m cublas_det.bench"),
    "cublas-det-bench": ([str(CONSOLE_SCRIPT)], "cublas-det-bench"),
    "cublas-det": ([str(COMMAND)], "cublas-det"),
    "cublas-det bench": ([str(COMMAND), "bench"], "cublas-det bench"),
    **{f"bench/{name}": ([sys.executable, str(BENCH / name)], name) for name in SCRIPTS},
}
PACKAGE_ENTRIES = [entry for entry in ENTRIES if not entry.startswith("bench/")]
# The bench/ scripts that need no GPU (files, logs, the CPU diff) and the pytest-benchmark suite;
# every other script needs one.
CPU_SCRIPTS = {"capture_parse.py", "diff_throughput.py", "rerun_spread.py", "suite_vs_bench.py", "test_gemm_modes.py"}
GPU_SCRIPTS = sorted(path.name for path in BENCH.glob("*.py") if path.name not in CPU_SCRIPTS)


_started: dict = {}  # (entry, what) -> (argv, the running interpreter); "folder": where --json points


def _start_processes() -> dict:
    """Real interpreters, all started at once: each entry's usage error, and the bench asked for a
    --json file (without a GPU: one line, exit 2, no file)."""
    if _started:
        return _started
    # This tree's cublas_det first on the path, whichever copy is installed (scripts and the
    # console script do not have the working directory on it).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    runs = {(entry, "--no-such-flag"): [*command, "--no-such-flag"] for entry, (command, _) in ENTRIES.items()}
    _started["folder"] = pathlib.Path(tempfile.mkdtemp(prefix="cublas_det_entries_"))
    runs["python -m cublas_det.bench", "--json"] = [*ENTRIES["python -m cublas_det.bench"][0], "--json",
                                                    str(_started["folder"] / "out.json")]
    _started.update({key: (argv, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                                  env=env)) for key, argv in runs.items()})
    return _started


def start_early(items) -> None:
    """conftest, once the session is collected: start the interpreters if a selected test needs them,
    so that they run while the tests before these do."""
    if any("processes" in item.fixturenames for item in items):
        _start_processes()


@pytest.fixture(scope="module")
def processes():
    """What each of :func:`_start_processes`'s interpreters gave: exit status, stdout, stderr."""
    started = dict(_start_processes())
    folder = started.pop("folder")
    done = {}
    for key, (argv, process) in started.items():
        out, err = process.communicate(timeout=120)
        done[key] = subprocess.CompletedProcess(argv, process.returncode, out, unwrapped(err))
    yield done
    shutil.rmtree(folder, ignore_errors=True)


def _one_error_line(result, prog):
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    return lines[0]


def test_console_scripts_are_installed():
    assert CONSOLE_SCRIPT.is_file() and COMMAND.is_file(), "install the package (README): cublas-det and cublas-det-bench"


def test_one_command_with_a_version_and_every_subcommand_within_100_columns(typed):
    from cublas_det import __version__
    from cublas_det.cli import COMMANDS

    version = typed("cublas-det", "--version")
    assert version.returncode == 0 and version.stdout.strip() == f"cublas-det {__version__}"
    top = typed("cublas-det", "--help")
    assert top.returncode == 0 and all(f"  {name} " in top.stdout for name in COMMANDS)
    for name in COMMANDS:
        helped = typed(f"cublas-det {name}", "--help", env={"COLUMNS": "100"})
        assert helped.returncode == 0, (name, helped.stderr)
        assert helped.stdout.startswith(f"usage: cublas-det {name}")
        assert max(len(line) for line in helped.stdout.splitlines()) <= 100, name
    assert max(len(line) for line in top.stdout.splitlines()) <= 100
    unknown = typed("cublas-det", "frobnicate")
    assert unknown.returncode == 2 and unknown.stderr.startswith("cublas-det: error: no command 'frobnicate'")


@needs_no_gpu
@pytest.mark.parametrize("entry", ENTRIES)
def test_without_gpu_one_line_exit_2(entry, typed):
    env = ("env",) if entry in ("python -m cublas_det", "cublas-det") else ()  # alone, these print their help
    line = _one_error_line(typed(entry, *env), " ".join([ENTRIES[entry][1], *env]))
    assert "no GPU available: " in line


@pytest.mark.parametrize("entry", ["python -m cublas_det", "cublas-det"])
def test_the_command_alone_prints_its_commands_and_exits_0(entry, typed):
    from cublas_det.cli import COMMANDS

    alone = typed(entry)
    assert alone.returncode == 0 and not alone.stderr
    assert alone.stdout.startswith(f"usage: {ENTRIES[entry][1]} ") and all(f"  {name} " in alone.stdout
                                                                         for name in COMMANDS)
    assert max(len(line) for line in alone.stdout.splitlines()) <= 100


@needs_no_gpu
@pytest.mark.parametrize("script", GPU_SCRIPTS)
def test_every_bench_script_without_gpu_is_one_line_exit_2(script, typed):
    assert "no GPU available: " in _one_error_line(typed(f"bench/{script}"), script)


@pytest.mark.gpu
def test_lt_probe_on_a_gpu_finds_what_docs_lt_says(capsys):
    import runpy

    probe = runpy.run_path(str(BENCH / "lt_probe.py"))["probe"]  # its functions, not its __main__
    probe("128x56x4096:nt", "float32")
    out = capsys.readouterr().out
    assert "same bits as cublasGemmEx: True" in out
    assert "Lt pinned full-SM algo: target full: same bits; target 66: same bits; target 16: same bits" in out


@needs_no_gpu
def test_no_gpu_in_a_real_interpreter_is_one_line_exit_2_and_no_file(processes):
    result = processes["python -m cublas_det.bench", "--json"]
    line = _one_error_line(result, f"{PYTHON} -m cublas_det.bench")  # the name the user typed
    assert line.startswith(f"{PYTHON} -m cublas_det.bench: error: no GPU available:")
    assert not pathlib.Path(result.args[-1]).exists()


@needs_no_gpu
def test_without_gpu_the_line_says_what_runs_without_one(typed):
    without = ('without a GPU, report, compare, diff, capture --from and bench --list run on NumPy alone (README: '
               '"Try it without a GPU")')
    line = _one_error_line(typed("cublas-det", "env"), "cublas-det env")
    assert line.endswith(f"; {without}; cublas-det env --libs lists what is missing")
    line = _one_error_line(typed("python -m cublas_det.bench"), f"{PYTHON} -m cublas_det.bench")
    assert line.endswith(f"; {without}; {PYTHON} -m cublas_det env --libs lists what is missing")


def test_libs_without_the_cuda_libraries_names_what_is_missing_its_install_and_what_runs_without(typed, monkeypatch):
    """The way forward from a no-GPU error: env --libs reports (exit 1, a finding), never errs (exit 2)."""
    from cublas_det.cli import env

    monkeypatch.setattr(env, "library_locations", lambda: {name: ("", "not found: no wheel") for name in env.LIBRARIES})
    result = typed("cublas-det env", "--libs")
    said = " ".join(result.stdout.split())
    assert result.returncode == 1 and result.stderr == "", result.stderr
    assert f"missing: libcublas, cudart, NVRTC; for a GPU, install them: {_device.INSTALL_HINT}" in said
    assert 'run on NumPy alone (README: "Try it without a GPU")' in said


@pytest.mark.parametrize("entry, prog", [("cublas-det", "cublas-det explain"),
                                         ("python -m cublas_det", f"{PYTHON} -m cublas_det explain")])
def test_explain_errors_name_explain_and_a_missing_shape_is_one_line(entry, prog, typed):
    missing = _one_error_line(typed(entry, "explain"), prog)
    assert f"a shape comes first, e.g. {prog} 128x56x4096:nt" in missing
    assert "a shape comes first" in _one_error_line(typed(entry, "explain", "--modes", "tf32"), prog)
    assert "'foo' to explain: neither a shape" in _one_error_line(typed(entry, "explain", "foo"), prog)
    assert "bad shape '12'" in _one_error_line(typed(entry, "explain", "12"), prog)
    assert _one_error_line(typed(entry, "explain", "8x8x8", "--json", "x"), prog) == (
        f"{prog}: error: explain prints one table and exits; drop --json")
    helped = typed(entry, "explain", "--help")
    assert helped.returncode == 0 and helped.stdout.startswith(f"usage: {prog} SHAPE")


def test_bench_flags_run_the_commands_and_their_messages_name_the_flag(typed):
    """bench --prescribe, --explain SHAPE and --devices are the prescribe, explain and sweep commands."""
    prog = "cublas-det bench"
    assert _one_error_line(typed(prog, "--prescribe", "--plot", "x.png"), f"{prog} --prescribe") == (
        f"{prog} --prescribe: error: prescribe runs its own checks and timing; drop --plot")
    assert typed(prog, "--prescribe", "--help").stdout.startswith(f"usage: {prog} --prescribe [-h] ")
    for command in ("cublas-det prescribe", f"{prog} --prescribe"):
        assert _one_error_line(typed(command, "--capture", "c.json"), command) == (
            f"{command}: error: --capture needs --lock here (or use bench --capture)")
    assert _one_error_line(typed(prog, "--explain=12"), f"{prog} --explain").startswith(
        f"{prog} --explain: error: the shape to explain: bad shape '12'")
    assert "--plot draws times, and --devices does not time; drop --plot" in _one_error_line(
        typed(prog, "--devices", "all", "--plot", "x.png"), prog)
    assert _one_error_line(typed(prog, "--presc"), prog) == (
        f"{prog}: error: --prescribe: write --prescribe in full (see {prog} --help)")
    listed = typed(prog, "--list", "--shape", "8x8x8").stdout
    assert "8x8x8:nn" in listed
    for command in ("cublas-det prescribe", "cublas-det sweep"):
        assert typed(command, "--list", "--shape", "8x8x8").stdout == listed, command
    assert typed(prog, "--devices", "0", "--list", "--shape", "8x8x8").stdout == listed


def test_each_subcommand_is_its_python_m_form_and_help_or_a_usage_error_imports_no_gpu_package(typed, monkeypatch):
    import importlib

    from cublas_det.cli import COMMANDS

    monkeypatch.setenv("COLUMNS", "100")
    for name in COMMANDS:  # one definition: the subparser of cublas-det is the command's own parser
        own = importlib.import_module(f"cublas_det.cli.{name}").build_parser(f"cublas-det {name}")
        assert typed(f"cublas-det {name}", "--help").stdout == own.format_help(), name
    code = ("import sys\nfrom cublas_det.cli import main\n"
            "def imported():\n    return sorted(m for m in sys.modules if m.startswith('cublas_det.cli.'))\n"
            "for argv in (['--help'], ['frobnicate'], ['bench', '--no-such-flag'], ['explain']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "    print(argv[0], imported(), file=sys.stderr)\n"
            "print(sorted(m for m in sys.modules if m.partition('.')[0] in ('cupy', 'torch', 'cupti')))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout + result.stderr
    assert "--help ['cublas_det.cli.common']" in result.stderr  # the top help imports no command
    assert "frobnicate ['cublas_det.cli.common']" in result.stderr


def test_two_bench_flags_of_other_commands_or_list_with_an_output_are_refused(typed):
    prog = "cublas-det bench"
    assert _one_error_line(typed(prog, "--explain", "8x8x8", "--prescribe"), prog) == (
        f"{prog}: error: --prescribe and --explain each run a command of their own; give one")
    assert _one_error_line(typed(prog, "--devices", "all", "--explain=8x8x8", "--prescribe"), prog) == (
        f"{prog}: error: --prescribe, --explain and --devices each run a command of their own; give one")
    for output in ("--json", "--markdown", "--plot"):
        assert _one_error_line(typed(prog, "--list", output, "x"), prog) == (
            f"{prog}: error: --list prints the shapes and writes no file; drop {output}")


def test_a_compute_type_the_element_types_refuse_is_a_compute_type_error(typed):
    line = _one_error_line(typed("cublas-det bench", "--compute-type", "64f", "--list"), "cublas-det bench")
    assert line.startswith("cublas-det bench: error: --compute-type 64f: compute type COMPUTE_64F does not take "
                           "float32 inputs") and "--modes" not in line


def test_plural_says_one_thing_and_many_things():
    from cublas_det.base.words import plural

    assert [plural(n, "GEMM call") for n in (0, 1, 2)] == ["0 GEMM calls", "1 GEMM call", "2 GEMM calls"]
    assert plural(1, "leaf") == "1 leaf" and plural(3, "leaf") == "3 leaves" and plural(2000, "step") == "2,000 steps"


@pytest.mark.parametrize("entry", ENTRIES)
def test_usage_error_is_one_line_in_argparse_style(entry, typed, processes):
    prog = ENTRIES[entry][1]
    for result in (typed(entry, "--no-such-flag"), processes[entry, "--no-such-flag"]):
        line = _one_error_line(result, prog)
        assert line == f"{prog}: error: unrecognized arguments: --no-such-flag (see {prog} --help)"


@pytest.mark.parametrize("entry", ENTRIES)
def test_help_needs_no_gpu_and_names_the_program(entry, typed):
    result = typed(entry, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith(f"usage: {ENTRIES[entry][1]} ")


@pytest.mark.parametrize("entry", PACKAGE_ENTRIES)
def test_help_lists_the_exit_codes(entry, typed):
    result = typed(entry, "--help")
    assert "exit codes:\n  0  " in result.stdout and "\n  2  " in result.stdout


def test_bench_help_wraps_the_description_and_shows_plain_defaults(typed):
    result = typed("cublas-det-bench", "--help", env={"COLUMNS": "80"})
    description = result.stdout.split("\n\n")[1]
    assert len(description.splitlines()) > 2
    assert max(len(line) for line in description.splitlines()) <= 78  # argparse's width on 80 columns
    words = " ".join(result.stdout.split())  # as read, whatever the terminal width
    assert "(default: pedantic default tf32;" in words
    assert "['" not in words  # no Python list repr
    assert "  cublas-det-bench --quick " in result.stdout  # examples under the typed name


def test_help_names_every_mode_form_and_the_short_compute_types(typed):
    words = " ".join(typed("cublas-det bench", "--help").stdout.split())
    assert "pedantic, default, tf32, bf16x9, each optionally +disallow-rpr" in words
    assert "+lt, +lt-nosplitk (no split-K) or +lt-smN (planned for N SMs)" in words
    assert "32f 16f, or COMPUTE_32F_PEDANTIC (default: 32f)" in words


@pytest.mark.parametrize("columns", ["100", "61"])
def test_help_never_splits_a_hyphenated_name_and_fits_100_columns(typed, monkeypatch, columns):
    from cublas_det.cli import COMMANDS, bench

    monkeypatch.setenv("COLUMNS", columns)
    for name in COMMANDS:
        helped = typed(f"cublas-det {name}", "--help", env={"COLUMNS": columns}).stdout
        assert not re.search(r"[A-Za-z]-\n", helped), (name, re.findall(r".*[A-Za-z]-\n.*", helped))
    longest = bench.build_parser("python3.12 -m cublas_det.bench").format_help()  # the longest name typed
    assert max(map(len, longest.splitlines())) <= 100 and not re.search(r"[A-Za-z]-\n", longest)


def test_lists_as_one_flag_or_repeated_flags(typed):
    command = "python -m cublas_det.bench"
    together = typed(command, "--list", "--preset", "trunk", "mamba2-130m", "--shape", "8x8x8", "16x16x16:nt")
    repeated = typed(command, "--list", "--preset", "trunk", "--preset", "mamba2-130m",
                     "--shape", "8x8x8", "--shape", "16x16x16:nt")
    assert together.returncode == repeated.returncode == 0, together.stderr + repeated.stderr
    assert together.stdout == repeated.stdout
    for name in ("trunk/W_in/dW", "mamba2-130m/in_proj/dW", "8x8x8:nn", "16x16x16:nt"):
        assert name in together.stdout


def test_every_list_option_takes_one_flag_or_repeated_flags():
    from cublas_det.cli import bench, sweep

    for parser in (bench.build_parser("prog"), sweep.build_parser("prog")):
        for flag, first, second in (("--modes", "tf32", "default"), ("--scenarios", "repeat", "fresh-handle"),
                                    ("--preset", "trunk", "mamba2-2.7b")):
            dest = flag.lstrip("-")
            together = getattr(parser.parse_args([flag, first, second]), dest)
            repeated = getattr(parser.parse_args([flag, first, flag, second]), dest)
            assert together == repeated == [first, second], flag
        assert parser.parse_args([]).modes is None  # its default depends on --dtype: gemms._configurations
    parser = sweep.build_parser("prog")
    assert parser.parse_args([]).devices == ["all"]  # a given list replaces the default
    assert parser.parse_args(["--devices", "0", "1"]).devices == parser.parse_args(["--devices", "0", "--devices",
                                                                                    "1"]).devices == ["0", "1"]


@needs_cuda_extra
def test_libs_shows_where_each_library_was_found_without_a_gpu(typed):
    result = typed("python -m cublas_det", "--libs")
    assert result.returncode == 0, result.stderr
    rows = result.stdout.splitlines()[1:]
    assert [row.split(":")[0].strip() for row in rows if not row.startswith("    ")] == ["libcublas", "cudart", "NVRTC"]
    paths = [pathlib.Path(row.strip()) for row in rows if row.startswith("    ")]  # each on its own line
    for path, stem in zip(paths, ("libcublas.so", "libcudart.so", "libnvrtc.so"), strict=True):
        assert path.name.startswith(stem) and path.is_file(), path


def test_missing_third_party_module_is_one_line_but_a_missing_module_of_ours_is_a_bug(capsys):
    from cublas_det.cli.common import run_guarded

    def needs_torch():
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    def needs_cupy():
        raise ModuleNotFoundError("No module named 'cupy'", name="cupy")

    def ours():
        import cublas_det.no_such_module  # noqa: F401

    assert run_guarded("prog", needs_torch) == 2
    assert unwrapped(capsys.readouterr().err) == "prog: error: No module named 'torch'; install it with pip\n"
    with pytest.raises(ModuleNotFoundError):
        run_guarded("prog", ours)
    assert run_guarded("prog", needs_cupy) == 2
    assert unwrapped(capsys.readouterr().err).startswith("prog: error: CuPy is not installed (No module named 'cupy'); "
                                              "install it: pip install 'cupy-cuda12x>=14,<15' ")


def _try_without_a_gpu():
    """The README's "Try it without a GPU" block, one command a line (a quoted newline continues one)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Try it without a GPU\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)\n```", section, re.DOTALL)
    commands, pending = [], ""
    for line in block.splitlines():
        pending = f"{pending}\n{line}" if pending else line
        if pending.count('"') % 2 == 0:
            commands.append(pending)
            pending = ""
    return commands


def test_the_readme_block_without_a_gpu_runs_with_numpy_alone(tmp_path, typed, monkeypatch):
    install, *commands = _try_without_a_gpu()
    assert install == "python3 -m venv .venv && . .venv/bin/activate && python -m pip install -e ."
    (tmp_path / "tests").symlink_to(ROOT / "tests")  # the clone's files, at the paths the block names
    monkeypatch.chdir(tmp_path)
    for name in ("cupy", "cupy_backends"):  # as where CuPy is not installed: importing it fails
        monkeypatch.setitem(sys.modules, name, None)
    ran = {}
    for command in commands:
        if command.startswith("cublas-det "):
            words = shlex.split(command, comments=True)
            ran[words[1]] = result = typed(f"cublas-det {words[1]}", *words[2:])
            assert result.returncode in (0, 1) and "error" not in result.stderr, (command, result.stderr)
        else:  # the shell's lines: the files the commands after them read
            subprocess.run(["bash", "-c", command.replace("python -c", f"{shlex.quote(sys.executable)} -c")], check=True)
    assert list(ran) == ["report", "compare", "capture", "bench", "diff"]
    assert ran["report"].stdout.startswith("cublas_det 0.1.0 on NVIDIA H200 (132 SMs)")
    assert ran["compare"].returncode == 0 and "identical bits" in ran["compare"].stdout
    assert "g3 " in ran["capture"].stdout and (tmp_path / "capture.json").is_file()
    assert ran["bench"].stdout.startswith("6 captured GEMMs in DEFAULT/algo99/ws32M/bfloat16->bfloat16:")
    assert ran["diff"].returncode == 1 and "first divergence: step 1, leaf w" in ran["diff"].stdout
