"""One GEMM from a captured cuBLAS log line to a locked torch call: the modules its record passes through, the
layout conversions it crosses and the cuBLASLt plans it costs, counted as the call runs."""

import contextlib
import dataclasses
import gzip
import importlib
import json
import pkgutil
import sys
from pathlib import Path

import pytest

import cublas_det
from cublas_det.core import plan as plan_module
from cublas_det.core import shapes

LOG = Path(__file__).parent / "data" / "capture" / "block.cublas.log.gz"  # a Mamba2 block's step, logged by cuBLAS
MAX_MODULES = 12
# Below the parts: the ground every module stands on (errors, words, integers, the schema, dtypes) and the C
# libraries' bindings, which hold no record of a GEMM.
GROUND = ("base/", "bindings/")


def _import_all() -> None:
    """Every module imported first, so that the trace sees the path's calls, not a module's first import."""
    for info in pkgutil.walk_packages(cublas_det.__path__, "cublas_det.", onerror=lambda name: None):
        if info.name.endswith("__main__"):  # an entry point runs as it imports
            continue
        with contextlib.suppress(Exception):
            importlib.import_module(info.name)


@contextlib.contextmanager
def _modules_called(into: dict, conversions: list):
    """Each cublas_det module whose functions run inside the block, with the code of each call; the arguments
    of each layout conversion (``other_layout``: m, n, k and the two transposes)."""
    root = str(Path(cublas_det.__file__).parent) + "/"
    convert = shapes.other_layout.__code__

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(root):
            into.setdefault(frame.f_code.co_filename[len(root):], []).append(frame.f_code)
            if frame.f_code is convert:
                conversions.append(tuple(frame.f_locals[name] for name in convert.co_varnames[:5]))

    before = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield into
    finally:
        sys.setprofile(before)


def _logged(gemm_id: str | None = None):
    """The capture of the stored log, through its file, and one of its GEMMs replayed: the first bf16 GEMM of one
    matrix, or ``gemm_id``."""
    from cublas_det.apilog import file as capture_file
    from cublas_det.apilog.model import Capture
    from cublas_det.apilog.parse import CublasLogParser

    capture = Capture()
    parser = CublasLogParser(capture, str(LOG))
    with gzip.open(LOG) as log:
        parser.feed(log.read())
    parser.close()
    stored = json.loads(json.dumps(capture_file.to_dict(capture, complete=True)))
    replay = next(p for p in capture_file.from_data(stored, "capture.json").plans
                  if p.gemm_id == gemm_id or gemm_id is None and p.replayed and p.shape.batch == 1
                  and p.config.input_dtype == "bfloat16")
    return capture, replay


def _conversions_of(replay, conversions: list) -> tuple[list, list]:
    """The conversions of ``replay``'s GEMM: column-major call to row-major key, and back."""
    d, shape = replay.definition, replay.shape
    captured = (d.m, d.n, d.k, d.transa != "N", d.transb != "N")
    row_major = (shape.m, shape.n, shape.k, shape.trans_a, shape.trans_b)
    return [c for c in conversions if c == captured], [c for c in conversions if c == row_major]


def test_a_logged_gemm_becomes_its_lock_entry_through_few_modules_and_one_conversion(tmp_path):
    """The half without a GPU: log line, capture file, key, lock file and back."""
    from cublas_det.check.cures import lt_config
    from cublas_det.core.key import GemmKey
    from cublas_det.lock import file as lockfile

    _import_all()
    where = {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "compute_capability": "9.0",
             "cublas_version": "13.1.0", "driver_version": "13.0"}
    _, first = _logged()
    pinned = dataclasses.replace(lt_config(first.config), lt_algo={"algo_id": 1})  # as prescribe pins one
    called: dict = {}
    conversions: list = []
    with _modules_called(called, conversions):
        capture, replay = _logged(first.gemm_id)
        key = GemmKey.of(replay.shape, replay.config)
        entry = lockfile.LockEntry(key, pinned, {"m": replay.shape.m}, None, replay.gemm_id)
        path = str(tmp_path / "lock.json")
        lockfile.write(lockfile.Lock(where, {key: entry}, path), path)
        back = lockfile.load(path)
    assert back.entry_for(key, replay.shape.m) == entry
    parts = sorted(m for m in called if not m.startswith(GROUND))
    assert parts == ["apilog/file.py", "apilog/findings.py", "apilog/model.py", "apilog/parse.py",
                     "core/config.py", "core/definition.py", "core/key.py", "core/shapes.py", "lock/file.py"], parts
    to_key, to_call = _conversions_of(replay, conversions)
    assert len(to_key) == 1 and not to_call, conversions
    assert len(capture.gemms) == len(conversions)  # each GEMM of the capture turned once, none back


@pytest.mark.gpu
def test_a_logged_gemm_reaches_a_locked_torch_call_through_few_modules_one_conversion_one_plan(tmp_path):
    torch = pytest.importorskip("torch")
    from cublas_det.core.device import fingerprint
    from cublas_det.core.key import GemmKey
    from cublas_det.lock import file as lockfile
    from cublas_det.prescribe import lock_entries
    import cublas_det.torch as cdt

    _import_all()
    # What prescribe verifies, once, as `cublas-det prescribe --capture` does for this GEMM (not on the record's
    # path: it runs the GEMM under every hazard to decide).
    _, replay = _logged()
    entries, refused = lock_entries([replay.shape], [replay.config],
                                    timing={"min_visits": 2, "max_visits": 2, "budget_s": 0.2})
    assert entries and not refused, refused
    lock_path = str(tmp_path / "lock.json")
    lockfile.write(lockfile.Lock(lockfile.where_here(fingerprint()), {}, lock_path).merged(entries), lock_path)
    plans_before = plan_module.plans_made()
    a = torch.randn(replay.shape.a_shape, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(replay.shape.b_shape, device="cuda", dtype=torch.bfloat16)
    a, b = (a.mT if replay.shape.trans_a else a), (b.mT if replay.shape.trans_b else b)

    called: dict = {}
    conversions: list = []
    with _modules_called(called, conversions):
        # the record's path: the log line, the capture file, the key, the lock file, the router's plan
        _, again = _logged(replay.gemm_id)
        key = GemmKey.of(again.shape, again.config)
        with cdt.lock(lock_path, report=None) as router:
            out = torch.mm(a, b)
    report = router.last_report
    assert report.locked_calls == 1 and not report.fell_through, str(report)
    assert lockfile.load(lock_path).entry_for(key, again.shape.m) is not None
    parts = sorted(m for m in called if not m.startswith(GROUND))
    print("the record's path:", {m: sorted({c.co_name for c in called[m]}) for m in sorted(called)})
    assert len(parts) <= MAX_MODULES, f"{len(parts)} modules: {parts}"
    # One conversion between cuBLAS's column-major call and the row-major key, crossed once each way for this
    # GEMM: the captured call into its key, the key into the call cuBLASLt runs.
    to_key, to_call = _conversions_of(again, conversions)
    assert len(to_key) == 1 and len(to_call) == 1, conversions
    # One plan per GEMM per process: the router makes at most the one plan of this call (none where prescribe's
    # timing planned this very definition in this process), and another lock's router makes none.
    made = plan_module.plans_made()
    print("plans the router made:", made - plans_before)
    assert made - plans_before <= 1
    with cdt.lock(lock_path, report=None):
        again_out = torch.mm(a, b)
    assert plan_module.plans_made() == made
    assert torch.equal(out.view(torch.int16), again_out.view(torch.int16))
