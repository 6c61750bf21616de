import dataclasses
import itertools
import types

import pytest

from cublas_det.core import shapes
from cublas_det.bindings.cublas import Operation
from cublas_det.core.key import like, shape_of
from cublas_det.core.config import GemmConfig
from cublas_det.lock.file import GemmKey
from cublas_det.core.shapes import GemmShape, parse_shape, preset, resolve_shapes


@pytest.mark.parametrize("size, d_model, d_in_proj", [
    ("130m", 768, 3352), ("370m", 1024, 4384), ("780m", 1536, 6448), ("1.3b", 2048, 8512), ("2.7b", 2560, 10576),
])
def test_mamba2_presets_follow_the_formulas(size, d_model, d_in_proj):
    t = 2048
    d_inner = 2 * d_model
    assert d_in_proj == 2 * d_inner + 2 * 128 + d_inner // 64  # 2*d_inner + 2*ngroups*d_state + nheads
    got = {s.name: s for s in preset(f"mamba2-{size}", tokens=t)}
    p = f"mamba2-{size}"
    expected = {
        f"{p}/in_proj/forward": (t, d_in_proj, d_model, "TN"),
        f"{p}/in_proj/dX": (t, d_model, d_in_proj, "NN"),
        f"{p}/in_proj/dW": (d_in_proj, d_model, t, "NT"),
        f"{p}/out_proj/forward": (t, d_model, d_inner, "TN"),
        f"{p}/out_proj/dX": (t, d_inner, d_model, "NN"),
        f"{p}/out_proj/dW": (d_model, d_inner, t, "NT"),
    }
    assert {name: (s.m, s.n, s.k, s.cublas_op) for name, s in got.items()} == expected


def test_mamba2_default_tokens_is_16384_and_matches_the_logged_130m_calls():
    got = {s.name: s for s in preset("mamba2-130m")}
    # cuBLAS logged (column-major m, n, k): fwd T,N 3352x16384x768; dW N,T 768x3352x16384; dX N,N 768x16384x3352
    fwd, dw, dx = got["mamba2-130m/in_proj/forward"], got["mamba2-130m/in_proj/dW"], got["mamba2-130m/in_proj/dX"]
    assert (fwd.n, fwd.m, fwd.k, fwd.cublas_op) == (3352, 16384, 768, "TN")
    assert (dw.n, dw.m, dw.k, dw.cublas_op) == (768, 3352, 16384, "NT")
    assert (dx.n, dx.m, dx.k, dx.cublas_op) == (768, 16384, 3352, "NN")
    assert fwd.flop == dw.flop == dx.flop == 2 * 16384 * 3352 * 768


def test_trunk_preset():
    got = {s.name: (s.m, s.n, s.k, s.cublas_op) for s in preset("trunk")}
    assert got == {
        "trunk/W_in/forward": (4096, 128, 56, "TN"), "trunk/W_in/dX": (4096, 56, 128, "NN"),
        "trunk/W_in/dW": (128, 56, 4096, "NT"),
        "trunk/W_a/forward": (4096, 128, 128, "TN"), "trunk/W_a/dX": (4096, 128, 128, "NN"),
        "trunk/W_a/dW": (128, 128, 4096, "NT"),
        "trunk/W_b/forward": (4096, 128, 128, "TN"), "trunk/W_b/dX": (4096, 128, 128, "NN"),
        "trunk/W_b/dW": (128, 128, 4096, "NT"),
    }


def test_stored_operand_shapes_follow_the_layout():
    dw = parse_shape("128x56x4096:nt")
    assert (dw.trans_a, dw.trans_b) == (True, False)
    assert dw.a_shape == (4096, 128) and dw.b_shape == (4096, 56)
    fwd = parse_shape("4096x128x56:tn")
    assert (fwd.trans_a, fwd.trans_b) == (False, True) and fwd.b_shape == (128, 56)


def test_a_batched_shape_stacks_its_operands_and_reads_back():
    shape = parse_shape("64x32x512:nt:b8")
    assert (shape.m, shape.n, shape.k, shape.batch, shape.cublas_op) == (64, 32, 512, 8, "NT")
    assert shape.a_shape == (8, 512, 64) and shape.b_shape == (8, 512, 32) and shape.c_shape() == (8, 64, 32)
    assert shape.c_shape(rows=3) == (8, 3, 32) and parse_shape("64x32x512:nt").c_shape() == (64, 32)
    assert shape.flop == 8 * parse_shape("64x32x512:nt").flop and shape.name == "64x32x512:nt:b8"
    assert parse_shape(shape.spec) == shape and GemmShape.from_dict(shape.to_dict()) == shape
    assert parse_shape("64x32x512:b1") == parse_shape("64x32x512")  # one matrix: no batch
    with pytest.raises(ValueError, match="batch count must be positive"):
        parse_shape("64x32x512:nt:b0")
    with pytest.raises(ValueError, match="batch must be a positive int"):
        GemmShape("x", 1, 1, 1, batch=0)


@pytest.mark.parametrize("text, expected", [
    ("128x56x4096", (128, 56, 4096, "NN")), ("128X56X4096:NT", (128, 56, 4096, "NT")),
    (" 64 x 64 x 65536 : tt ", (64, 64, 65536, "TT")), ("1x1x1:tn", (1, 1, 1, "TN")),
])
def test_parse_shape(text, expected):
    shape = parse_shape(text)
    assert (shape.m, shape.n, shape.k, shape.cublas_op) == expected
    assert parse_shape(shape.spec) == shape


@pytest.mark.parametrize("text, message", [
    ("128x56", "expected MxNxK"), ("128x56x4096:xx", "expected MxNxK"), ("axbxc", "expected MxNxK"),
    ("0x56x4096", "must be positive, got 0x56x4096"), ("-1x5x5", "positive integers"),
    ("128x56x4096:n", "expected MxNxK"), ("", "expected MxNxK"),
])
def test_parse_shape_errors(text, message):
    with pytest.raises(ValueError, match=message) as info:
        parse_shape(text)
    assert repr(text) in str(info.value)


def test_gemm_shape_rejects_non_positive_dimensions():
    with pytest.raises(ValueError, match="K must be a positive int"):
        GemmShape("x", 1, 1, 0)
    with pytest.raises(ValueError, match="M must be a positive int"):
        GemmShape("x", True, 1, 1)


def test_resolve_shapes_mixes_presets_and_custom_and_dedupes():
    got = resolve_shapes(["trunk", "64x64x65536:nt", "trunk"], tokens=2048)
    assert len(got) == 10 and got[-1].spec == "64x64x65536:nt"
    assert resolve_shapes(["mamba2-130m"], tokens=2048)[2].k == 2048
    with pytest.raises(ValueError, match="neither a preset .* nor a shape"):
        resolve_shapes(["mamba3"])
    with pytest.raises(ValueError, match="unknown preset 'mamba2-9b'"):
        preset("mamba2-9b")
    with pytest.raises(ValueError, match="tokens"):
        preset("mamba2-130m", tokens=0)


def test_catalogue_lists_every_preset_without_a_gpu():
    text = shapes.format_catalogue(resolve_shapes(list(shapes.PRESETS)))
    assert "trunk/W_in/dW" in text and "mamba2-2.7b/in_proj/dW" in text
    assert len(text.splitlines()) == 1 + 9 + 5 * 6


def test_one_layout_swap_and_one_packed_stride_formula_give_the_old_values():
    op_n, op_t = int(Operation.N), int(Operation.T)

    def old_args(trans_a, trans_b, m, n, k, lda, ldb, a, b, out, alpha, beta, compute, ab, c, algo):
        return (op_t if trans_b else op_n, op_t if trans_a else op_n, n, m, k, alpha, b, ab, ldb, a, ab, lda, beta,
                out, c, n, int(compute), algo)

    def old_tail(batch, m, n, k):
        return (batch, k * n, m * k, m * n) if batch > 1 else ()

    sizes = (1, 2, 3, 7, 64, 127, 4096, 65537)
    for (m, n, k), trans_a, trans_b in itertools.product(itertools.product(sizes, repeat=3), (False, True),
                                                         (False, True)):
        lda, ldb = (m if trans_a else k), (k if trans_b else n)
        given = (trans_a, trans_b, m, n, k, lda, ldb, 0x1000, 0x2000, 0x3000, 0x40, 0x80, 68, 0, 2, 99)
        key = GemmKey("float32", "float16", "COMPUTE_32F", trans_a, trans_b, n, k, m=m)
        for batch in (1, 2, 8):  # cublasGemmEx's arguments as the handle issues them, the call's definition's
            args = key.packed(batch, algo=99).gemm_ex_args(0x40, 0x1000, 0x2000, 0x80, 0x3000)
            assert args == old_args(*given) + old_tail(batch, m, n, k)
        for transa, transb in itertools.product("NTC", repeat=2):
            call = types.SimpleNamespace(m=m, n=n, k=k, transa=transa, transb=transb, batch_count=1)
            shape = shape_of(call)
            assert (shape.m, shape.n, shape.k, shape.trans_a, shape.trans_b) == (n, m, k, transb != "N", transa != "N")
        shape = GemmShape("s", m, n, k, trans_a, trans_b)
        old_op = ("T" if trans_b else "N") + ("T" if trans_a else "N")
        assert shape.cublas_op == old_op and GemmKey.of(shape, GemmConfig()).spec == f"Mx{n}x{k}:{old_op.lower()}"


def test_one_catalogue_lookup_finds_what_the_old_role_search_found():
    def old_like(m, n, k, trans_a, trans_b):
        for name in shapes.PRESETS:
            for tokens in dict.fromkeys((m, k)):
                for shape in preset(name, tokens):
                    if (shape.m, shape.n, shape.k, shape.trans_a, shape.trans_b) == (m, n, k, trans_a, trans_b):
                        return shape.name
        return ""

    queries = {(s.m, s.n, s.k, s.trans_a, s.trans_b) for t in (1, 7, 2048, 4096, 16384)
               for name in shapes.PRESETS for s in preset(name, t)}
    queries |= {(m, n, k, not ta, tb) for m, n, k, ta, tb in list(queries)[:40]} | {(64, 64, 64, False, False)}
    for query in queries:
        assert like(GemmShape("q", *query)) == old_like(*query), query
    assert shapes.catalogue_entry(lambda s: s.name == "trunk/W_in/dW").spec.endswith(":nt")
    assert shapes.catalogue_entry(lambda s: False) is None


def test_catalogue_columns_stay_aligned_past_a_long_name():
    long = dataclasses.replace(parse_shape("128x56x4096:nt"), name="a/name/longer/than/thirty-two/columns/dW")
    lines = shapes.format_catalogue([long, parse_shape("4096x56x128:tn")]).splitlines()
    assert len({len(line) for line in lines}) == 1 and lines[1].startswith(long.name + "  ")


def test_a_token_count_below_one_has_no_catalogue_shapes():
    assert shapes.catalogue_entry(lambda s: True, (0, -5)) is None
    assert shapes.catalogue_entry(lambda s: True, (0, 7)) is not None


def test_a_shapes_token_count_is_m_or_k_for_dw():
    for shape in preset("mamba2-130m", 1024):
        assert shapes.token_counts(shape.m, shape.k, shape.gemm_pass) == (shape.tokens,)
    assert shapes.token_counts(1024, 768) == (1024, 768)  # the pass unknown (a captured call): either
