"""The lock file (schema, validation, where it holds), entering a Python program, and the lock's report:
everything of the lock that runs without a GPU."""

import dataclasses
import glob
import importlib.machinery
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from .conftest import unwrapped

from cublas_det import GemmConfig, MathMode
from cublas_det.lock import file as lockfile
from cublas_det.base.enter import SITE, TASKS_ENV, entry_failures, python_env
from cublas_det.base.errors import InputFileError, UsageError
from cublas_det.lock.file import LockReport
from cublas_det.render.prescribe import render_lock
from cublas_det.core.shapes import parse_shape

ALGO = {"algo_id": 66, "tile": 24, "splitk": 1, "reduction_scheme": 0, "cta_swizzling": 0, "custom_option": 7,
        "stages": 35, "inner_shape": 0, "cluster_shape": 5}
WHERE = {"gpu": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0", "cublas_version": "13.1.0",
         "driver_version": "13.0"}


def _entry(spec="16384x3352x768:tn", epilogue=""):
    config = GemmConfig(MathMode.DEFAULT, input_dtype="bfloat16", output_dtype="bfloat16", api="lt",
                        lt_algo=ALGO, lt_epilogue=epilogue)
    shape = parse_shape(spec)
    return lockfile.LockEntry(lockfile.GemmKey.of(shape, config), config,
                              {"m": shape.m, "rows": [1, 2, 4], "sm_count_targets": [16, 66], "streams": 4},
                              {"against_heuristic": {"median": 1.0, "ci_low": 0.99, "ci_high": 1.01}}, spec)


@pytest.fixture
def lock_path(tmp_path):
    lock = lockfile.Lock(WHERE, {}, str(tmp_path / "lock.json")).merged([_entry(), _entry("16384x768x3352:nn"),
                                                                        _entry(epilogue="BIAS")])
    lockfile.write(lock, lock.path)
    return lock.path


def test_a_lock_reads_back_as_written(lock_path):
    lock = lockfile.load(lock_path)
    assert len(lock.entries) == 3  # the BIAS epilogue is another GEMM than the same shape without it
    key = lockfile.GemmKey("bfloat16", "bfloat16", "COMPUTE_32F", False, True, 3352, 768)
    assert lock.config_for(key).lt_algo == tuple(sorted(ALGO.items()))
    assert lock.config_for(lockfile.GemmKey("bfloat16", "bfloat16", "COMPUTE_32F", False, True, 3352, 769)) is None
    assert str(key) == "Mx3352x768:tn bf16"  # M is left open: one entry serves every batch size
    torch_like = GemmConfig(MathMode.DEFAULT, input_dtype="bfloat16", output_dtype="bfloat16")
    assert lock.locked("1x3352x768:tn", torch_like) == lock.config_for(key)  # any M, M = 1 too
    assert lock.locked("1x3352x768:nn", torch_like) is None


def test_tf32_math_is_a_compute_type_in_the_key():
    config = GemmConfig(MathMode.TF32, api="lt", lt_algo=ALGO)
    key = lockfile.GemmKey.of(parse_shape("64x32x128"), config)
    assert key.compute_type == "COMPUTE_32F_FAST_TF32" and key.tf32 and "tf32" in str(key)
    default = lockfile.GemmKey.of(parse_shape("64x32x128"), GemmConfig(MathMode.DEFAULT, api="lt", lt_algo=ALGO))
    assert not default.tf32 and "tf32" not in str(default)  # the router's report names the mode by it


@pytest.mark.parametrize("mutate, says", [
    (lambda d: d.update(format="something"), "not a lock file"),
    (lambda d: d.update(version=9), "lock file format version 9"),
    (lambda d: d["where"].pop("sm_count"), "sm_count"),
    (lambda d: d["entries"][0]["gemm"].update(n=-1), "n: expected an integer from 1 to 2..31 - 1, found -1"),
    (lambda d: d["entries"][0]["gemm"].update(k=10 ** 30), "k: expected an integer from 1"),
    (lambda d: d["entries"][0]["gemm"].update(trans_a="no"), "trans_a"),
    (lambda d: d["entries"][0]["gemm"].update(input_dtype="float64"), "input_dtype"),
    (lambda d: d["entries"][0]["gemm"].update(compute_type=["COMPUTE_32F"]), "compute_type: expected a cuBLAS"),
    (lambda d: d["entries"][0].update(verified=None), "entries.0..verified: missing"),
    (lambda d: d["entries"][0]["config"].pop("lt_algo"), "pins no cuBLASLt algorithm"),
    (lambda d: d["entries"][0]["config"].update(math_mode="NOPE"), "configuration is malformed"),
    (lambda d: d["entries"][0]["config"].update(input_dtype="float16", output_dtype="float16"), "not the GEMM's"),
    (lambda d: d["entries"].append(d["entries"][0]), "a second entry"),
    (lambda d: d.update(entries={}), "entries: expected a list of objects"),
    (lambda d: d.update(version=1.0), "lock file format version 1.0; this cublas_det reads version 1"),
    (lambda d: d.update(version=True), "lock file format version true; this cublas_det reads version 1"),
    (lambda d: d["where"].update(gpu=""), "where.gpu: expected a non-empty string, found ''"),
    (lambda d: d["where"].update(sm_count=-132), "where.sm_count: expected an integer from 1 to 2..31 - 1, found -132"),
    (lambda d: d["entries"][0]["config"]["lt_algo"].update(algo_id=-1),
     "lt_algo.algo_id: expected an integer from 0 to 2..31 - 1, found -1"),
    (lambda d: d["entries"][0]["config"]["lt_algo"].update(algo_id=10 ** 30), "algo_id: expected an integer from 0"),
    (lambda d: d["entries"][0]["config"]["lt_algo"].update(tile=2 ** 63), "tile: expected an integer from 0 to 2..32 - 1"),
    (lambda d: d["entries"][0]["config"]["lt_algo"].update(cluster_shape=2 ** 16), "cluster_shape: .* to 2..16 - 1"),
    (lambda d: d["entries"][0]["config"].update(workspace_bytes=2 ** 62), "workspace_bytes: expected an integer from 0"),
    (lambda d: d["entries"][0]["config"].update(lt_sm_count_target=-1), "lt_sm_count_target: expected an integer"),
    (lambda d: d["entries"][0]["gemm"].update(batch=8), "a batch of 8 alone, from an older version; one entry now "
                                                        "serves every batch count: prescribe again"),
])
def test_a_malformed_lock_is_one_line(lock_path, mutate, says):
    data = json.load(open(lock_path))
    mutate(data)
    with open(lock_path, "w") as file:
        json.dump(data, file)
    with pytest.raises(InputFileError, match=says) as raised:
        lockfile.load(lock_path)
    assert "\n" not in str(raised.value)


def test_a_key_twice_is_refused_not_taken_last(lock_path):
    text = open(lock_path).read()
    with open(lock_path, "w") as file:
        file.write(text.replace('"entries":', '"entries": [], "entries":', 1))
    with pytest.raises(InputFileError, match='lock.json: the key "entries" appears twice in one object'):
        lockfile.load(lock_path)


def test_a_lock_larger_than_16_mib_that_prescribe_writes_reads_back(tmp_path):
    entry = _entry()
    entry = dataclasses.replace(entry, verified={**entry.verified, "detail": "checked " * 600})  # fewer, longer
    entries = [dataclasses.replace(entry, key=dataclasses.replace(entry.key, n=n)) for n in range(1, 4_001)]
    lock = lockfile.Lock(WHERE, {e.key: e for e in entries}, str(tmp_path / "lock.json"))
    lockfile.write(lock, lock.path)
    assert os.path.getsize(lock.path) > 16 << 20
    assert len(lockfile.load(lock.path).entries) == 4_000


def test_a_truncated_lock_is_one_line(lock_path):
    text = open(lock_path).read()
    with open(lock_path, "w") as file:
        file.write(text[: len(text) // 2])
    with pytest.raises(InputFileError, match="not JSON"):
        lockfile.load(lock_path)


@pytest.mark.parametrize("field, value", [("gpu", "NVIDIA H100 80GB HBM3"), ("cublas_version", "13.1.1"),
                                          ("sm_count", 114), ("compute_capability", "10.0")])
def test_a_lock_from_elsewhere_is_refused_naming_the_difference(lock_path, field, value):
    here = {**WHERE, field: value}
    with pytest.raises(lockfile.LockMismatch) as raised:
        lockfile.load(lock_path).check_here(here)
    text = str(raised.value)
    assert f"{WHERE[field]} there, {value} here" in text and "\n" not in text
    assert text.endswith("prescribe again on this machine (cublas-det prescribe --lock FILE)")
    lockfile.load(lock_path).check_here({**WHERE, "driver_version": "13.1"})  # another driver: the lock holds


def test_run_refuses_a_corrupt_lock_before_running_anything(typed, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "cublas_det.lock", "version": 1, "where": {}')
    marker = tmp_path / "ran"
    result = typed("cublas-det", "run", "--lock", bad, "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "not JSON" in result.stderr
    assert not marker.exists()


def test_run_without_a_command_and_bench_lock_without_prescribe_are_usage_errors(typed, lock_path):
    result = typed("cublas-det", "run", "--lock", lock_path)
    assert result.returncode == 2 and "give the command to run after --" in result.stderr
    result = typed("cublas-det", "bench", "--lock", lock_path)
    assert result.returncode == 2 and "add --prescribe" in result.stderr


def test_bench_prescribe_reads_an_existing_lock_before_the_gpu(typed, tmp_path):
    bad = tmp_path / "old.json"
    bad.write_text('{"format": "cublas_det.capture"}')
    result = typed("cublas-det", "bench", "--prescribe", "--lock", bad, "--shape", "64x64x64")
    assert result.returncode == 2 and "not a lock file" in result.stderr


def _python(env, code="print('ran')"):
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_entering_a_python_program_runs_the_task_then_the_shadowed_sitecustomize(tmp_path):
    (tmp_path / "task_module.py").write_text(
        "import os\ndef start():\n    open(os.environ['MARKER'], 'w').write('entered')\n"
        "def broken():\n    raise RuntimeError('no lock here')\n")
    (tmp_path / "sitecustomize.py").write_text("import os\nopen(os.environ['MARKER'] + '.user', 'w')\n")
    marker = tmp_path / "marker"
    env = python_env(["task_module:start", "task_module:broken"], {"MARKER": str(marker)})
    env["PYTHONPATH"] += os.pathsep + str(tmp_path)
    assert env["PYTHONPATH"].split(os.pathsep)[0] == SITE and env[TASKS_ENV] == "task_module:start,task_module:broken"
    result = _python(env)
    assert result.returncode == 0 and result.stdout == "ran\n"  # the program itself runs as it would
    assert marker.read_text() == "entered"
    assert (tmp_path / "marker.user").exists()  # the user's own sitecustomize still ran
    assert "task_module:broken not entered" in result.stderr and "no lock here" in result.stderr
    assert result.stderr.count("\n") == 1
    assert SITE not in _python(env, "import sys; print(sys.path)").stdout  # the program's path is its own


def test_entering_adds_nothing_to_a_program_whether_a_sitecustomize_is_shadowed_or_not(tmp_path):
    (tmp_path / "task_module.py").write_text("def start():\n    pass\n")
    env = python_env(["task_module:start"], {})
    env["PYTHONPATH"] += os.pathsep + str(tmp_path)
    result = _python(env, "import sys; print(sys.modules['sitecustomize'].__file__)")
    assert result.returncode == 0 and result.stderr == ""  # once "Error in sitecustomize ... KeyError"
    shadowed = importlib.machinery.PathFinder.find_spec("sitecustomize")  # Debian's Python has one of its own
    assert result.stdout.strip() == (shadowed.origin if shadowed else os.path.join(SITE, "sitecustomize.py"))


def test_a_task_waits_for_its_module_and_a_failure_goes_to_the_log_not_the_program(tmp_path):
    (tmp_path / "task_module.py").write_text(
        "import os, sys\ndef start():\n    open(os.environ['MARKER'], 'w').write(str('trigger' in sys.modules))\n"
        "def broken():\n    raise RuntimeError('no lock here')\n")
    (tmp_path / "trigger.py").write_text("VALUE = 7\n")
    marker, log = tmp_path / "marker", tmp_path / "enter.log"
    counted = tmp_path / "counted"
    counted.mkdir()
    env = python_env(["task_module:start@trigger", "task_module:broken@trigger"], {"MARKER": str(marker)},
                     log=str(log), count=str(counted))
    env["PYTHONPATH"] += os.pathsep + str(tmp_path)
    untouched = _python(env)  # never imports trigger: neither task runs, not even task_module is imported
    assert untouched.stdout == "ran\n" and untouched.stderr == "" and not marker.exists() and not log.exists()
    assert not list(counted.iterdir())
    result = _python(env, "import os, trigger; print(trigger.VALUE, trigger.__spec__.loader.__class__.__name__, "
                          "os.getpid())")
    value, loader, pid = result.stdout.split()
    assert result.returncode == 0 and (value, loader) == ("7", "SourceFileLoader") and result.stderr == ""
    # counted once, as the import began; the task that raised left why, for run to tell it from one killed
    assert sorted(p.name for p in counted.iterdir()) == [f"{pid}.entered", f"{pid}.failed"]
    assert (counted / f"{pid}.failed").read_text() == "RuntimeError: no lock here"
    assert marker.read_text() == "True"  # after the module ran, whole
    assert entry_failures(str(log)) == [line for line in log.read_text().splitlines()]
    (failure,) = entry_failures(str(log))
    assert failure.startswith("task_module:broken@trigger".split("@")[0] + " not entered in process")
    assert "no lock here" in failure


def test_the_report_names_what_fell_through_and_the_command_that_adds_it():
    one = LockReport({"Mx3352x768:tn bf16": 3}, {"Mx100x768:tn bf16": {
        "calls": 2, "reason": "not in the lock", "m": 4096, "spec": "4096x100x768:tn", "dtype": "bfloat16",
        "mode": "default"}}, "lock.json")
    two = LockReport({"Mx3352x768:tn bf16": 1}, {"Mx100x768:tn bf16": {
        "calls": 1, "reason": "not in the lock", "m": 8192, "spec": "8192x100x768:tn", "dtype": "bfloat16"}}, "")
    merged = LockReport.merge([one, two])
    assert merged.locked_calls == 4 and merged.fell_through_calls == 3
    text = str(merged)
    assert text.startswith("locked 4 calls of 1 GEMM; 3 calls of 1 GEMM fell through")
    assert "  add: cublas-det prescribe --lock lock.json \\" in text.splitlines()  # the command that writes locks
    assert "--shape 8192x100x768:tn --dtype bf16 --modes default" in text  # the largest M
    assert max(len(line) for line in text.splitlines()) <= 100


def test_each_process_report_is_written_as_one_line_and_read_back_checked(tmp_path):
    report = LockReport({"Mx3352x768:tn bf16": 3}, {"Mx100x768:tn bf16": {"calls": 2, "reason": "not in the lock"}},
                        "lock.json")
    report.write(str(tmp_path))
    (written,) = tmp_path.iterdir()
    assert written.name.endswith(".json") and written.read_text() == json.dumps(report.to_dict())
    (tmp_path / "results.json").write_text("the program's own file")  # not a report: not ours to read
    (tmp_path / "7.json.tmp7").write_text("{")
    assert LockReport.read(str(tmp_path)) == ([report], [])
    written.write_text(json.dumps({**report.to_dict(), "locked": {"x": -1}}))
    reports, unread = LockReport.read(str(tmp_path))  # a bad report is named, the others still count
    assert reports == [] and len(unread) == 1
    assert re.search(r"json: locked\['x'\]: expected an integer >= 0, found -1; a process", unread[0])


def test_the_lock_report_aligns_its_columns_and_names_each_source_whole():
    source = "g123 mamba2-2.7b/out_proj/forward"  # past 32 columns, and kept whole
    entries = [_entry(), dataclasses.replace(_entry(epilogue="BIAS"), source=source)]
    text = render_lock(lockfile.Lock(WHERE, {}, "lock.json").merged(entries), entries, [])
    header = next(line for line in text.splitlines() if line.startswith("  GEMM "))
    rows = [line for line in text.splitlines() if line.endswith("1.000 [0.990, 1.010]")]
    assert len(rows) == 2 and source in rows[1]
    assert {row.index("1.000 [") for row in rows} == {header.index("time vs heuristic")}
    assert max(map(len, text.splitlines())) <= 100 and text.startswith("Lock lock.json: 2 GEMMs locked now")
    assert render_lock(lockfile.Lock(WHERE, {}, "lock.json").merged(entries), entries[:1], []).startswith(
        "Lock lock.json: 1 GEMM locked now, 2 in the file, 0 could not be locked")


def _run_report(tmp_path, capsys, status=0, quiet=False):
    from types import SimpleNamespace

    from cublas_det.cli import run as run_cli

    run_cli._report("cublas-det run", SimpleNamespace(quiet=quiet, lock="lock.json"), str(tmp_path), status, [])
    return capsys.readouterr().err


def test_run_counts_each_process_that_entered_once_and_reads_only_its_own_reports(tmp_path, capsys):
    for pid, calls in ((101, 3), (102, 2)):
        LockReport({"Mx3352x768:tn bf16": calls}, {}, "lock.json").write(str(tmp_path))
        os.replace(next(p for p in tmp_path.glob(f"{os.getpid()}.json")), tmp_path / f"{pid}.json")
    for pid in (101, 102, 103):  # 103 entered and was killed before its report
        (tmp_path / f"{pid}.entered").touch()
    (tmp_path / "results.json").write_text("not ours")  # the program's own file in the folder
    (tmp_path / "104.json").write_text("{broken")  # a report that cannot be read: named, not fatal
    (tmp_path / "104.entered").touch()
    err = _run_report(tmp_path, capsys)
    assert "a report could not be read (process 104:" in err
    assert "cublas-det run: warning: 1 process left no report (killed, or os._exit): its calls are not counted" in err
    assert "cublas-det run: 4 processes\nlocked 5 calls of 1 GEMM" in err
    assert max(len(line) for line in err.splitlines() if "could not be read" not in line) <= 100  # that one: a path


def test_run_says_the_lock_could_not_start_and_why_not_killed_nor_no_gemm_while_it_was_on(tmp_path, capsys):
    """A CPU-only program, or a lock removed before the child starts: run said the process was "killed, or
    os._exit" and that no GEMM reached the lock "while it was on"."""
    (tmp_path / "301.entered").touch()
    (tmp_path / "301.failed").write_text("FileNotFoundError: /x/lock.json: no such file")
    err = unwrapped(_run_report(tmp_path, capsys))
    assert err == ("cublas-det run: warning: the lock could not start in 1 process, its GEMMs ran unlocked: "
                   "FileNotFoundError: /x/lock.json: no such file\n")
    LockReport({"Mx8x8:nn bf16": 2}, {}, "lock.json").write(str(tmp_path))  # another process, locked
    (tmp_path / f"{os.getpid()}.entered").touch()
    err = _run_report(tmp_path, capsys)
    assert "could not start in 1 process" in err and "killed" not in err
    assert "cublas-det run: 1 process\nlocked 2 calls of 1 GEMM" in err


def test_run_says_why_nothing_was_locked(tmp_path, capsys):
    err = _run_report(tmp_path, capsys, status=128 + 9)
    assert err == "cublas-det run: warning: locked nothing: signal 9 ended the command before it ran a GEMM\n"
    assert "locked nothing: no process ran a cuBLAS GEMM or imported torch" in _run_report(tmp_path, capsys)
    err = _run_report(tmp_path / "removed", capsys)  # the program removed the folder: said, no traceback
    assert err == "cublas-det run: warning: the program removed the report folder: no calls can be counted\n"


def test_a_report_of_nothing_says_why_and_a_compiled_template_is_named_with_the_cure():
    empty = str(LockReport({}, {}, "lock.json"))
    assert empty.splitlines()[1] == ("  no GEMM reached the lock: none ran as a CUDA mm, addmm, bmm or baddbmm "
                                     "while it was on")
    compiled = LockReport({"Mx256x256:nn bf16": 2}, {"mm 512x256 bf16": {
        "calls": 0, "reason": "compiled into a TritonTemplateBuffer", "m": 0, "compiled": True}}, "lock.json")
    text = str(compiled)
    assert text.startswith("locked 2 calls of 1 GEMM; 0 calls of 0 GEMMs fell through")
    assert "  mm 512x256 bf16: compiled into a TritonTemplateBuffer" in text.splitlines()
    assert 'torch._inductor.config.max_autotune_gemm_backends = "ATEN"' in text and "no GEMM reached" not in text
    assert max(len(line) for line in text.splitlines()) <= 100


# Every Python 3.10-3.13 this machine has, pyenv's and Debian's: sitecustomize must add nothing to any of them.
PYTHONS = sorted({path for path in (sys.executable, "/usr/bin/python3",
                                    *glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[0-3].*/bin/python3")))
                  if os.access(path, os.X_OK)})


@pytest.mark.parametrize("python", PYTHONS)
def test_run_and_capture_add_no_output_to_a_program_on_any_python(tmp_path, python):
    version = subprocess.run([python, "-c", "import sys; print(sys.version_info >= (3, 10))"], capture_output=True,
                             text=True).stdout.strip()
    if version != "True":
        pytest.skip(f"{python} is older than 3.10")
    log = tmp_path / "enter.log"
    env = python_env(["cublas_det.lock.boot:start@torch", "cublas_det.apilog.inprocess:start"], {}, log=str(log))
    env["PYTHONPATH"] += os.pathsep + os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run([python, "-c", "print('ran')"], env=env, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, "ran\n", "")
    assert "inprocess:start not entered" in log.read_text()  # no cuBLAS log pipe here: said in the log, not the output


def test_no_lock_is_written_that_its_readers_refuse(tmp_path, monkeypatch):
    key = lockfile.GemmKey("bfloat16", "bfloat16", "COMPUTE_32F", False, True, 3352, 768)
    config = GemmConfig(MathMode.DEFAULT, input_dtype="bfloat16", output_dtype="bfloat16", api="lt",
                        lt_algo=(("algo_id", 66),))
    lock = lockfile.Lock(WHERE, {key: lockfile.LockEntry(key, config, {"m": 4096})})
    path = tmp_path / "lock.json"
    lockfile.write(lock, str(path))
    monkeypatch.setattr(lockfile, "MAX_FILE_BYTES", path.stat().st_size - 1)  # one byte less than it takes
    with pytest.raises(UsageError, match=r"more than the .* a lock may be; lock fewer GEMMs a file"):
        lockfile.write(lock, str(tmp_path / "big.json"))
    assert not (tmp_path / "big.json").exists()


def test_each_forked_child_finishes_once_with_its_own_state(tmp_path):
    (tmp_path / "task_module.py").write_text(textwrap.dedent("""
        import os
        from cublas_det.base.enter import at_each_exit
        def start():
            mark = lambda what: open(os.path.join(os.environ["MARKS"], f"{os.getpid()}.{what}"), "a").write("x")
            at_each_exit(lambda: mark("finished"), lambda: mark("forked"))
    """))
    program = textwrap.dedent("""
        import multiprocessing as mp, os, sys
        def work(i):
            return i
        if __name__ == "__main__":
            with mp.get_context("fork").Pool(2) as pool:  # its workers end by os._exit, or killed
                print(sum(pool.map(work, range(4))))
                pool.close()
                pool.join()
            process = mp.get_context("fork").Process(target=work, args=(1,))
            process.start()
            process.join()
            if os.fork() == 0:
                sys.exit(0)  # a bare fork, ending as a program does
            os.wait()
    """)
    env = python_env(["task_module:start"], {"MARKS": str(tmp_path)})
    env["PYTHONPATH"] += os.pathsep + str(tmp_path)
    result = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, "6\n", "")
    marks = {}
    for path in tmp_path.glob("*.*ed"):
        marks.setdefault(path.suffix, {})[path.stem] = path.read_text()
    assert len(marks[".forked"]) == 4  # two pool workers, a Process, a bare fork
    assert len(marks[".finished"]) == 5 and set(marks[".finished"].values()) == {"x"}  # each, and the parent, once
    assert set(marks[".forked"]) < set(marks[".finished"])


def test_run_matches_reports_to_processes_by_pid_and_survives_a_folder_made_a_file(tmp_path, capsys):
    for pid in (5, 6):
        (tmp_path / f"{pid}.entered").touch()
    for pid in (5, 7):  # 7: a report of a process not counted (it never imported torch itself: a fork)
        (tmp_path / f"{pid}.json").write_text(json.dumps(LockReport({"Mx8x8:nn bf16": 1}, {}).to_dict()))
    assert "1 process left no report" in _run_report(tmp_path, capsys)  # 6, not 0 by counting
    folder = tmp_path / "folder"
    folder.write_text("the program's own file")
    assert "removed the report folder" in _run_report(folder, capsys)


def test_a_program_that_only_tries_to_import_the_module_is_not_counted(tmp_path):
    counted = tmp_path / "counted"
    counted.mkdir()
    env = python_env(["task_module:start@not_installed_anywhere"], {}, count=str(counted))
    result = _python(env, "try:\n    import not_installed_anywhere\nexcept ImportError:\n    print('without')")
    assert result.stdout == "without\n" and result.stderr == "" and not list(counted.iterdir())
