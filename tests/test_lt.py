"""The cuBLASLt path: its ctypes layer and configurations without a GPU; its GEMMs on one."""

import ctypes
import dataclasses
import itertools
import re

import pytest

from cublas_det.base.dtypes import GEMM_TYPES
from cublas_det.bindings import cublaslt as _cublaslt
from cublas_det.bindings.cublas import HALF_SCALAR_COMPUTE, ComputeType, MathMode
from cublas_det.core.config import COMPUTE_TYPES, GemmConfig
from cublas_det.core.definition import GemmDefinition, InvalidGemm
from cublas_det.core.key import GemmKey, key_of
from cublas_det.core import plan as plan_module
from cublas_det.core.plan import LtPlan
from cublas_det.core.shapes import parse_shape


def test_the_lt_structures_have_cublasLt_h_sizes():
    assert ctypes.sizeof(_cublaslt.MatmulAlgo) == 64  # uint64_t data[8]
    assert ctypes.sizeof(_cublaslt.HeuristicResult) == 96  # algo, size_t, status, float, int[4]


def test_lt_configurations_parse_name_and_round_trip():
    cases = {"default+lt": "DEFAULT/lt", "pedantic+lt-nosplitk": "PEDANTIC/lt-nosplitk",
             "tf32+lt-sm16": "TF32/lt-sm16", "default+lt-nosplitk-sm16": "DEFAULT/lt-nosplitk-sm16"}
    for text, name in cases.items():
        config = GemmConfig.parse(text)
        assert config.name == name and config.api == "lt" and GemmConfig.from_dict(config.to_dict()) == config
    pinned = GemmConfig(api="lt", lt_algo={"algo_id": 20, "splitk": 66}, lt_epilogue="BIAS", input_dtype="bfloat16",
                        output_dtype="bfloat16")
    assert re.fullmatch(r"PEDANTIC/lt-pin20k66\.[0-9a-f]{6}-bias/bfloat16->bfloat16", pinned.name), pinned.name
    other = GemmConfig(api="lt", lt_algo={"algo_id": 20, "splitk": 33}, lt_epilogue="BIAS", input_dtype="bfloat16",
                       output_dtype="bfloat16")
    assert other.name != pinned.name  # two pinned algorithms never share a name
    assert GemmConfig.from_dict(pinned.to_dict()) == pinned
    for bad in ({"lt_algo": {"splitk": 4}}, {"lt_algo": {"algo_id": "20"}}, {"lt_sm_count_target": -3},
                {"lt_sm_count_target": True}, {"lt_reduction_scheme_mask": "0"}, {"lt_reduction_scheme_mask": 9},
                {"algo": 99}):
        with pytest.raises(ValueError):
            GemmConfig(api="lt", **bad)
    with pytest.raises(ValueError, match="lt_algo must be an object"):
        GemmConfig.from_dict({**pinned.to_dict(), "lt_algo": [["algo_id", 20]]})
    for bad in ("default+lt-fast", "default+lt+lt", "bf16x9+lt", "default+disallow-rpr+lt"):
        with pytest.raises(ValueError, match=re.escape(repr(bad))):
            GemmConfig.parse(bad)
    with pytest.raises(ValueError, match="need api='lt'"):
        GemmConfig(lt_sm_count_target=16)


# The row-major 128x56x4096 dW GEMM below, fp32 in and out, packed, as cuBLASLt runs it (only read for the plan)
DW = GemmKey("float32", "float32", "COMPUTE_32F", True, False, 56, 4096, m=128).packed()


@pytest.mark.gpu
def test_lt_gemms_match_float64_and_a_pinned_algorithm_keeps_its_bits_under_other_sm_counts():
    import cupy

    from cublas_det import create_handle, gemm

    rng = cupy.random.default_rng(0)
    a = rng.standard_normal((4096, 128), dtype=cupy.float32)  # a dW GEMM: op(a) = a.T
    b = rng.standard_normal((4096, 56), dtype=cupy.float32)
    want = a.astype(cupy.float64).T @ b.astype(cupy.float64)
    with create_handle("default") as handle:
        gemm_ex = gemm(a, b, handle=handle, trans_a=True)
    with create_handle("default+lt") as handle:
        out = gemm(a, b, handle=handle, trans_a=True)
        algo = handle.lt.algorithm(DW)
    assert float(abs(out - want).max() / abs(want).max()) < 1e-5
    assert cupy.array_equal(out.view(cupy.uint32), gemm_ex.view(cupy.uint32))  # the heuristic's first choice
    with create_handle(GemmConfig(api="lt", lt_algo=algo)) as handle:
        handle.sm_count_target = 16
        pinned = gemm(a, b, handle=handle, trans_a=True)
    assert cupy.array_equal(out.view(cupy.uint32), pinned.view(cupy.uint32))
    with create_handle("default+lt-nosplitk") as handle:
        handle.sm_count_target = 16
        algo = dict(handle.lt.algorithm(DW, 16))
        assert algo["splitk"] <= 1 and algo["reduction_scheme"] == 0  # no split-K


@pytest.mark.gpu
def test_the_bias_epilogue_adds_the_bias_and_refuses_a_wrong_one():
    import cupy

    from cublas_det import create_handle, gemm

    rng = cupy.random.default_rng(1)
    x = rng.standard_normal((512, 64), dtype=cupy.float32)
    w = rng.standard_normal((96, 64), dtype=cupy.float32)
    bias = rng.standard_normal(96, dtype=cupy.float32)
    with create_handle(GemmConfig(api="lt", lt_epilogue="BIAS")) as handle:
        out = gemm(x, w, handle=handle, trans_b=True, bias=bias)
        with pytest.raises(ValueError, match="bias must be a vector of 96"):
            gemm(x, w, handle=handle, trans_b=True, bias=bias[:5])
    assert float(abs(out - (x.astype(cupy.float64) @ w.astype(cupy.float64).T + bias)).max()) < 1e-3
    with create_handle("default") as handle, pytest.raises(ValueError, match="needs a cuBLASLt handle"):
        gemm(x, w, handle=handle, trans_b=True, bias=bias)


def _ratio(median, low, high):
    from cublas_det.results.stats import Ratio

    return Ratio("cure", "base", median, low, high, 24)


def test_the_prescriptions_report_names_the_cheapest_verified_cure_and_the_failures():
    from cublas_det.prescribe import Cure, Prescription
    from cublas_det.render.prescribe import render_prescriptions
    from cublas_det.core.shapes import parse_shape

    shape = parse_shape("128x56x4096:nt")
    base = GemmConfig()
    pinned = GemmConfig(api="lt", lt_algo={"algo_id": 20})
    nosplit = GemmConfig(api="lt", lt_reduction_scheme_mask=0)
    sm = Prescription(shape, base, "sm-count", (
        Cure("cuBLASLt without split-K", nosplit, True, "same bits under SM counts 16-116", _ratio(1.8, 1.7, 1.9)),
        Cure("pin the cuBLASLt algorithm", pinned, True, "same bits under SM counts 16-116", _ratio(1.003, 1.001, 1.005),
             keeps_bits=True),
        Cure("BF16X9 math", GemmConfig(math_mode=4), False, "bits still change under SM counts 16-116: 66 SMs: 3 differ")))
    batch = Prescription(shape, base, "batch-invariance", (
        Cure("pin the cuBLASLt algorithm", pinned, False, "bits still change for every row count m checked"),))
    assert sm.best.label == "pin the cuBLASLt algorithm" and batch.best is None
    text = render_prescriptions([sm, batch], 132, (132, 114))
    assert "cure: pin the cuBLASLt algorithm: same bits under SM counts 16-116; +0.3% [+0.1%, +0.5%]; keeps" in text
    assert "also: cuBLASLt without split-K: +80.0% [+70.0%, +90.0%]" in text
    assert "failed: BF16X9 math: bits still change" in text and "no verified cure among those tried" in text
    assert "1 of 2 hazards cured" in text and max(map(len, text.splitlines())) <= 100
    assert sm.to_dict()["best"] == "pin the cuBLASLt algorithm"
    hint = "--kernels adds to each failed cure the kernel change behind it"
    assert hint in text and hint not in render_prescriptions([sm, batch], 132, (132, 114), kernels=True)


@pytest.mark.gpu
def test_prescribe_cures_the_sm_count_hazard_of_a_split_k_dw_gemm():
    from cublas_det.prescribe import prescribe
    from cublas_det.core.shapes import parse_shape

    shape = parse_shape("128x56x4096:nt")  # split-K on the H200: 66 at 132 SMs, other splits below
    found, problems = prescribe([shape], [GemmConfig()], quick=True,
                                timing={"min_visits": 2, "max_visits": 2, "budget_s": 0.1})
    assert problems == []
    sm = [p for p in found if p.hazard == "sm-count"]
    if not sm:
        pytest.skip("this GPU's kernel for the shape does not change bits with the SM count")
    best = sm[0].best
    assert best is not None and best.verified and best.ratio is not None, sm[0]
    pinned = next(c for c in sm[0].cures if c.label == "pin the cuBLASLt algorithm")
    assert pinned.verified and pinned.keeps_bits  # the heuristic's own pick, kept: today's bits


@pytest.mark.gpu
def test_a_failed_cure_names_the_kernel_change_behind_it():
    pytest.importorskip("cupti", reason="needs cupti-python to record kernels")
    from cublas_det.prescribe import prescribe
    from cublas_det.core.shapes import parse_shape

    found, _ = prescribe([parse_shape("128x56x4096:nt")], [GemmConfig()], quick=True, kernels=True,
                         timing={"min_visits": 2, "max_visits": 2, "budget_s": 0.1})
    failed = [c for p in found for c in p.cures if c.config is not None and not c.verified and not c.untested
              and c.evidence.startswith("bits change")]
    if not failed:
        pytest.skip("every cure tried for this shape held on this GPU")
    for cure in failed:  # the kernels' own words (kernels.signature.kernel_change)
        assert any(word in cure.evidence for word in ("kernel", "split-K", "grid", "reduce")), cure
        assert "kernels not recorded" not in cure.evidence, cure


@pytest.mark.gpu
def test_an_lt_configuration_is_compared_with_cublasgemmex_in_the_modes_matrix():
    from cublas_det.check import check_many
    from cublas_det.results.check import modes_group

    for shape in ("128x56x4096:nt", "256x512x1024:nn"):
        gemm_ex, lt, nosplit = check_many([shape], ["pedantic", "pedantic+lt", "pedantic+lt-nosplitk"], repeats=2,
                                          scenarios=["repeat", "modes"])
        for other in (lt, nosplit):  # named in the group exactly when the bits are the same
            assert (other.mode_name in modes_group(gemm_ex)) == (other.digest == gemm_ex.digest), (shape, other)
            assert (gemm_ex.mode_name in modes_group(other)) == (other.digest == gemm_ex.digest), (shape, other)


@pytest.mark.gpu
def test_an_lt_configuration_runs_every_scenario_and_the_graph_timing():
    from cublas_det import check_gemm
    from cublas_det.core.shapes import parse_shape
    from cublas_det.timing import time_shapes

    check = check_gemm("128x56x4096:nt", "default+lt", repeats=3,
                       scenarios=["repeat", "fresh-handle", "streams-shared-handle", "streams-per-handle",
                                  "batch-invariance", "sm-count", "modes"])
    assert not check.errors and check.reproducible, check
    run = time_shapes([parse_shape("128x56x4096:nt")], ["default", "default+lt"], min_visits=2, max_visits=2,
                      budget_s=0.1)
    timing = run.timings["128x56x4096:nt"]
    assert timing.arm("DEFAULT/lt").median_us > 0 and not run.errors


def test_the_cheapest_cure_is_timed_verified_and_brings_in_no_other_hazard():
    from cublas_det.prescribe import Cure, Prescription
    from cublas_det.core.shapes import parse_shape

    pinned = GemmConfig(api="lt", lt_algo={"algo_id": 20})
    nosplit = GemmConfig(api="lt", lt_reduction_scheme_mask=0)

    def best(*cures):
        return Prescription(parse_shape("128x56x4096:nt"), GemmConfig(), "sm-count", cures).best.label

    timed = Cure("pin", pinned, True, "", _ratio(1.003, 1.0, 1.006))
    assert best(Cure("untimed", nosplit, True, ""), timed) == "pin"  # no time: last
    assert best(Cure("setup", None, True, ""), Cure("faster", pinned, True, "", _ratio(0.9, 0.88, 0.92))) == "faster"
    assert best(Cure("racy", nosplit, True, "", _ratio(0.95, 0.9, 1.0), introduces=("streams-shared-handle",)),
                timed) == "pin"
    assert best(Cure("untested", nosplit, False, "", _ratio(0.5, 0.4, 0.6), untested=True), timed) == "pin"


def test_prescribe_options_are_refused_before_any_gpu_work(capsys):
    from cublas_det.cli import bench

    for argv in (["--prescribe", "--devices", "all"], ["--sm-counts", "132,114"], ["--prescribe", "--no-timing"],
                 ["--prescribe", "--explain", "128x56x4096:nt"], ["--prescribe", "--sm-counts", "0"]):
        with pytest.raises(SystemExit) as stop:
            bench.main(argv)
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and ("--prescribe" in err or "--sm-counts" in err), (argv, err)


def _lt_handle(config: GemmConfig, workspace_bytes: int):
    """A closed Handle (no cuBLAS handle: none is made) over a cuBLASLt path with a workspace of ``workspace_bytes``
    at 0: what gemm() would have it issue."""
    from cublas_det.core.config import ModeSource
    from cublas_det.core.handle import Handle, LtPath

    return Handle(0, config, ModeSource.ARGUMENT, 0, lt_path=LtPath(config, 0, 0, workspace_bytes))


def test_lt_layouts_and_descriptor_follow_the_gemms_definition(monkeypatch):
    made = []

    def recorder(name):
        def record(*args, **kwargs):
            made.append((name, args))
            if name == "heuristic":
                return [type("Result", (), {"algo": _cublaslt.MatmulAlgo()})()]
            if name == "library":
                return type("Library", (), {"cublasLtMatmul": staticmethod(lambda *a: made.append(("matmul", a)) or 0)})
            return len(made)
        return record

    for name in ("create", "destroy", "matmul_desc_create", "matmul_desc_set", "matmul_desc_destroy", "layout_create",
                 "layout_batch", "layout_destroy", "preference_create", "preference_set", "preference_destroy",
                 "heuristic", "algo_init", "library"):
        monkeypatch.setattr(_cublaslt, name, recorder(name))
    monkeypatch.setattr(plan_module, "_plans", {})  # this test's plans are fakes: never the process's
    monkeypatch.setattr(plan_module, "_lt_handles", {})
    handle = _lt_handle(GemmConfig(api="lt"), 1 << 20)
    path = handle.lt
    # row-major out[7, 3] = a.T @ b with a (5, 7) and b (5, 3), as gemm() gives it (transposes as any truthy
    # value): cuBLASLt's column-major (N, T, 3, 7, 5, ldb=3, lda=7, ldd=3)
    key = GemmKey("float32", "float32", "COMPUTE_32F", True, False, 3, 5, m=7)
    assert handle.definition("float32", "float32", 68, 1, None, 7, 3, 5) == key.laid_out(7, 3, 3)
    args = (handle.definition("float32", "float32", 68, True, False, 7, 3, 5), (0, 0, 0, 0, 0))
    assert handle.definition("float32", "float32", 68, True, False, 7, 3, 5) is args[0]  # made once, not per call
    path.issue(*args, stream_ptr=0)
    layouts = [a for name, a in made if name == "layout_create"]
    assert layouts == [(0, 3, 5, 3), (0, 7, 5, 7), (0, 3, 7, 3)]  # A = b (3x5, ld 3), B = a op T (7x5, ld 7), C 3x7
    sets = {a[1]: a[2] for name, a in made if name == "matmul_desc_set"}
    assert sets[_cublaslt.MatmulDesc.TRANSA] == 0 and sets[_cublaslt.MatmulDesc.TRANSB] == 1
    assert [a for name, a in made if name == "preference_set"][0][1:] == (_cublaslt.Preference.MAX_WORKSPACE_BYTES,
                                                                          1 << 20)
    path.issue(*args, stream_ptr=0)
    assert sum(name == "heuristic" for name, _ in made) == 1  # prepared once, reused
    path.issue(*args, stream_ptr=0, sm_count_target=16)
    assert sum(name == "heuristic" for name, _ in made) == 2  # another SM-count target: planned again
    assert not any(name == "layout_batch" for name, _ in made)
    # A batch of 4 (a (4, 5, 7), b (4, 5, 3)): each layout is told the count and its packed stride.
    batched = handle.definition("float32", "float32", 68, True, False, 7, 3, 5, batch=4)
    assert key_of(batched) == key and batched.strides == (15, 35, 21)  # cuBLAS's A (our B), B (our A), C
    assert GemmKey.of(parse_shape("7x3x5:nt:b4"), GemmConfig(api="lt"),
                      any_m=False).packed(4) == batched  # as prescribe makes it
    path.issue(batched, (0, 0, 0, 0, 0), stream_ptr=0)
    assert [a[1:] for name, a in made if name == "layout_batch"] == [(4, 15), (4, 35), (4, 21)]
    assert sum(name == "heuristic" for name, _ in made) == 3  # a batch is another GEMM: planned for itself
    # One plan per GEMM per process: another handle's path, with the same options, plans nothing anew; another
    # workspace is another heuristic question; one cuBLASLt handle per device.
    _lt_handle(GemmConfig(api="lt"), 1 << 20).lt.issue(*args, stream_ptr=0)
    assert sum(name == "heuristic" for name, _ in made) == 3 and plan_module.plans_made() == 3
    _lt_handle(GemmConfig(api="lt"), 1 << 21).lt.issue(*args, stream_ptr=0)
    assert sum(name == "heuristic" for name, _ in made) == 4 and plan_module.plans_made() == 4
    assert sum(name == "create" for name, _ in made) == 1
    # TF32 math is a compute type to cuBLASLt, for the configuration's own compute type; another stays itself.
    with pytest.raises(InvalidGemm, match="a cublasLtMatmul call has no cublasGemmEx arguments"):
        batched.gemm_ex_args(0, 0, 0, 0, 0)  # its epilogue would be lost: never issued as cublasGemmEx
    tf32 = _lt_handle(GemmConfig.parse("tf32+lt"), 0)
    assert tf32.definition("float32", "float32", 68, False, False, 7, 3, 5).compute_type == "COMPUTE_32F_FAST_TF32"
    assert tf32.definition("float32", "float32", 69, False, False, 7, 3, 5).compute_type == "COMPUTE_32F_PEDANTIC"


def test_one_plan_per_gemm_algorithm_and_device_in_a_process(monkeypatch):
    made = []
    for name in ("create", "matmul_desc_create", "matmul_desc_set", "layout_create", "preference_create",
                 "preference_set"):
        monkeypatch.setattr(_cublaslt, name, lambda *args, name=name: made.append(name) or len(made))
    monkeypatch.setattr(_cublaslt, "heuristic", lambda *args: made.append("heuristic") or [
        type("Result", (), {"algo": _cublaslt.MatmulAlgo()})()])
    monkeypatch.setattr(_cublaslt, "algo_init", lambda *args: _cublaslt.MatmulAlgo())
    monkeypatch.setattr(_cublaslt, "library", lambda: type("Library", (), {"cublasLtMatmul": None}))
    monkeypatch.setattr(plan_module, "_plans", {})  # this test's plans are fakes: never the process's
    monkeypatch.setattr(plan_module, "_lt_handles", {})
    key = GemmKey("bfloat16", "bfloat16", "COMPUTE_32F", False, True, 64, 32, m=16)
    pinned = (("algo_id", 6),)
    plan = plan_module.plan_for(0, key.packed(), pinned, workspace_bytes=1 << 20)
    # A pinned algorithm needs no workspace question: one plan for every workspace.
    assert plan_module.plan_for(0, key.packed(), pinned, workspace_bytes=1 << 25) is plan
    others = [plan_module.plan_for(1, key.packed(), pinned),  # another device
              plan_module.plan_for(0, dataclasses.replace(key, epilogue="BIAS").packed(), pinned),
              plan_module.plan_for(0, dataclasses.replace(key.packed(), sm_count_target=16), pinned),
              plan_module.plan_for(0, key.at(17).packed(), pinned),  # another M
              plan_module.plan_for(0, key.packed(), (("algo_id", 7),)),
              plan_module.plan_for(0, key.packed(), workspace_bytes=1 << 20),  # the heuristic's pick, apart
              plan_module.plan_for(0, key.packed(), workspace_bytes=1 << 25)]
    assert len({id(p) for p in [plan, *others]}) == 8 == plan_module.plans_made()
    assert made.count("create") == 2 and made.count("heuristic") == 2  # a cuBLASLt handle per device
    assert plan_module.plan_for(0, key.packed(), workspace_bytes=1 << 20) is others[-2]
    plan_module._forget_the_parents()  # as a forked child does: nothing of the parent's is used
    assert plan_module.plans_made() == 0 and plan_module.plan_for(0, key.packed(), pinned) is not plan
    assert made.count("create") == 3


# Every (input, output, compute type) the shim runs: fp32 (TF32 too), bf16 and fp16, into their own type or fp32.
KEY_TYPES = [(types, compute.name) for types, computes in COMPUTE_TYPES.items() for compute in computes]


def _old_column_major(key, lda, ldb, ldd, batch, strides, sm_count_target):
    """What LtPlan told cuBLASLt before a key's layout became a GemmDefinition: Geometry.column_major's flip
    (its A is our B, its B our A, D transposed) and the descriptor LtPlan set from the key, written out as it was."""
    a_stride, b_stride, d_stride = strides
    ab_type, d_type = GEMM_TYPES[key.input_dtype].cuda, GEMM_TYPES[key.output_dtype].cuda
    m, n, k = key.m, key.n, key.k
    b = (ab_type, *((k, n) if key.trans_b else (n, k)), ldb, b_stride)
    a = (ab_type, *((m, k) if key.trans_a else (k, m)), lda, a_stride)
    compute = int(ComputeType[key.compute_type])
    scale = GEMM_TYPES[key.output_dtype].cuda if compute in HALF_SCALAR_COMPUTE else GEMM_TYPES["float32"].cuda
    return (compute, scale, key.trans_b, key.trans_a, sm_count_target, key.epilogue == "BIAS", batch,
            (b, a, (d_type, n, m, ldd, d_stride)))


def _old_packed(key, batch):
    """Geometry.packed's leading dimensions and strides (A, B, D) of packed row-major operands, as it was."""
    m, n, k = key.m, key.n, key.k
    strides = (m * k, k * n, m * n) if batch > 1 else (0, 0, 0)
    return (m if key.trans_a else k, k if key.trans_b else n, n, batch, strides)


class _Told:
    """A cuBLASLt binding that records what an LtPlan tells it, in the old settings' order."""

    def __init__(self, monkeypatch):
        self.desc: dict = {}
        self.layouts: list = []
        self.batches: list = []
        record = {"matmul_desc_create": lambda compute, scale: self.desc.update(compute=compute, scale=scale) or 1,
                  "matmul_desc_set": lambda desc, attribute, value, *kind: self.desc.update({attribute: value}),
                  "layout_create": lambda *args: self.layouts.append(args) or len(self.layouts),
                  "layout_batch": lambda layout, batch, stride: self.batches.append((layout, batch, stride)),
                  "algo_init": lambda handle, compute, scale, types, algo: self.desc.update(
                      algo_init=(compute, scale, types)) or _cublaslt.MatmulAlgo(),
                  "library": lambda: type("Library", (), {"cublasLtMatmul": None})}
        for name, fn in record.items():
            monkeypatch.setattr(_cublaslt, name, fn)
        for name in ("matmul_desc_destroy", "layout_destroy"):
            monkeypatch.setattr(_cublaslt, name, lambda value: None)

    def __call__(self, definition) -> tuple:
        self.desc, self.layouts, self.batches = {}, [], []
        LtPlan(0, definition, {"algo_id": 1})
        strides = {layout: stride for layout, _, stride in self.batches}
        batch = self.batches[0][1] if self.batches else 1
        d, desc = _cublaslt.MatmulDesc, self.desc
        types = tuple(layout[0] for layout in self.layouts)
        assert desc["algo_init"] == (desc["compute"], desc["scale"], (*types, types[2]))  # A, B, C and D's types
        return (desc["compute"], desc["scale"], bool(desc[d.TRANSA]), bool(desc[d.TRANSB]),
                desc.get(d.SM_COUNT_TARGET, 0), desc.get(d.EPILOGUE) == int(_cublaslt.Epilogue.BIAS), batch,
                tuple((*layout, strides.get(i + 1, 0)) for i, layout in enumerate(self.layouts)))


def _keys(sizes=(1, 3, 64, 4097), epilogues=("", "BIAS")):
    for ((input_dtype, output_dtype), compute), trans_a, trans_b, epilogue in itertools.product(
            KEY_TYPES, (False, True), (False, True), epilogues):
        for m, n, k in itertools.product(sizes, repeat=3):
            yield GemmKey(input_dtype, output_dtype, compute, trans_a, trans_b, n, k, epilogue, m)


def test_a_laid_out_key_tells_cublaslt_what_the_old_geometry_told_it(monkeypatch):
    told = _Told(monkeypatch)
    for key in _keys():
        tight = _old_packed(key, 1)[:3]
        for extra, batch, sm_count_target in itertools.product((0, 5), (1, 3), (0, 16)):
            lda, ldb, ldd = (ld + extra for ld in tight)
            # a strided batch: packed, a matrix shared by the batch (stride 0), or strides past the packed ones
            batches = ([(0, 0, 0)] if batch == 1 else
                       [_old_packed(key, batch)[4], (0, 7, 0), (lda * 9000, ldb * 9000 + 1, ldd * 9000 + 2)])
            for strides in batches:
                definition = key.laid_out(lda, ldb, ldd, batch, strides, sm_count_target)
                assert told(definition) == _old_column_major(key, lda, ldb, ldd, batch, strides,
                                                                           sm_count_target), (key, definition)
        for batch in (1, 4):
            assert told(key.packed(batch)) == _old_column_major(key, *_old_packed(key, batch), 0), key


def test_a_laid_out_key_is_a_cublas_call_that_reads_back_as_the_key():
    for key in _keys(sizes=(1, 3, 4097)):
        padded = (ld + 3 for ld in _old_packed(key, 1)[:3])
        for definition in (key.packed(), key.packed(batch=8), key.laid_out(*padded, 2, (0, 0, 0), 16)):
            assert definition.is_lt and definition.a_type == GEMM_TYPES[key.input_dtype].cuda_name
            assert key_of(definition) == key, (key, definition)
            assert GemmDefinition.from_dict(definition.to_dict()) == definition  # as a capture file stores it
    with pytest.raises(InvalidGemm, match="ldc = 2 is below m = 3"):  # ldd below N: no GEMM cuBLAS takes
        GemmKey("float32", "float32", "COMPUTE_32F", False, False, 3, 5, m=7).laid_out(5, 3, 2)


def test_the_pytest_plugin_refuses_an_lt_configuration_as_a_math_mode(pytester):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("-q", "-p", "no:cacheprovider", "--cublas-math-mode", "default+lt")
    assert result.ret == 4 and "a math mode, not a cuBLASLt configuration" in result.stderr.str() + result.stdout.str()


def test_a_cure_of_a_mode_that_disallows_reduced_precision_reductions_keeps_fp32_split_k_sums():
    from cublas_det.check.cures import lt_config as _lt

    disallow = GemmConfig(MathMode.PEDANTIC, True, input_dtype="bfloat16", output_dtype="bfloat16")
    assert _lt(disallow).lt_reduction_scheme_mask == int(_cublaslt.ReductionScheme.COMPUTE_TYPE)
    assert _lt(disallow, lt_reduction_scheme_mask=0).lt_reduction_scheme_mask == 0  # no split-K: stricter still
    assert _lt(dataclasses.replace(disallow, disallow_reduced_precision_reduction=False)).lt_reduction_scheme_mask \
        is None  # reduced-precision sums allowed: the heuristic's own choice
    assert _lt(GemmConfig(MathMode.PEDANTIC, True)).lt_reduction_scheme_mask is None  # fp32 sums are fp32 anyway
    into_fp32 = dataclasses.replace(disallow, output_dtype="float32")  # every reduction scheme sums in fp32 there
    assert _lt(into_fp32).lt_reduction_scheme_mask is None
