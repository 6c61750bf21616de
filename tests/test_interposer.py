"""The lock for any program (cublas_det/lock/interposer.c) on a machine without a GPU: stand-ins for libcuda,
libcublas and libcublasLt with their symbol names (tests/native/fake_cuda.c) log each GEMM they receive, and
tests/native/trainer.c calls them as a cudarc trainer does (dlopen + dlsym) and, built again, linked."""

import os
import pathlib
import subprocess
import sys

import pytest

from cublas_det.bindings.cublas import ComputeType
from cublas_det.core.key import GemmKey
from cublas_det.core.config import GemmConfig, MathMode
from cublas_det.lock import interposer
from cublas_det.lock import file as lockfile
from .conftest import unwrapped

NATIVE = pathlib.Path(__file__).resolve().parent / "native"
CC = interposer.compiler()
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler (cc, gcc or clang)")

# The small trainer's GEMMs (TRAINER_SMALL): Linear 64 -> 32 at T = 1, 2, 7, 16, 32, its dX and dW, and a
# strided batch of 2 (16 x 16 x 8) per handle: bf16 (DEFAULT math), fp32 under TF32 math, fp32 PEDANTIC.
FORWARD_BF16 = GemmKey("bfloat16", "bfloat16", "COMPUTE_32F", False, True, 32, 64)  # any M
FORWARD_TF32 = GemmKey("float32", "float32", "COMPUTE_32F_FAST_TF32", False, True, 32, 64)
DW_FP32 = GemmKey("float32", "float32", "COMPUTE_32F", True, False, 64, 32, m=32)  # its M alone
ALGO = {FORWARD_BF16: 41, FORWARD_TF32: 42, DW_FP32: 43}


def _cc(*args):
    subprocess.run([CC, *map(str, args)], check=True, capture_output=True)


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    """The stand-in libraries, the trainer built both ways, the lookup probe, and the interposer (by build())."""
    folder = tmp_path_factory.mktemp("native")
    source = NATIVE / "fake_cuda.c"
    _cc("-shared", "-fPIC", "-DCUDA", "-o", folder / "libcuda.so.1", source)
    _cc("-shared", "-fPIC", "-DCUBLASLT", "-Wl,-soname,libcublasLt.so.99", "-o", folder / "libcublasLt.so.99", source)
    _cc("-shared", "-fPIC", "-DCUBLAS", "-Wl,-soname,libcublas.so.99", "-o", folder / "libcublas.so.99", source)
    _cc("-O2", "-o", folder / "trainer", NATIVE / "trainer.c", "-ldl")
    _cc("-O2", "-DLINKED", "-o", folder / "trainer_linked", NATIVE / "trainer.c", "-ldl", f"-L{folder}",
        "-l:libcublas.so.99", f"-Wl,-rpath,{folder}")
    lookups = NATIVE / "lookups.c"
    _cc("-shared", "-fPIC", "-DWRAP", "-o", folder / "libwrap.so", lookups, "-ldl")
    _cc("-shared", "-fPIC", "-DBASE", "-o", folder / "libbase.so", lookups)
    _cc("-o", folder / "lookups", lookups, f"-L{folder}", "-Wl,--no-as-needed", "-lwrap", "-lbase", "-ldl",
        f"-Wl,-rpath,{folder}")
    return folder, interposer.build(str(folder / "cache"))


def _lock(path):
    entries = {key: lockfile.LockEntry(key, GemmConfig(MathMode.DEFAULT, input_dtype=key.input_dtype,
                                                       output_dtype=key.output_dtype,
                                                       compute_type=ComputeType[key.compute_type], api="lt",
                                                       lt_algo=(("algo_id", ALGO[key]), ("tile", 7))),
                                       {"m": key.m or 32}) for key in ALGO}
    where = {"gpu": "stand-in", "sm_count": 132, "compute_capability": "9.0", "cublas_version": "13.1.0"}
    return lockfile.Lock(where, entries, str(path))


def _environment(native, folder, table=True):
    libs, preload = native
    env = dict(os.environ, LD_LIBRARY_PATH=str(libs), TRAINER_SMALL="1", TRAINER_CUBLAS=str(libs / "libcublas.so.99"),
               FAKE_LOG=str(folder / "fake.log"), LD_PRELOAD=preload, CUBLAS_DET_LOCK_REPORT=str(folder))
    if table:
        keys = interposer.write_table(_lock(folder / "lock.json"), str(folder / "table.txt"))
        env[interposer.TABLE_ENV] = str(folder / "table.txt")
        return env, keys
    return env, []


def _received(folder) -> dict:
    """What the stand-ins received: {"lt 41": calls, "cublas cublasGemmEx": calls ...}."""
    counts: dict = {}
    for line in (folder / "fake.log").read_text().splitlines():
        what = line.rsplit(" ", 1)[0] if line.startswith("cublas ") else line
        counts[what] = counts.get(what, 0) + 1
    return counts


@pytest.mark.parametrize("build", ["trainer", "trainer_linked"])
def test_locked_calls_run_the_pinned_algorithm_and_the_rest_are_counted(native, tmp_path, build):
    env, keys = _environment(native, tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run([str(native[0] / build), str(out)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # nothing added to the program's output
    received = _received(tmp_path)
    # bf16 forward at 5 token counts; TF32 forward at 5 (its handle is in TF32 math); the PEDANTIC dW at M = 32.
    assert received.pop("lt 41") == 5 and received.pop("lt 42") == 5 and received.pop("lt 43") == 1
    assert received == {"cublas cublasGemmEx": 2, "cublas cublasGemmStridedBatchedEx": 1,
                        "cublas cublasSgemm_v2": 8, "cublas cublasSgemmStridedBatched": 2}
    (report,), entered, unread = interposer.read_reports(str(tmp_path), keys, "lock.json")
    assert not unread and len(entered) == 1
    assert report.locked == {str(FORWARD_BF16): 5, str(FORWARD_TF32): 5, str(DW_FP32): 1}
    assert report.fell_through_calls == 13
    # The PEDANTIC forward is not the TF32 entry's: it fell through, named as the capture would name it.
    item = report.fell_through["Mx32x64:tn fp32"]
    assert item == {"calls": 5, "reason": "not in the lock", "m": 32, "spec": "32x32x64:tn", "dtype": "float32",
                    "mode": "default"}
    assert "add: cublas-det prescribe --lock lock.json" in str(report)


def test_a_table_row_holds_the_math_modes_the_capture_gives_the_key(tmp_path):
    keys = interposer.write_table(_lock(tmp_path / "lock.json"), str(tmp_path / "table.txt"))
    rows = [line.split() for line in (tmp_path / "table.txt").read_text().splitlines() if line.startswith("row")]
    by_entry = {}
    for row in rows:
        by_entry.setdefault(keys[int(row[1])], []).append((int(row[4]), int(row[5])))  # compute, math modes
    lt = 1 << interposer.LT_CALL
    # TF32 is COMPUTE_32F under TF32 math (bit 3), or COMPUTE_32F_FAST_TF32 asked for in any mode and by cuBLASLt.
    assert sorted(by_entry[FORWARD_TF32]) == [(68, 1 << 3), (77, 1 | 4 | 8 | lt)]
    # fp32 COMPUTE_32F: DEFAULT and PEDANTIC math, and cuBLASLt; never TF32 math.
    assert by_entry[DW_FP32] == [(68, 1 | 4 | lt)]
    # bf16: TF32 math has no effect on it, so every mode gives the key.
    assert by_entry[FORWARD_BF16] == [(68, 1 | 4 | 8 | lt)]


def test_other_lookups_pass_through_and_rtld_next_stays_the_callers(native, tmp_path):
    env, _ = _environment(native, tmp_path)
    libs = native[0]
    done = subprocess.run([str(libs / "lookups"), str(libs / "libcublas.so.99"), str(libs / "libcublasLt.so.99")],
                          env=env, capture_output=True, text=True, check=True)
    found = dict(line.split() for line in done.stdout.splitlines())
    ours = os.path.basename(native[1])
    assert found["cublasGemmEx"] == found["cublasSgemm_v2"] == found["cublasLtMatmul"] == ours
    assert found["cublasGetMathMode"] == found["cublasDgemm_v2"] == "libcublas.so.99"
    assert found["cublasLtMatmulDescCreate"] == "libcublasLt.so.99"
    assert found["next_shared_name"] == "2"  # libbase's: the lookup began after libwrap, its caller


def test_the_rtld_next_check_catches_a_dlsym_that_is_not_a_tail_call(native, tmp_path):
    """The check above fails for an interposer whose dlsym calls the real one from a frame of its own."""
    broken = tmp_path / "broken.so"
    _cc("-O0", "-fPIC", "-shared", "-o", broken, interposer.SOURCE, "-ldl", "-lpthread")
    env, _ = _environment(native, tmp_path)
    env["LD_PRELOAD"] = str(broken)
    libs = native[0]
    done = subprocess.run([str(libs / "lookups"), str(libs / "libcublas.so.99"), str(libs / "libcublasLt.so.99")],
                          env=env, capture_output=True, text=True, check=True)
    assert "next_shared_name 1" in done.stdout.splitlines()


def test_without_a_table_every_call_passes_through_uncounted(native, tmp_path):
    env, _ = _environment(native, tmp_path, table=False)
    (tmp_path / "out").mkdir()
    subprocess.run([str(native[0] / "trainer"), str(tmp_path / "out")], env=env, check=True)
    assert not any(name.startswith("lt") for name in _received(tmp_path))
    assert not list(tmp_path.glob("*.cublas.json"))


def test_a_process_whose_pytorch_lock_took_over_is_left_alone(native, tmp_path):
    """cublas_det.torch's boot calls cublas_det_stand_aside: that process's cuBLAS calls are neither
    locked nor counted, so no call is locked or counted twice."""
    env, _ = _environment(native, tmp_path)
    code = ("import ctypes, sys; ctypes.CDLL(None).cublas_det_stand_aside(); "
            "lib = ctypes.CDLL(sys.argv[1]); h = ctypes.c_void_p(); lib.cublasCreate_v2(ctypes.byref(h)); "
            "lib.cublasGemmEx(h, 1, 0, 32, 7, 64)")
    subprocess.run([sys.executable, "-c", code, str(native[0] / "libcublas.so.99")], env=env, check=True)
    assert _received(tmp_path) == {"cublas cublasGemmEx": 1}
    assert not list(tmp_path.glob("*.cublas.json"))


def test_without_a_c_compiler_the_interposer_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(interposer.NoCompiler, match="no C compiler") as refused:
        interposer.build(str(tmp_path / "cache"))
    assert "\n" not in str(refused.value)


def test_run_locks_a_program_that_is_not_python_and_reports_it(native, tmp_path, monkeypatch, capsys):
    from cublas_det.cli import main

    lock = _lock(tmp_path / "lock.json")
    lockfile.write(lock, str(tmp_path / "lock.json"))
    monkeypatch.setattr(lockfile.Lock, "check_here", lambda self, here=None: None)  # no GPU to match here
    monkeypatch.setattr(interposer, "build", lambda folder=None: native[1])
    libs = native[0]
    for name, value in (("LD_LIBRARY_PATH", str(libs)), ("TRAINER_SMALL", "1"), ("FAKE_LOG", str(tmp_path / "f")),
                        ("TRAINER_CUBLAS", str(libs / "libcublas.so.99"))):
        monkeypatch.setenv(name, value)
    (tmp_path / "out").mkdir()
    monkeypatch.chdir(tmp_path)
    status = main(["run", "--lock", "lock.json", "--", str(libs / "trainer"), "out"])
    err = capsys.readouterr().err
    assert status == 0, err
    assert "run: 1 process\nlocked 11 calls of 3 GEMMs; 13 calls of 9 GEMMs fell through\n" in err
    assert "Mx32x64:tn fp32: 5 calls, not in the lock" in err
    assert max(map(len, err.splitlines())) <= 100


def test_run_without_a_c_compiler_refuses_a_program_that_is_not_python(tmp_path, monkeypatch, capsys):
    from cublas_det.cli import main

    lockfile.write(_lock(tmp_path / "lock.json"), str(tmp_path / "lock.json"))
    monkeypatch.setattr(lockfile.Lock, "check_here", lambda self, here=None: None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    status = main(["run", "--lock", str(tmp_path / "lock.json"), "--", "./trainer"])
    err = unwrapped(capsys.readouterr().err).strip().splitlines()
    assert status == 2 and len(err) == 1 and "no C compiler" in err[0], err


LT_PROGRAM = """
import ctypes, sys
lt = ctypes.CDLL(sys.argv[1])  # found through dlsym, as XLA's own cuBLASLt calls are
def made(name, *args):
    value = ctypes.c_void_p()
    assert getattr(lt, name)(ctypes.byref(value), *args) == 0
    return value
def call(m, n, k, order=0):  # a column-major C = op(A)[m, k] op(B)[k, n]: A transposed, as x @ w.T is
    desc = made("cublasLtMatmulDescCreate", 77, 0)  # COMPUTE_32F_FAST_TF32, scale R_32F
    one = ctypes.c_int32(1)
    lt.cublasLtMatmulDescSetAttribute(desc, 3, ctypes.byref(one), 4)  # TRANSA = T
    a, b, c = made("cublasLtMatrixLayoutCreate", 0, k, m, k), made("cublasLtMatrixLayoutCreate", 0, k, n, k), \\
        made("cublasLtMatrixLayoutCreate", 0, m, n, m)
    row = ctypes.c_int32(order)
    lt.cublasLtMatrixLayoutSetAttribute(a, 1, ctypes.byref(row), 4)
    algo = (ctypes.c_int64 * 8)(7)  # the caller's own choice: algorithm 7
    buffer = ctypes.create_string_buffer(1 << 16)
    pointer = (ctypes.addressof(buffer) + 255) // 256 * 256
    lt.cublasLtMatmul(None, desc, None, ctypes.c_void_p(pointer), a, ctypes.c_void_p(pointer), b, None,
                      ctypes.c_void_p(pointer), c, ctypes.c_void_p(pointer), c, algo, None, 0, None)
call(32, 7, 64)          # x[:7] @ w.T, TF32: the lock's FORWARD_TF32, any M
call(32, 16, 64)         # the same GEMM at another M: the same entry
call(32, 7, 64, order=1) # A row-major: not what the key describes
call(48, 7, 64)          # another N: not in the lock
"""


def test_a_programs_own_cublaslt_call_runs_the_pinned_algorithm(native, tmp_path):
    env, keys = _environment(native, tmp_path)
    subprocess.run([sys.executable, "-c", LT_PROGRAM, str(native[0] / "libcublasLt.so.99")], env=env, check=True)
    # Locked: the pinned algorithm with the lock's workspace; the others untouched (their algorithm, no workspace).
    assert _received(tmp_path) == {"lt 42": 2, "lt-no-workspace 7": 2}
    (report,), _, _ = interposer.read_reports(str(tmp_path), keys, "lock.json")
    assert report.locked == {str(FORWARD_TF32): 2}
    reasons = sorted(item["reason"] for item in report.fell_through.values())
    assert reasons == ["a row-major or tiled layout", "not in the lock"]
