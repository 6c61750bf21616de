"""Capture reads a Python program's cuBLAS calls inside it, each thread's whole: on a GPU."""

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.gpu

PROGRAM = textwrap.dedent("""
    import threading
    import cupy
    from cublas_det import create_handle, gemm

    def work(i):
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            with create_handle("pedantic", stream=stream) as handle:
                a = cupy.ones((256, 128 + i), dtype=cupy.float32)
                b = cupy.ones((128 + i, 64), dtype=cupy.float32)
                for _ in range(3):
                    gemm(a, b, handle=handle)
                stream.synchronize()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
""")


def test_four_threads_calling_at_once_lose_no_call(tmp_path):
    program = tmp_path / "threads.py"
    program.write_text(PROGRAM)
    out = tmp_path / "capture.json"
    result = subprocess.run([sys.executable, "-m", "cublas_det", "capture", "--out", str(out), "--", sys.executable,
                             str(program)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert data["calls"] == 12 and len(data["gemms"]) == 4, result.stdout
    assert not data["dropped_calls"] and "interleave" not in json.dumps(data["notes"]), result.stdout
    assert len({site["thread"] for gemm in data["gemms"] for site in gemm["sites"]}) == 4
