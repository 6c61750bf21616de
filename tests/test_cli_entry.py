"""Every command line entry, as a user types it: its name in errors, one line and exit 2 without a GPU, --help."""

import os
import pathlib
import subprocess
import sys

import pytest

from .conftest import needs_no_gpu

PYTHON = os.path.basename(sys.executable)
CONSOLE_SCRIPT = pathlib.Path(sys.executable).parent / "cublas-det-bench"  # installed beside this interpreter
COMMAND = pathlib.Path(sys.executable).parent / "cublas-det"
ROOT = pathlib.Path(__file__).resolve().parent.parent
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


def _run(command, *args, env=None):
    # This tree's cublas_det first on the path, as in the in-process tests, whichever copy is
    # installed (scripts and the console script do not have the working directory on it).
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120, env=env, check=False)


def _one_error_line(result, prog):
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    return lines[0]


def test_console_scripts_are_installed():
    assert CONSOLE_SCRIPT.is_file() and COMMAND.is_file(), "install the package (README): cublas-det and cublas-det-bench"


def test_one_command_with_a_version_and_every_subcommand_within_100_columns():
    from cublas_det import __version__
    from cublas_det.cli import COMMANDS

    version = _run([str(COMMAND)], "--version")
    assert version.returncode == 0 and version.stdout.strip() == f"cublas-det {__version__}"
    top = _run([str(COMMAND)], "--help")
    assert top.returncode == 0 and all(f"  {name} " in top.stdout for name in COMMANDS)
    for name in COMMANDS:
        helped = _run([str(COMMAND), name, "--help"], env={**os.environ, "COLUMNS": "100"})
        assert helped.returncode == 0, (name, helped.stderr)
        assert helped.stdout.startswith(f"usage: cublas-det {name}")
        assert max(len(line) for line in helped.stdout.splitlines()) <= 100, name
    assert max(len(line) for line in top.stdout.splitlines()) <= 100
    unknown = _run([str(COMMAND)], "frobnicate")
    assert unknown.returncode == 2 and unknown.stderr.startswith("cublas-det: error: no command 'frobnicate'")


@needs_no_gpu
@pytest.mark.parametrize("entry", ENTRIES)
def test_without_gpu_one_line_exit_2(entry):
    command, prog = ENTRIES[entry]
    line = _one_error_line(_run(command), prog)
    assert "no GPU available: " in line


@pytest.mark.parametrize("entry", ENTRIES)
def test_usage_error_is_one_line_in_argparse_style(entry):
    command, prog = ENTRIES[entry]
    line = _one_error_line(_run(command, "--no-such-flag"), prog)
    assert line == f"{prog}: error: unrecognized arguments: --no-such-flag (see {prog} --help)"


@pytest.mark.parametrize("entry", ENTRIES)
def test_help_needs_no_gpu_and_names_the_program(entry):
    command, prog = ENTRIES[entry]
    result = _run(command, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith(f"usage: {prog} ")


@pytest.mark.parametrize("entry", PACKAGE_ENTRIES)
def test_help_lists_the_exit_codes(entry):
    result = _run(ENTRIES[entry][0], "--help")
    assert "exit codes:\n  0  " in result.stdout and "\n  2  " in result.stdout


def test_bench_help_wraps_the_description_and_shows_plain_defaults():
    result = _run(ENTRIES["cublas-det-bench"][0], "--help", env={**os.environ, "COLUMNS": "80"})
    description = result.stdout.split("\n\n")[1]
    assert len(description.splitlines()) > 2
    assert max(len(line) for line in description.splitlines()) <= 78  # argparse's width on 80 columns
    words = " ".join(result.stdout.split())  # as read, whatever the terminal width
    assert "(default: pedantic default tf32;" in words
    assert "['" not in words  # no Python list repr
    assert "  cublas-det-bench --quick " in result.stdout  # examples under the typed name


def test_lists_as_one_flag_or_repeated_flags():
    command = ENTRIES["python -m cublas_det.bench"][0]
    together = _run(command, "--list", "--preset", "trunk", "mamba2-130m", "--shape", "8x8x8", "16x16x16:nt")
    repeated = _run(command, "--list", "--preset", "trunk", "--preset", "mamba2-130m",
                    "--shape", "8x8x8", "--shape", "16x16x16:nt")
    assert together.returncode == repeated.returncode == 0, together.stderr + repeated.stderr
    assert together.stdout == repeated.stdout
    for name in ("trunk/W_in/dW", "mamba2-130m/in_proj/dW", "8x8x8:nn", "16x16x16:nt"):
        assert name in together.stdout


def test_every_list_option_takes_one_flag_or_repeated_flags():
    from cublas_det.cli.bench import build_parser

    parser = build_parser("prog")
    for flag, first, second in (("--modes", "tf32", "default"), ("--scenarios", "repeat", "fresh-handle"),
                                ("--devices", "0", "1"), ("--preset", "trunk", "mamba2-2.7b")):
        dest = flag.lstrip("-")
        together = getattr(parser.parse_args([flag, first, second]), dest)
        repeated = getattr(parser.parse_args([flag, first, flag, second]), dest)
        assert together == repeated == [first, second], flag
    assert parser.parse_args([]).modes is None  # its default depends on --dtype: bench._configurations


def test_libs_shows_where_each_library_was_found_without_a_gpu():
    result = _run(ENTRIES["python -m cublas_det"][0], "--libs")
    assert result.returncode == 0, result.stderr
    rows = result.stdout.splitlines()[1:]
    assert [row.split()[0] for row in rows] == ["libcublas", "cudart", "NVRTC"]
    for row, stem in zip(rows, ("libcublas.so", "libcudart.so", "libnvrtc.so")):
        path = pathlib.Path(row.split()[1])
        assert path.name.startswith(stem) and path.is_file(), row


def test_missing_third_party_module_is_one_line_but_a_missing_module_of_ours_is_a_bug(capsys):
    from cublas_det.cli.common import run_guarded

    def needs_torch():
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    def needs_cupy():
        raise ModuleNotFoundError("No module named 'cupy'", name="cupy")

    def ours():
        import cublas_det.no_such_module  # noqa: F401

    assert run_guarded("prog", needs_torch) == 2
    assert capsys.readouterr().err == "prog: error: No module named 'torch'; install it with pip\n"
    with pytest.raises(ModuleNotFoundError):
        run_guarded("prog", ours)
    assert run_guarded("prog", needs_cupy) == 2
    assert capsys.readouterr().err.startswith("prog: error: CuPy is not installed (No module named 'cupy'); "
                                              "install it: pip install 'cupy-cuda12x>=14,<15' ")
