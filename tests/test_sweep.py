"""The per-device sweep, on fake worker processes (real subprocesses, no GPU)."""

import json
import subprocess
import sys

import pytest

from cublas_det.check import devices as _sweep
from cublas_det.check.worker import parent as worker_parent
from cublas_det.core.config import GemmConfig
from cublas_det.render import compare as report_compare
from cublas_det.store.run import run_from_dict
from cublas_det.render.sweep import render_sweep, sweep_summary
from cublas_det.store.results import sweep_to_json
from cublas_det.core.shapes import parse_shape

from .conftest import unwrapped

SHAPES = [parse_shape("128x56x4096:tn"), parse_shape("4096x56x128:nn")]
PEDANTIC, TF32 = GemmConfig.parse("pedantic"), GemmConfig.parse("tf32")
MODES = [PEDANTIC, TF32]

# A stand-in for `python -m cublas_det.check.worker`: answers like it, from the request on stdin.
# Device 1 computes other bits for one task; device 2 crashes; device 3 runs out of memory on one task.
# Scenarios: "modes" (a comparison) always finds other modes' bits; "sm-count" (a hazard) changes bits on
# device 0; "repeat" (a guarantee) gives other bits on device 4.
FAKE_WORKER = r"""
import json, sys
request = json.load(sys.stdin)
device = request["device"]
if device == 2:
    print("RuntimeError: CUDA error: an illegal memory access was encountered", file=sys.stderr)
    sys.exit(1)
KINDS = {"repeat": "guarantee", "sm-count": "hazard", "modes": "comparison"}
results = {}
for task in request["tasks"]:
    mode = task["config"]["name"]
    key = f"{task['shape']['spec']}|{mode}"
    if device == 3 and mode == "TF32":
        results[key] = {"error": "OutOfMemoryError: out of memory allocating 1024 bytes"}
        continue
    digest = ("odd" if device == 1 and key == "4096x56x128:nn|TF32" else "same") + key
    differ = {"modes": 1, "sm-count": 1 if device == 0 else 0, "repeat": 1 if device == 4 else 0}
    scenarios = [{"scenario": s, "kind": KINDS[s], "runs": 2, "differing_runs": differ[s]} for s in request["scenarios"]]
    results[key] = {"digest": digest, "rel_error": 1e-7, "scenarios": scenarios}
provenance = {"gpu": {"name": "Fake GPU", "compute_capability": "9.0", "sm_count": 132, "pci_bus_id": f"0000:{device}:00.0"},
              "cublas_version": "13.1.0", "driver_version": "13.0"}
json.dump({"results": results, "provenance": provenance, "elapsed_s": 0.5}, sys.stdout)
"""


@pytest.fixture
def fake_workers(monkeypatch):
    requests = []
    spawn = worker_parent.spawn

    def recording_spawn(request, env):
        requests.append(request)
        return spawn(request, env)

    monkeypatch.setattr(worker_parent, "worker_command", lambda: [sys.executable, "-c", FAKE_WORKER])
    monkeypatch.setattr(_sweep, "spawn", recording_spawn)
    return requests


def test_parse_devices():
    assert _sweep.parse_devices(["all"], 2) == [0, 1]
    assert _sweep.parse_devices(["0,1"], 4) == [0, 1]
    assert _sweep.parse_devices(["3", "1", "3"], 4) == [3, 1]
    with pytest.raises(ValueError, match=r"--devices: there is no device 2: this machine shows 1 GPU \(ids 0-0"):
        _sweep.parse_devices(["2"], 1)
    with pytest.raises(ValueError, match=r"this machine shows 2 GPUs \(ids 0-1"):
        _sweep.parse_devices(["5"], 2)
    with pytest.raises(ValueError, match="'gpu0' is not a device id"):
        _sweep.parse_devices(["gpu0"], 1)
    with pytest.raises(ValueError, match="no CUDA device visible"):
        _sweep.parse_devices(["all"], 0)


def test_devices_that_agree(fake_workers):
    runs = _sweep.run_sweep(SHAPES, [PEDANTIC], [0, 3], scenarios=["repeat"], repeats=5)
    assert [r.device for r in fake_workers] == [0, 3] and fake_workers[0].scenarios == ("repeat",)
    found = _sweep.agreements(SHAPES, [PEDANTIC], runs)
    assert all(a.agree and not a.scenario_failures for a in found) and not _sweep.sweep_failed(runs, found)
    text = render_sweep(runs, found)
    assert "0: Fake GPU, cc 9.0, 132 SMs, PCI 0000:0:00.0, cuBLAS 13.1.0, driver 13.0 (0.5 s)" in text
    assert "all 2 devices gave identical bits for all 2 shape/mode pairs" in text


def test_an_odd_device_a_crash_and_a_failed_task_are_each_named(fake_workers):
    runs = _sweep.run_sweep(SHAPES, MODES, [0, 1, 2, 3])
    found = {(a.shape.spec, a.mode_name): a for a in _sweep.agreements(SHAPES, MODES, runs)}
    odd = found[("4096x56x128:nn", "TF32")]
    assert odd.outliers == [1] and odd.majority == "same4096x56x128:nn|TF32" and not odd.agree
    assert odd.errors == {2: "worker exited with code 1: RuntimeError: CUDA error: an illegal memory access was "
                             "encountered", 3: "OutOfMemoryError: out of memory allocating 1024 bytes"}
    clean = found[("128x56x4096:tn", "PEDANTIC")]
    assert clean.outliers == [] and set(clean.digests) == {0, 1, 3} and 2 in clean.errors
    assert _sweep.sweep_failed(runs, list(found.values()))
    text = render_sweep(runs, list(found.values()))
    assert "2: error: worker exited with code 1: RuntimeError" in text  # the crash, with the others' results
    prose = [line for line in text.splitlines() if line.startswith("  ")]  # the devices and the summary
    wide = [line for line in render_sweep(runs, list(found.values()), width=160).splitlines()
            if line.startswith("  ")]
    assert max(map(len, prose)) <= 100 < max(map(len, wide)) <= 160  # as wide as every report
    assert "device 1 (Fake GPU, 132 SMs, cuBLAS 13.1.0): odd4096x56x" in text
    assert "4096x56x128:nn TF32: device 1 differs from the other devices" in text
    assert "device 2 gave no results" in text
    assert "device 3 could not run 2 shape/mode pairs, e.g. " in text
    summary = text[text.index("\nSummary\n"):].splitlines()
    assert max(map(len, summary)) <= 100 and "    memory allocating 1024 bytes" in summary
    one = _sweep.agreements(SHAPES[:1], MODES, runs)
    assert any(line.startswith("device 3 could not run 1 shape/mode pair, e.g. ") for line in sweep_summary(runs, one))


def test_sweep_json_carries_every_device_digest_and_compares_across_hosts(fake_workers):
    runs = _sweep.run_sweep(SHAPES, [PEDANTIC], [0, 1])
    found = _sweep.agreements(SHAPES, [PEDANTIC], runs)
    data = sweep_to_json(runs, found, {"gpu": {"name": "Fake GPU"}}, "2026-11-29T00:00:00+00:00", 1.0, "0.1.0",
                         sweep_summary(runs, found))
    entry = data["benchmarks"][0]
    assert entry["name"] == "128x56x4096:tn[PEDANTIC]" and entry["stats"]["rounds"] == 0  # not timed
    assert entry["extra_info"]["device_digests"] == {"0": "same128x56x4096:tn|PEDANTIC", "1": "same128x56x4096:tn|PEDANTIC"}
    assert [d["device_id"] for d in data["machine_info"]["devices"]] == [0, 1]
    json.dumps(data)
    run = run_from_dict(data, "a.json")
    comparison = report_compare.compare_runs(run, run_from_dict(data, "b.json"))
    assert comparison.exit_code == 0
    assert "128x56x4096:tn[PEDANTIC]: identical bits (2 devices in b.json, 2 in a.json)" in comparison.lines
    other = json.loads(json.dumps(data))
    other["benchmarks"][0]["extra_info"]["device_digests"]["1"] = "another"
    comparison = report_compare.compare_runs(run_from_dict(other, "a.json"), run)
    assert comparison.exit_code == 1 and any("bits DIFFER" in line for line in comparison.lines)


def test_one_device_is_said_to_compare_nothing(fake_workers):
    runs = _sweep.run_sweep(SHAPES, [PEDANTIC], [0])
    found = _sweep.agreements(SHAPES, [PEDANTIC], runs)
    text = render_sweep(runs, found)
    assert "1 device only" in text and "one device: nothing to compare across devices" in text
    assert not _sweep.sweep_failed(runs, found)


def test_hazards_and_modes_are_not_failures_but_a_broken_guarantee_is(fake_workers):
    runs = _sweep.run_sweep(SHAPES, MODES, [0, 1], scenarios=["repeat", "sm-count", "modes"])
    found = _sweep.agreements(SHAPES[:1], MODES, runs)
    assert not _sweep.sweep_failed(runs, found)  # --devices all --scenarios repeat modes no longer exits 1
    assert all(a.agree and not a.scenario_failures and a.findings == {0: ["sm-count"]} for a in found)
    summary = sweep_summary(runs, found)
    assert ("finding on device 0: bits changed under 1 hazard (sm-count) in 2 shape/mode pairs, as cuBLAS warns"
            in summary)
    assert not any("broke a guarantee" in line or "repeated runs" in line for line in summary)
    runs = _sweep.run_sweep(SHAPES, [PEDANTIC], [0, 4], scenarios=["repeat"])
    found = _sweep.agreements(SHAPES, [PEDANTIC], runs)
    assert _sweep.sweep_failed(runs, found) and found[0].scenario_failures == {4: ["repeat"]}
    assert ("device 4 broke a guarantee: other bits under repeat (documented as reproducible)"
            in sweep_summary(runs, found))


def test_collect_names_a_timeout_and_a_signal():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert worker_parent.collect(sleeper, timeout_s=0.5) == (None, "worker timed out after 0.5 s")
    killed = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    answer, error = worker_parent.collect(killed)
    assert answer is None and error.startswith("worker was killed by signal 9")


def test_devices_flag_errors_are_one_line_exit_2(tmp_path, typed):
    result = typed("python -m cublas_det.bench", "--devices", "all", "--plot", tmp_path / "x.png")
    assert result.returncode == 2 and "--plot draws times, and --devices does not time" in result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.gpu
def test_one_real_device_gives_the_digest_this_process_computes():
    from cublas_det import check_gemm

    shape = parse_shape("128x56x4096:tn")
    (run,) = _sweep.run_sweep([shape], MODES, [0], scenarios=["repeat"], repeats=5)
    assert run.error is None and run.provenance["gpu"]["sm_count"] > 0
    found = _sweep.agreements([shape], MODES, [run])
    here = {config.name: check_gemm(shape, config, scenarios=[]).digest for config in MODES}
    assert {a.mode_name: a.digests[0] for a in found} == here
    assert here["PEDANTIC"] != here["TF32"]  # TF32 really is another computation: the digests tell devices apart
    assert all(a.agree and not a.scenario_failures for a in found) and not _sweep.sweep_failed([run], found)


@pytest.mark.gpu
def test_devices_cli_on_this_machine(tmp_path):
    import cupy

    out = tmp_path / "sweep.json"
    result = subprocess.run([sys.executable, "-m", "cublas_det.bench", "--devices", "all", "--shape", "128x56x4096:tn",
                             "--modes", "pedantic", "tf32", "--json", str(out)], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr
    count = cupy.cuda.runtime.getDeviceCount()
    assert ("1 device only" if count == 1 else f"yes ({count}/{count})") in result.stdout
    data = json.loads(out.read_text())
    assert sorted(data["benchmarks"][0]["extra_info"]["device_digests"]) == [str(d) for d in range(count)]
    again = subprocess.run([sys.executable, "-m", "cublas_det.bench", "--devices", "0", "--shape", "128x56x4096:tn",
                            "--modes", "pedantic", "tf32", "--compare", str(out)], capture_output=True, text=True,
                           check=False)
    assert again.returncode == 0 and "128x56x4096:tn[TF32]: identical bits" in again.stdout
    missing = subprocess.run([sys.executable, "-m", "cublas_det.bench", "--devices", str(count), "--shape",
                              "128x56x4096:tn"], capture_output=True, text=True, check=False)
    assert missing.returncode == 2 and f"there is no device {count}" in missing.stderr
    assert len(unwrapped(missing.stderr).strip().splitlines()) == 1, missing.stderr  # one message, wrapped


def test_sweep_help_offers_no_timing_and_bench_help_does(typed):
    from cublas_det.cli.gemms import QUICK_REPEATS

    sweep = " ".join(typed("cublas-det sweep", "--help").stdout.split())
    bench = " ".join(typed("cublas-det bench", "--help").stdout.split())
    assert f"--quick {QUICK_REPEATS} repeats, no scenario that needs worker processes" in sweep
    assert "timing visits" not in sweep and f"--quick {QUICK_REPEATS} repeats, 2 timing visits a shape" in bench
