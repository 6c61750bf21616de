"""The shared words: counts, shares, sizes, wrapping, tables."""

from cublas_det.base.words import noun_for, percent, plural, size, table, wrapped


def test_plural_counts_in_words():
    assert [plural(n, "leaf") for n in (0, 1, 2)] == ["0 leaves", "1 leaf", "2 leaves"]
    assert [plural(n, "step") for n in (1, 3)] == ["1 step", "3 steps"]
    assert [noun_for(n, "leaf") for n in (1, 2)] == ["leaf", "leaves"]  # the noun alone, as the count says it


def test_a_share_is_never_rounded_to_none_or_to_all():
    assert [percent(1, 4096), percent(0, 4096), percent(4095, 4096), percent(4096, 4096), percent(1, 4)] == \
        ["<0.1%", "0.0%", ">99.9%", "100.0%", "25.0%"]
    assert percent(0, 0) == "0.0%"


def test_sizes_briefly_or_in_a_unit():
    assert [size(n) for n in (100, 1536, 32 << 20, 3 << 30)] == ["100", "1.5K", "32M", "3G"]
    assert [size(n, "MiB") for n in (512 << 10, 32 << 20)] == ["0.5 MiB", "32 MiB"]
    assert [size(n, "GiB", places=1) for n in (2**30, int(79.64 * 2**30))] == ["1.0 GiB", "79.6 GiB"]


def test_wrapped_keeps_every_line_within_the_width():
    lines = wrapped("word " * 50, 40)
    assert len(lines) > 1 and max(map(len, lines)) <= 40 and lines[1].startswith("  ")


def test_wrapped_never_splits_a_path_or_a_hyphenated_name():
    path = "/a/" + "long-directory/" * 8 + "file.json"
    lines = wrapped(f"could not read {path}: fresh-handle", 40)
    assert f"  {path}:" in lines and "  fresh-handle" in lines


def test_a_table_aligns_its_columns_to_the_widest_cell():
    rows = [("name", "calls"), ("a-long-name", "3"), ("b", "1,024")]
    assert table(rows, indent="  ", right=(1,)) == ["  name         calls", "  a-long-name      3",
                                                     "  b            1,024"]
    assert table([("a", ""), ("bb", "x")], gap=" ") == ["a", "bb x"]
    assert table([("a", "b")], widths=[3, 1]) == ["a    b"]


def test_several_texts_are_each_wrapped_as_one_is():
    texts = ["word " * 30, "short", ""]
    assert wrapped(texts, 40, "    ", "  ") == [line for text in texts for line in wrapped(text, 40, "    ", "  ")]
    assert wrapped(iter(texts), 40) == wrapped(texts, 40) and wrapped([], 40) == []
